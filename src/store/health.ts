import { rowsOf, statement, type None, type Queryable } from './statements.js';

const healthCheckSql = statement<None, { ok: number }>('health-check', {}, { ok: 'int4' });

/** Resolves when the database answers on `db` (a pool: any connection; a client: that one). */
export async function healthCheck(db: Queryable): Promise<void> {
  await rowsOf(db, healthCheckSql, {});
}
