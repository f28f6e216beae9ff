import type { Redis } from '../lib/infra.js';
import type { SystemName, WorkerTarget } from '../lib/protocol.js';

/** What a system gets to set itself up for one scenario. */
export interface OpenContext {
  /** A fresh database of its own. */
  databaseUrl: string;
  redis: Redis | null;
  /** Where to write logs and profiles. */
  tmpDir: string;
  /** Write a CPU profile of the server process (Evora) into this folder. */
  cpuProfileDir: string | null;
  /** Name of this scenario (for file names). */
  scenario: string;
}

/** A system set up on its database for one scenario. */
export interface SystemInstance {
  queue: string;
  target: WorkerTarget;
  /** Submits one job with its own API (one round trip). */
  submitOne(payload: Record<string, unknown>): Promise<void>;
  /** Submits jobs with its own batch API (one call). */
  submitBatch(payloads: Record<string, unknown>[]): Promise<void>;
  /**
   * Puts `n` finished jobs into the system's own table, as the system would have left them
   * (fast, with SQL or a script), then vacuums and analyzes. Returns a one-line note on
   * what was seeded.
   */
  seedFinished(n: number): Promise<string>;
  /**
   * Updates the planner's statistics of the system's tables (PostgreSQL systems): run after
   * the enqueue, as autovacuum would within a minute in a live system.
   */
  analyze(): Promise<void>;
  /** Jobs of the bench queue not yet finished (a check after a burn-down). */
  remaining(): Promise<number>;
  /** The server process, when the system has one (Evora): RSS is sampled from it. */
  serverPid: number | null;
  /** A connection pooler between the server and PostgreSQL (Evora with `pooler=pgbouncer`), whose CPU a burn-down counts. */
  poolerPid?: number | null;
  close(): Promise<void>;
}

export interface SystemDriver {
  name: SystemName;
  /** null when it can run here; else a one-line reason it is skipped. */
  unavailable: string | null;
  version: string;
  /** Number of worker processes. */
  processes: number;
  /** The effective configuration (defaults merged with --set overrides). */
  config: Record<string, unknown>;
  /** One line: the configuration as a reader would say it. */
  describe(): string;
  open(ctx: OpenContext): Promise<SystemInstance>;
}

/** Merges `--set system.key=value` overrides into a default configuration (numbers and booleans parsed). */
export function configWith(defaults: Record<string, unknown>, overrides: Record<string, string>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...defaults };
  for (const [k, v] of Object.entries(overrides)) {
    out[k] = v === 'true' ? true : v === 'false' ? false : /^-?\d+(\.\d+)?$/.test(v) ? Number(v) : v;
  }
  return out;
}
