import { spawn } from 'node:child_process';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { embeddedPostgresStart, freePort, ownerRecord, processStartTicks } from '../../src/server/embedded-postgres.js';
import { waitFor } from '../helpers/wait.js';

/** Whether the cluster at `url` answers a statement. */
async function answers(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

describe('the embedded PostgreSQL the server runs', () => {
  it('killed (SIGKILL of the postmaster), it is told and started again on the same data, by itself', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'evora-test-embedded-restart-'));
    await chmod(dir, 0o755); // as root, PostgreSQL runs as the postgres OS user, which must reach pgdata/
    const dataDir = join(dir, 'pgdata');
    const exits: string[] = [];
    let restarts = 0;
    const pgh = await embeddedPostgresStart({
      dataDir,
      port: await freePort(),
      postgresFlags: ['-c', 'fsync=off'],
      restartOnExit: true,
      onUnexpectedExit: (how) => exits.push(how),
      onRestarted: () => restarts++,
    });
    try {
      const before = new pg.Client({ connectionString: pgh.url });
      await before.connect();
      await before.query('CREATE TABLE kept (n int); INSERT INTO kept VALUES (7)');
      await before.end();
      const postmaster = Number((await readFile(join(dataDir, 'postmaster.pid'), 'utf8')).split('\n')[0]);
      process.kill(postmaster, 'SIGKILL');
      await waitFor(() => restarts === 1, { timeoutMs: 60_000, what: 'PostgreSQL to be started again' });
      expect(exits).toEqual(['signal SIGKILL']);
      expect(await answers(pgh.url)).toBe(true);
      const c = new pg.Client({ connectionString: pgh.url });
      await c.connect();
      expect((await c.query('SELECT n FROM kept')).rows).toEqual([{ n: 7 }]);
      await c.end();
    } finally {
      await pgh.stop();
      await rm(dir, { recursive: true, force: true });
    }
    // Stopped on purpose, it stays stopped.
    expect(await answers(pgh.url)).toBe(false);
    expect(restarts).toBe(1);
  });

  it('a dead owner whose pid another process took does not hold the data folder; a live owner does', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'evora-test-embedded-owner-'));
    await chmod(dir, 0o755);
    const dataDir = join(dir, 'pgdata');
    const port = await freePort();
    const start = () => embeddedPostgresStart({ dataDir, port, postgresFlags: ['-c', 'fsync=off'] });
    await (await start()).stop(); // initdb once
    // A live process that is not the owner recorded: the owner (this pid, started at
    // another time) died and its pid was given to this one.
    const other = spawn('sleep', ['600'], { stdio: 'ignore' });
    try {
      const recorded = ownerRecord(other.pid!).split(' ');
      expect(recorded[1]).toBe(processStartTicks(other.pid!));
      recorded[1] = String(Number(recorded[1]) - 1);
      await writeFile(join(dataDir, 'evora.owner.pid'), recorded.join(' '));
      const pgh = await start();
      expect(await answers(pgh.url)).toBe(true);
      await pgh.stop();
      // The recorded owner itself, alive: the folder is its.
      await writeFile(join(dataDir, 'evora.owner.pid'), ownerRecord(other.pid!));
      await expect(start()).rejects.toThrow(`another Evora process (pid ${other.pid}) is using the embedded PostgreSQL in ${dataDir}; to use that PostgreSQL, give its URL (DATABASE_URL or --database-url`);
    } finally {
      other.kill('SIGKILL');
      await rm(dir, { recursive: true, force: true });
    }
  });
});
