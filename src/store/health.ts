import { rowsOf, statement, type None, type Queryable } from './statements.js';

const healthCheckSql = statement<None, { ok: number }>('health-check', {}, { ok: 'int4' });
const dbNowSql = statement<None, { now: Date }>('db-now', {}, { now: 'timestamptz' });

/** Resolves when the database answers on `db` (a pool: any connection; a client: that one). */
export async function healthCheck(db: Queryable): Promise<void> {
  await rowsOf(db, healthCheckSql, {});
}

/** The database's now() (Store.dbNow). */
export async function dbNow(db: Queryable): Promise<Date> {
  const [row] = await rowsOf(db, dbNowSql, {});
  return row!.now;
}
