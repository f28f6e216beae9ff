import { appendFileSync } from 'node:fs';
import pg from 'pg';
import type { Prng } from './options.js';
import { adminQuery, type ChaosPostgres } from './postgres.js';
import type { ChaosProcess } from './procs.js';

/**
 * The fault kinds of the chaos suite and the schedule that runs them. The schedule is
 * rounds: each round runs every kind once, in an order shuffled by the seeded PRNG, with a
 * PRNG-chosen pause between faults, until every kind has run `perKind` times.
 *
 *   server_kill      SIGKILL of an Evora server; started again 0.3-1.5 s later
 *   worker_kill      SIGKILL of an SDK worker process; started again 0.3-1.5 s later
 *   pg_kill          SIGKILL of the postmaster; started again on the same data folder
 *   pg_outage        the same, started again only after lease + 1-3 s: every running job's
 *                    lease expires during the outage; the workers keep theirs (they go on
 *                    heartbeating), the sweeper holds back once the database is back
 *   worker_stop      SIGSTOP of the worker holding the most slow jobs, for lease + 2.5 s
 *                    (its leases expire and are swept), then SIGCONT: its handlers wake as
 *                    zombies and attempt their stale completions
 *   terminate_storm  pg_terminate_backend of every `evora*` backend, 3-5 times in a burst
 *   pool_exhaust     idle connections opened until PostgreSQL refuses more (53300), held
 *                    2-4 s, then closed
 *
 * Must stay true: the PostgreSQL faults (pg_kill, pg_outage, terminate_storm, pool_exhaust) run one
 * at a time, so none of them finds PostgreSQL down or full because of another; process
 * faults run alongside.
 */
export const FAULT_KINDS = ['server_kill', 'worker_kill', 'pg_kill', 'pg_outage', 'worker_stop', 'terminate_storm', 'pool_exhaust'] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

/** What the faults did, for the summary. */
export interface FaultStats {
  counts: Record<FaultKind, number>;
  /** Backends ended by all storms. */
  backendsTerminated: number;
  /** Exhaustions that reached the refusal (53300), and the most idle connections held. */
  exhaustRefused: number;
  exhaustMaxHeld: number;
  /** Worker stops that caught the worker holding at least one RUNNING slow job. */
  stopsWithSlowJobs: number;
}

/** What the fault runner acts on. */
export interface FaultTargets {
  postgres: ChaosPostgres;
  servers: ChaosProcess[];
  workers: ChaosProcess[];
  /** The chaos queues' lease: a worker_stop lasts longer. */
  leaseSeconds: number;
  /** The fault timeline (one line per fault). */
  logPath: string;
}

/** Runs the schedule; `progress` says how far it is (0..1), for the submitter's pacing. */
export class FaultRunner {
  readonly stats: FaultStats = {
    counts: Object.fromEntries(FAULT_KINDS.map((k) => [k, 0])) as Record<FaultKind, number>,
    backendsTerminated: 0,
    exhaustRefused: 0,
    exhaustMaxHeld: 0,
    stopsWithSlowJobs: 0,
  };
  private background = new Set<Promise<void>>();
  private stopping = false;
  private readonly t0 = Date.now();

  constructor(
    private readonly t: FaultTargets,
    private readonly rng: Prng,
    private readonly perKind: number,
    private readonly gapMs: [number, number],
  ) {}

  /** Fraction of the schedule done. */
  get progress(): number {
    const done = Object.values(this.stats.counts).reduce((a, b) => a + b, 0);
    return Math.min(1, done / (this.perKind * FAULT_KINDS.length));
  }

  /** Runs every round; resolves when the last fault (background ones included) has ended. */
  async run(): Promise<void> {
    for (let round = 0; round < this.perKind && !this.stopping; round++) {
      for (const kind of this.rng.shuffle(FAULT_KINDS)) {
        if (this.stopping) break;
        await this.pause(this.rng.int(this.gapMs[0], this.gapMs[1]));
        await this.one(kind);
      }
    }
    await Promise.all(this.background);
  }

  /** Ends the schedule after the current fault (Ctrl-C, errors). */
  stop(): void {
    this.stopping = true;
  }

