import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { pino } from 'pino';
import { expect, it } from 'vitest';
import { configLoad } from '../../src/server/config.js';
import { freePort } from '../../src/server/embedded-postgres.js';
import { serverStart } from '../../src/server/server.js';

/**
 * With no DATABASE_URL the server starts its own PostgreSQL and logs, in one info line,
 * the URL that psql and `evora migrate --database-url` need (README, "The embedded
 * PostgreSQL"): user postgres, password evora, 127.0.0.1, EVORA_PG_PORT, database postgres.
 */
it('logs the embedded PostgreSQL URL at start, and that URL reaches the migrated database', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'evora-embedded-url-'));
  // As root PostgreSQL runs as the postgres OS user, which must reach pgdata/ inside.
  await chmod(dir, 0o755);
  const port = await freePort();
  const lines: { msg: string; url?: string }[] = [];
  const logger = pino({ level: 'info' }, { write: (s: string) => void lines.push(JSON.parse(s) as { msg: string; url?: string }) });
  const server = await serverStart(configLoad({ host: '127.0.0.1', port: '0', httpPort: '0', dataDir: dir, embeddedPgPort: String(port) }, {}), logger);
  try {
    const url = `postgres://postgres:evora@127.0.0.1:${port}/postgres`;
    const logged = lines.filter((l) => l.msg.startsWith('embedded PostgreSQL at '));
    expect(logged).toEqual([expect.objectContaining({ msg: `embedded PostgreSQL at ${url}`, url })]);
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      const { rows } = await client.query<{ n: number }>('SELECT count(*)::int AS n FROM evora.schema_migrations');
      expect(rows[0]!.n).toBeGreaterThanOrEqual(1);
    } finally {
      await client.end();
    }
  } finally {
    await server.stop();
    await rm(dir, { recursive: true, force: true });
  }
});
