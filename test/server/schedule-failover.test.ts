import { spawn, type ChildProcess } from 'node:child_process';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/server/embedded-postgres.js';
import { EvoraClient } from '../../src/sdk/index.js';
import { testDatabaseCreate, type TestDatabase } from '../helpers/db.js';
import { queueName } from '../helpers/factories.js';
import { waitFor } from '../helpers/wait.js';

/**
 * Exactly one job per fire across two real server processes (`evora serve` children on one
 * database) while the leader, whose scheduler fires, is killed with SIGKILL: a per-second
 * schedule (RUN_EACH, so fires missed during the change of leader are caught up) yields one
 * job per second, keys consecutive seconds with no duplicate and no gap.
 */

interface Serve {
  name: string;
  port: number;
  child: ChildProcess;
  out: () => string;
  exited: Promise<void>;
}

let db: TestDatabase;
const serves: Serve[] = [];

async function serve(name: string): Promise<Serve> {
  const port = await freePort();
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'serve', '--port', String(port)], {
    env: { ...process.env, DATABASE_URL: db.url, EVORA_LOG_PRETTY: '0', EVORA_HTTP_PORT: '0', EVORA_ELECTION_INTERVAL_MS: '200', EVORA_LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const s = { name, port, child, out: () => out, exited };
  serves.push(s);
  await waitFor(() => out.includes(`Evora listening on 127.0.0.1:${port}`), { timeoutMs: 30_000, what: `${name} listening` });
  return s;
}

const leads = (s: Serve) => s.out().includes('leader: starting the maintenance services');

beforeAll(async () => {
  db = await testDatabaseCreate();
});
afterAll(async () => {
  for (const s of serves) {
    if (s.child.exitCode === null && s.child.signalCode === null) s.child.kill('SIGTERM');
    await s.exited;
  }
  await db.drop();
});

describe('a per-second schedule across two servers and a SIGKILL of the leader', () => {
  it('one job per fire: consecutive seconds, no duplicates, no gaps', async () => {
    const a = await serve('a');
    const b = await serve('b');
    await waitFor(() => leads(a) || leads(b), { timeoutMs: 15_000, what: 'a leader' });
    const [leader, follower] = leads(a) ? [a, b] : [b, a];

    const name = queueName('every_second');
    const queue = queueName();
    const client = new EvoraClient({ address: `127.0.0.1:${follower.port}` });
    const sql = new pg.Client({ connectionString: db.url });
    await sql.connect();
    try {
      const jobs = async () =>
        (await sql.query<{ id: string; idempotency_key: string }>(`SELECT id, idempotency_key FROM evora.jobs WHERE queue = $1`, [queue])).rows;
      await client.upsertSchedule({ name, cron: '* * * * * *', queue, type: 'tick', misfirePolicy: 'run_each', misfireCap: 100 });
      await waitFor(async () => (await jobs()).length >= 4, { timeoutMs: 15_000, what: 'fires on the first leader' });

      leader.child.kill('SIGKILL');
      await leader.exited;
      const killedAt = Date.now();
      await waitFor(() => leads(follower), { timeoutMs: 15_000, what: 'the follower to lead' });
      // About 10 s of fires in all, the change of leader in the middle.
      await waitFor(async () => (await jobs()).length >= 10 && Date.now() - killedAt > 4000, { timeoutMs: 30_000, what: 'fires on the new leader' });
      await client.pauseSchedule(name);

      const rows = await jobs();
      const prefix = `schedule:${name}:`;
      const seconds = rows.map((r) => {
        expect(r.idempotency_key.startsWith(prefix)).toBe(true);
        expect(r.idempotency_key).toMatch(/:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
        return Date.parse(r.idempotency_key.slice(prefix.length)) / 1000;
      });
      seconds.sort((x, y) => x - y);
      expect(new Set(rows.map((r) => r.id)).size).toBe(rows.length);
      expect(new Set(seconds).size).toBe(seconds.length);
      // Consecutive: no fire missed, none twice, across the kill.
      expect(seconds[seconds.length - 1]! - seconds[0]! + 1).toBe(seconds.length);
      expect(seconds.length).toBeGreaterThanOrEqual(10);

      const schedule = await client.getSchedule(name);
      expect(rows.map((r) => r.id)).toContain(schedule.lastJobId);
      expect(schedule.lastRunAt!.getTime() / 1000).toBe(seconds[seconds.length - 1]);
    } finally {
      client.close();
      await sql.end();
    }
  });
});