  private async one(kind: FaultKind): Promise<void> {
    const { t, rng } = this;
    switch (kind) {
      case 'server_kill': {
        const target = rng.pick(t.servers.filter((s) => s.alive).length ? t.servers.filter((s) => s.alive) : t.servers);
        const delay = rng.int(300, 1500);
        this.note(kind, `${target.name} pid ${target.pid}, restart in ${delay} ms`);
        await target.kill();
        this.later(delay, () => target.start());
        break;
      }
      case 'worker_kill': {
        const live = t.workers.filter((w) => w.alive && !w.stopped);
        const target = rng.pick(live.length ? live : t.workers);
        const delay = rng.int(300, 1500);
        this.note(kind, `${target.name} pid ${target.pid}, restart in ${delay} ms`);
        await target.kill();
        this.later(delay, () => target.start());
        break;
      }
      case 'worker_stop': {
        const target = await this.workerWithMostSlowJobs();
        const ms = t.leaseSeconds * 1000 + 2500;
        this.note(kind, `${target.w.name} pid ${target.w.pid} holding ${target.slow} slow jobs, for ${ms} ms`);
        if (target.slow > 0) this.stats.stopsWithSlowJobs++;
        target.w.freeze();
        this.later(ms, async () => target.w.thaw());
        break;
      }
      case 'pg_kill': {
        const pause = rng.int(200, 1000);
        this.note(kind, `postmaster pid ${await t.postgres.postmasterPid()}, restart after ${pause} ms`);
        await t.postgres.killAndRestart(pause);
        break;
      }
      case 'pg_outage': {
        const pause = t.leaseSeconds * 1000 + rng.int(1000, 3000);
        this.note(kind, `postmaster pid ${await t.postgres.postmasterPid()}, down for ${pause} ms (longer than a lease)`);
        await t.postgres.killAndRestart(pause);
        break;
      }
      case 'terminate_storm': {
        const rounds = rng.int(3, 5);
        let ended = 0;
        for (let i = 0; i < rounds; i++) {
          const rows = await adminQuery<{ n: number }>(t.postgres.url,
            `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))::int AS n
             FROM pg_stat_activity WHERE application_name LIKE 'evora%' AND pid <> pg_backend_pid()`);
          ended += rows[0]?.n ?? 0;
          if (i < rounds - 1) await this.pause(rng.int(100, 400));
        }
        this.stats.backendsTerminated += ended;
        this.note(kind, `${rounds} rounds, ${ended} backends ended`);
        break;
      }
      case 'pool_exhaust': {
        const holdMs = rng.int(2000, 4000);
        const { held, refused } = await this.exhaust(holdMs);
        this.note(kind, `${held} idle connections, ${refused ? 'refused at the limit (53300)' : 'NOT refused'}, held ${holdMs} ms`);
        break;
      }
    }
    this.stats.counts[kind]++;
  }

  /** Opens idle connections until PostgreSQL refuses (53300), holds them, closes them. */
  private async exhaust(holdMs: number): Promise<{ held: number; refused: boolean }> {
    const clients: pg.Client[] = [];
    let refused = false;
    try {
      for (let i = 0; i < this.t.postgres.maxConnections + 10; i++) {
        const c = new pg.Client({ connectionString: this.t.postgres.url, application_name: 'chaos-idle', connectionTimeoutMillis: 5000 });
        c.on('error', () => undefined);
        try {
          await c.connect();
          clients.push(c);
        } catch (err) {
          await c.end().catch(() => undefined);
          if ((err as { code?: string }).code === '53300') {
            refused = true;
            break;
          }
          // Something else (a slot freed and taken meanwhile, a timeout): keep trying.
        }
      }
      if (refused) this.stats.exhaustRefused++;
      this.stats.exhaustMaxHeld = Math.max(this.stats.exhaustMaxHeld, clients.length);
      await this.pause(holdMs);
      return { held: clients.length, refused };
    } finally {
      await Promise.all(clients.map((c) => c.end().catch(() => undefined)));
    }
  }

  /** The worker (not frozen) holding the most RUNNING slow jobs, from the database. */
  private async workerWithMostSlowJobs(): Promise<{ w: ChaosProcess; slow: number }> {
    const rows = await adminQuery<{ worker_id: string; n: number }>(this.t.postgres.url,
      `SELECT worker_id, count(*)::int AS n FROM evora.jobs WHERE state = 'RUNNING' AND type = 'slow' GROUP BY worker_id`);
    const candidates = this.t.workers.filter((w) => w.alive && !w.stopped);
    const pool = candidates.length ? candidates : this.t.workers;
    const slowOf = (w: ChaosProcess) => rows.find((r) => r.worker_id.endsWith(`-${w.pid}`))?.n ?? 0;
    const best = Math.max(...pool.map(slowOf));
    const w = this.rng.pick(pool.filter((x) => slowOf(x) === best));
    return { w, slow: best };
  }

  /** Runs `fn` after `ms` in the background; run() waits for it before it ends. */
  private later(ms: number, fn: () => Promise<void>): void {
    const p = this.pause(ms)
      .then(fn)
      .catch((err: unknown) => this.note('error', `background step failed: ${String(err)}`))
      .finally(() => this.background.delete(p));
    this.background.add(p);
  }

  private pause(ms: number): Promise<void> {
    return new Promise((r) => setTimeout(r, ms));
  }

  private note(kind: string, what: string): void {
    appendFileSync(this.t.logPath, `+${((Date.now() - this.t0) / 1000).toFixed(1)}s ${kind}: ${what}\n`);
  }
}
