/**
 * Messages between the harness and its worker processes (Node IPC). Worker processes
 * measure in their own process: when each handler started, the enqueue-to-start latency
 * from the payload's timestamp, and when completions were committed.
 */

export type SystemName = 'evora' | 'graphile-worker' | 'pg-boss' | 'bullmq';

/** Where a worker process finds its system. */
export interface WorkerTarget {
  databaseUrl?: string;
  /** Evora's gRPC address. */
  address?: string;
  /** Evora over TLS: PEM of the CA that signed the server's certificate. */
  tlsCa?: string;
  /** Evora with auth on: the workers' API token (role worker). */
  token?: string;
  /** Evora: the URL of the build's SDK module; the source's SDK when unset (bench/lib/evora-build.ts). */
  evoraSdkUrl?: string;
  redis?: { host: string; port: number };
}

export interface WorkerInit {
  t: 'init';
  system: SystemName;
  /** 0-based index of this process in its group. */
  index: number;
  queue: string;
  target: WorkerTarget;
  config: Record<string, unknown>;
}

export type ToWorker = WorkerInit | { t: 'go' } | { t: 'report' } | { t: 'stop' };

/** What a worker process measured. Times are `now()` (epoch ms, sub-ms resolution). */
export interface WorkerReport {
  /** Handlers started. */
  started: number;
  /** Completions committed (acknowledged by the server / seen committed in the database). */
  done: number;
  firstStart: number;
  lastDone: number;
  /** Enqueue-to-handler-start, ms, for jobs whose payload carried `t`. */
  latencies: number[];
  /** Process RSS at the time of the report, bytes. */
  rss: number;
}

export type FromWorker =
  | { t: 'ready' }
  | { t: 'progress'; started: number; done: number }
  | { t: 'report'; report: WorkerReport }
  | { t: 'stopped' }
  | { t: 'error'; message: string };

/** Hooks a system's worker calls; the worker process turns them into a WorkerReport. */
export interface WorkerHooks {
  /** A handler started with this payload. */
  started(payload: unknown): void;
  /** `n` completions were committed just now. */
  done(n: number): void;
}

/** The system-specific part of a worker process. */
export interface SystemWorker {
  /** Connect and get everything ready, without taking jobs yet. */
  prepare(): Promise<void>;
  /** Start taking jobs; resolves when it is ready to receive them. */
  go(): Promise<void>;
  stop(): Promise<void>;
}
