import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { chmod, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/server/embedded-postgres.js';
import { EvoraClient, EvoraWorker, type JobOutcome } from '../../src/sdk/index.js';
import { queueName } from '../helpers/factories.js';
import { waitFor } from '../helpers/wait.js';

/**
 * `evora serve` with its embedded PostgreSQL, as a terminal runs it: the serve process leads
 * a process group of its own (detached), and a Ctrl-C is SIGINT to that whole group. The
 * embedded PostgreSQL must not get it (it runs in a group of its own): Evora drains, a
 * completion made during the drain commits, nothing is logged at warn or above, PostgreSQL
 * is stopped last, and the process exits 0 right after logging "stopped". A serve process
 * killed outright leaves its postgres running, and the next start stops that orphan.
 *
 * Each test uses a private data folder and ports, so it disturbs no other test file.
 */

let dataDir: string;
beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'evora-pgroup-'));
  // As root the embedded PostgreSQL runs as the postgres user, which must reach pgdata/ inside.
  await chmod(dataDir, 0o755);
});
afterAll(async () => {
  // A failed test may leave a postgres behind (its own process group): stop it by its pid file.
  const pid = await postmasterPid().catch(() => 0);
  if (pid && alive(pid)) {
    process.kill(pid, 'SIGINT');
    await waitFor(() => !alive(pid), { timeoutMs: 30_000, what: 'the leftover postgres to stop' });
  }
  await rm(dataDir, { recursive: true, force: true });
});

/** One `evora serve` child, leading its own process group; `lines` are its JSON log lines. */
interface Serve {
  child: ChildProcess;
  port: number;
  lines: { level: number; msg: string; at: number }[];
  output: () => string;
  exited: Promise<{ code: number | null; at: number }>;
}

async function serveStart(): Promise<Serve> {
  const port = await freePort();
  const pgPort = await freePort();
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', 'src/cli/main.ts', 'serve', '--port', String(port), '--embedded-pg-port', String(pgPort), '--shutdown-timeout-ms', '20000'],
    {
      env: { ...process.env, DATABASE_URL: '', EVORA_DATA_DIR: dataDir, EVORA_LOG_PRETTY: '0', EVORA_HTTP_PORT: '0', EVORA_LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    },
  );
  let out = '';
  const lines: Serve['lines'] = [];
  let partial = '';
  child.stdout!.on('data', (d: Buffer) => {
    out += d.toString();
    partial += d.toString();
    const parts = partial.split('\n');
    partial = parts.pop()!;
    for (const p of parts) {
      try {
        const j = JSON.parse(p) as { level: number; msg: string };
        lines.push({ level: j.level, msg: j.msg, at: Date.now() });
      } catch {
        lines.push({ level: 100, msg: p, at: Date.now() });
      }
    }
  });
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<{ code: number | null; at: number }>((resolve) => child.on('exit', (code) => resolve({ code, at: Date.now() })));
  await waitFor(() => out.includes(`Evora listening on 127.0.0.1:${port}`) || child.exitCode !== null, { timeoutMs: 60_000, what: 'the listen line' });
  if (child.exitCode !== null) throw new Error(`evora serve exited early: ${out}`);
  return { child, port, lines, output: () => out, exited };
}

/** The pid of the postmaster that runs on the data folder now. */
async function postmasterPid(): Promise<number> {
  return Number((await readFile(join(dataDir, 'pgdata', 'postmaster.pid'), 'utf8')).split('\n')[0]);
}

