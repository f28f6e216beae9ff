/**
 * The harness side of the worker processes: forks N copies of bench/worker.ts, hands each
 * its system and configuration, starts them together, follows their progress and
 * collects what they measured.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { stopChild, trackChild } from './infra.js';
import type { FromWorker, SystemName, ToWorker, WorkerReport, WorkerTarget } from './protocol.js';
import { until } from './util.js';

const WORKER_ENTRY = fileURLToPath(new URL('../worker.ts', import.meta.url));

interface Member {
  child: ChildProcess;
  started: number;
  done: number;
  ready: boolean;
  waiters: Map<string, (m: FromWorker) => void>;
  failure: Error | null;
}

export interface WorkerGroupOptions {
  system: SystemName;
  processes: number;
  queue: string;
  target: WorkerTarget;
  config: Record<string, unknown>;
  /** Extra node flags for the worker processes (e.g. --cpu-prof). */
  nodeFlags?: string[];
}

export class WorkerGroup {
  private constructor(private readonly members: Member[]) {}

  /** Forks the processes and waits until each is connected and ready (not yet taking jobs). */
  static async start(opts: WorkerGroupOptions): Promise<WorkerGroup> {
    const members: Member[] = [];
    for (let index = 0; index < opts.processes; index++) {
      const child = trackChild(
        fork(WORKER_ENTRY, [], {
          execArgv: ['--import', 'tsx', ...(opts.nodeFlags ?? [])],
          stdio: ['ignore', 2, 2, 'ipc'],
        }),
      );
      const m: Member = { child, started: 0, done: 0, ready: false, waiters: new Map(), failure: null };
      child.on('message', (msg: FromWorker) => {
        if (msg.t === 'progress') {
          m.started = msg.started;
          m.done = msg.done;
        } else if (msg.t === 'error') {
          m.failure = new Error(`${opts.system} worker ${index}: ${msg.message}`);
        } else if (msg.t === 'ready') {
          m.ready = true;
        }
        m.waiters.get(msg.t)?.(msg);
      });
      child.once('exit', (code, signal) => {
        m.failure ??= new Error(`${opts.system} worker ${index} exited (${signal ?? code})`);
      });
      members.push(m);
      child.send({ t: 'init', system: opts.system, index, queue: opts.queue, target: opts.target, config: opts.config } satisfies ToWorker);
    }
    const group = new WorkerGroup(members);
    await until(() => group.check() && members.every((m) => m.ready), 60_000, `${opts.system} workers to get ready`, 10);
    return group;
  }

  /** Throws the first failure of a member (a crash or an error it reported). */
  private check(): boolean {
    for (const m of this.members) if (m.failure) throw m.failure;
    return true;
  }

  get pids(): number[] {
    return this.members.map((m) => m.child.pid!);
  }

  get started(): number {
    return this.members.reduce((a, m) => a + m.started, 0);
  }

  get done(): number {
    return this.members.reduce((a, m) => a + m.done, 0);
  }

  /** Tells every process to start taking jobs (all at once). */
  go(): void {
    for (const m of this.members) m.child.send({ t: 'go' } satisfies ToWorker);
  }

  /** Waits until `n` completions have been committed in total. */
  async waitDone(n: number, timeoutMs: number, onTick?: () => void): Promise<void> {
    await until(
      () => {
        this.check();
        onTick?.();
        return this.done >= n;
      },
      timeoutMs,
      `${n} completions (have ${this.done})`,
      5,
    );
  }

  private request(m: Member, msg: ToWorker, reply: FromWorker['t'], timeoutMs: number): Promise<FromWorker | null> {
    return new Promise((resolve) => {
      if (m.child.exitCode !== null || !m.child.connected) return resolve(null);
      const timer = setTimeout(() => {
        m.waiters.delete(reply);
        resolve(null);
      }, timeoutMs);
      m.waiters.set(reply, (r) => {
        clearTimeout(timer);
        m.waiters.delete(reply);
        resolve(r);
      });
      m.child.send(msg);
    });
  }

  async reports(): Promise<WorkerReport[]> {
    const replies = await Promise.all(this.members.map((m) => this.request(m, { t: 'report' }, 'report', 10_000)));
    return replies.map((r, i) => {
      if (!r || r.t !== 'report') throw new Error(`worker ${i} sent no report`);
      return r.report;
    });
  }

  /** Asks every process to stop its worker gracefully and exit; kills those that do not. */
  async stop(): Promise<void> {
    await Promise.all(
      this.members.map(async (m) => {
        await this.request(m, { t: 'stop' }, 'stopped', 12_000);
        await stopChild(m.child, 3000);
      }),
    );
  }
}

/** Throughput from a group's reports: first handler start to last committed completion, over all processes. */
export function burnDown(reports: WorkerReport[], jobs: number): { seconds: number; jobsPerSecond: number } {
  const first = Math.min(...reports.filter((r) => r.started > 0).map((r) => r.firstStart));
  const last = Math.max(...reports.map((r) => r.lastDone));
  const seconds = (last - first) / 1000;
  return { seconds, jobsPerSecond: jobs / seconds };
}
