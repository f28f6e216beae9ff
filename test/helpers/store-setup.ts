import { afterAll } from 'vitest';
import { Store } from '../../src/store/store.js';
import { testDatabaseCreate } from './db.js';

/**
 * One test file's store on a database of its own. Registers cleanup with afterAll, so a
 * file leaves no pool or database behind.
 */
export async function storeSetup(opts: { maxConnections?: number } = {}) {
  const db = await testDatabaseCreate();
  const store = new Store({ connectionString: db.url, maxConnections: opts.maxConnections ?? 10 });
  afterAll(async () => {
    await store.close();
    await db.drop();
  });
  return { store, url: db.url };
}