/** Whether the process runs (a zombie, exited but not yet reaped by its new parent, does not). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
  try {
    // "pid (comm) S ...": the state follows the last ')'.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return true; // no /proc: kill(0) said it exists
  }
}

/** Ends a serve child that a failed test left behind (its whole group). */
function serveKill(s: Serve | null): void {
  if (s && s.child.exitCode === null && s.child.pid) {
    try {
      process.kill(-s.child.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
}

describe('evora serve and its embedded PostgreSQL', () => {
  it('Ctrl-C (SIGINT to the whole foreground group) reaches Evora only: it drains, the completion made during the drain commits, PostgreSQL stops last, exit 0', async () => {
    let serve: Serve | null = null;
    let worker: EvoraWorker | null = null;
    let client: EvoraClient | null = null;
    try {
      serve = await serveStart();
      const address = `127.0.0.1:${serve.port}`;
      const pgPid = await postmasterPid();
      expect(alive(pgPid)).toBe(true);

      const queue = queueName('ctrlc');
      client = new EvoraClient({ address });
      worker = new EvoraWorker({ address, queues: [queue], slots: 1, reconnect: { initialDelayMs: 50, maxDelayMs: 200 } });
      const finished: JobOutcome[] = [];
      worker.on('jobFinished', (o) => finished.push(o));
      let drained = false;
      worker.on('drain', () => (drained = true));
      // The handler finishes only once the server is draining: its completion is in flight during the drain.
      worker.handle('t', async () => {
        await waitFor(() => drained, { timeoutMs: 30_000, what: 'the drain' });
        return { during: 'drain' };
      });
      await worker.start();
      const { job } = await client.submit({ queue, type: 't', payload: {} });
      await waitFor(() => worker!.stats().running === 1, { what: 'the handler running' });

      // What a terminal does on Ctrl-C: SIGINT to every process of the foreground group.
      process.kill(-serve.child.pid!, 'SIGINT');
      const { code, at } = await serve.exited;

      expect(finished).toEqual([expect.objectContaining({ job: expect.objectContaining({ id: job.id }), accepted: true, ackResult: 'accepted' })]);
      expect(code).toBe(0);
      expect(alive(pgPid)).toBe(false);
      // No warning, no error, no stack trace: PostgreSQL outlived the drain.
      expect(serve.lines.filter((l) => l.level >= 40)).toEqual([]);
      expect(serve.output()).not.toMatch(/stack|terminating connection/);
      expect(serve.lines.at(-1)?.msg).toBe('stopped');
      console.log(`[measure] SIGINT to the group: exit ${at - serve.lines.at(-1)!.at} ms after "stopped"`);
    } finally {
      serveKill(serve);
      await worker?.stop({ timeoutMs: 0, graceMs: 0 });
      client?.close();
    }
  });

  it('SIGTERM: exits 0 with "stopped" as its last line', async () => {
    let serve: Serve | null = null;
    try {
      serve = await serveStart();
      const pgPid = await postmasterPid();
      const sent = Date.now();
      serve.child.kill('SIGTERM');
      const { code, at } = await serve.exited;
      expect(code).toBe(0);
      expect(serve.lines.at(-1)?.msg).toBe('stopped');
      expect(alive(pgPid)).toBe(false);
      console.log(`[measure] SIGTERM: stopped ${serve.lines.at(-1)!.at - sent} ms after the signal; exit ${at - serve.lines.at(-1)!.at} ms after "stopped"`);
    } finally {
      serveKill(serve);
    }
  });

  it('a serve process killed outright leaves its postgres running; the next start stops that orphan and runs', async () => {
    let first: Serve | null = null;
    let second: Serve | null = null;
    try {
      first = await serveStart();
      const orphan = await postmasterPid();
      first.child.kill('SIGKILL');
      await first.exited;
      // In a group of its own, postgres was not killed with it.
      expect(alive(orphan)).toBe(true);

      second = await serveStart();
      await waitFor(() => !alive(orphan), { what: 'the orphan gone' });
      const pgPid = await postmasterPid();
      expect(pgPid).not.toBe(orphan);
      second.child.kill('SIGTERM');
      expect((await second.exited).code).toBe(0);
      expect(alive(pgPid)).toBe(false);
    } finally {
      serveKill(first);
      serveKill(second);
    }
  });
});
