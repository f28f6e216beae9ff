import { afterEach } from 'vitest';
import type { ClientDuplexStream } from '@grpc/grpc-js';
import type { Lease, WorkRequest, WorkResponse, LeasedJob } from '../../src/gen/evora/v1/worker.js';
import type { Clients } from './server-setup.js';

/** hello's options: `batches` sets accepts_batches; `held` names leases from an earlier stream. */
export interface HelloOptions {
  batches?: boolean;
  held?: Lease[];
  jobTypes?: string[];
  /** hello.payloads_as_json */
  payloadsAsJson?: boolean;
}

/**
 * A minimal worker on the raw Work stream, for tests of the wire contract. It records
 * everything the server sends and lets the test decide what to answer.
 */
export class RawWorker {
  readonly received: WorkResponse[] = [];
  readonly jobs: LeasedJob[] = [];
  readonly stream: ClientDuplexStream<WorkRequest, WorkResponse>;
  ended = false;
  error: Error | null = null;
  private listeners = new Set<() => void>();

  constructor(clients: Clients) {
    this.stream = clients.workers.work();
    this.stream.on('data', (res: WorkResponse) => {
      this.received.push(res);
      if (res.msg?.$case === 'job') this.jobs.push(res.msg.value);
      if (res.msg?.$case === 'jobs') this.jobs.push(...res.msg.value.jobs);
      for (const l of this.listeners) l();
    });
    this.stream.on('error', (err: Error) => {
      this.error = err;
      this.ended = true;
      for (const l of this.listeners) l();
    });
    this.stream.on('end', () => {
      this.ended = true;
      for (const l of this.listeners) l();
    });
  }

  /** Opens the session and waits for the welcome; `batches` sets hello.accepts_batches. */
  async hello(workerId: string, queues: string[], slots: number, opts: HelloOptions = {}): Promise<void> {
    this.helloSend(workerId, queues, slots, opts);
    await this.welcomed();
  }

  /** Sends hello without waiting for the welcome (messages may follow it at once). */
  helloSend(workerId: string, queues: string[], slots: number, opts: HelloOptions = {}): void {
    const acceptsBatches = opts.batches === undefined ? {} : { acceptsBatches: opts.batches };
    const json = opts.payloadsAsJson === undefined ? {} : { payloadsAsJson: opts.payloadsAsJson };
    this.send({ msg: { $case: 'hello', value: { workerId, queues, slots, held: opts.held ?? [], jobTypes: opts.jobTypes ?? [], ...acceptsBatches, ...json } } });
  }

  /** Resolves once the welcome has arrived. */
  welcomed(): Promise<void> {
    return this.until(() => this.received.some((r) => r.msg?.$case === 'welcome'));
  }

  send(req: WorkRequest): void {
    this.stream.write(req);
  }

  complete(job: LeasedJob, result: Record<string, unknown> = {}): void {
    this.send({ msg: { $case: 'complete', value: { jobId: job.job!.id, leaseToken: job.leaseToken, result } } });
  }

  /** Completes several jobs in one `completes` message. */
  completeMany(jobs: LeasedJob[], result: Record<string, unknown> = {}): void {
    const completes = jobs.map((j) => ({ jobId: j.job!.id, leaseToken: j.leaseToken, result }));
    this.send({ msg: { $case: 'completes', value: { completes } } });
  }

  /** The messages received of one kind (`job`, `jobs`, `ack`, `acks`, ...). */
  messages<K extends NonNullable<WorkResponse['msg']>['$case']>(kind: K) {
    return this.received.flatMap((r) => (r.msg?.$case === kind ? [r.msg.value as Extract<NonNullable<WorkResponse['msg']>, { $case: K }>['value']] : []));
  }

  /** From now on, completes every job as soon as it is pushed (including those already here). */
  autoComplete(result: Record<string, unknown> = {}): void {
    let answered = 0;
    const answer = () => {
      for (; answered < this.jobs.length; answered++) this.complete(this.jobs[answered]!, result);
    };
    this.listeners.add(answer);
    answer();
  }

  /** The acks received for a job (alone or in `acks` batches). */
  acks(jobId: string) {
    return this.allAcks().filter((a) => a.jobId === jobId);
  }

  /** Every ack received, alone or in `acks` batches, in order. */
  allAcks() {
    return this.received.flatMap((r) => (r.msg?.$case === 'ack' ? [r.msg.value] : r.msg?.$case === 'acks' ? r.msg.value.acks : []));
  }

  /** Resolves when `check` holds, re-checking on every message from the server. */
  until(check: () => boolean, timeoutMs = 15_000): Promise<void> {
    if (check()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.listeners.delete(listener);
        reject(new Error(`worker: condition not met in ${timeoutMs} ms (received ${this.received.length} messages)`));
      }, timeoutMs);
      const listener = () => {
        if (check()) {
          clearTimeout(timer);
          this.listeners.delete(listener);
          resolve();
        }
      };
      this.listeners.add(listener);
    });
  }

  /** Ends the stream as a worker that crashed would (no drain). */
  kill(): void {
    this.stream.cancel();
  }

  close(): void {
    if (!this.ended) this.stream.end();
  }
}

/**
 * RawWorkers for one test file: `worker()` opens one; every worker opened is closed after
 * each test (registered with afterEach).
 */
export function rawWorkers(clients: () => Clients): () => RawWorker {
  const open: RawWorker[] = [];
  afterEach(() => {
    for (const w of open.splice(0)) w.close();
  });
  return () => {
    const w = new RawWorker(clients());
    open.push(w);
    return w;
  };
}
