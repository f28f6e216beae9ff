/**
 * Every statement the store declares, for the tools that look at all of them (the
 * statement test, scripts/sql-explain.ts): importing this module loads every module that
 * declares statements. The server does not need it.
 */
import './store.js';
import './leader.js';
import './listener.js';
import './migrate.js';
import './roles.js';

export { statementFiles, statementNamed, statementsDeclared } from './statements.js';
