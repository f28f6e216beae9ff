import { EvoraApiError, EvoraClient } from '../../src/sdk/index.js';
import type { ChaosJob } from './jobs.js';
import type { Prng } from './options.js';

/**
 * The producer side of the chaos run: submits every planned job with its idempotency key,
 * in batches (SubmitJobs) and singles (the SDK's submit: a request each on a SubmitJobStream),
 * from a few concurrent loops spread over the servers, retrying each failed call with the
 * same keys and the same content (on the next server) until it is acknowledged: across
 * server kills and database outages.
 * It records, per key, the job id of every acknowledgement: a key acknowledged with two
 * different ids is a duplicate even if one row was later lost.
 * Must stay true: a chunk is resent unchanged, so a replay can only return the existing job;
 * ALREADY_EXISTS or INVALID_ARGUMENT would be the server's bug and are counted, not retried
 * forever.
 */

/** What the submitter saw. */
export interface SubmitStats {
  /** Calls made (first tries and retries). */
  calls: number;
  /** Failed calls, by gRPC status name. */
  errorsByCode: Record<string, number>;
  /** Chunks given up on (a status that a retry cannot fix). */
  rejected: number;
}

/** Statuses worth retrying: the server or the database is (for now) unreachable or failing. */
const RETRYABLE = new Set(['UNAVAILABLE', 'DEADLINE_EXCEEDED', 'INTERNAL', 'UNKNOWN', 'CANCELLED', 'RESOURCE_EXHAUSTED', 'ABORTED']);

export class Submitter {
  readonly stats: SubmitStats = { calls: 0, errorsByCode: {}, rejected: 0 };
  /** Job id(s) acknowledged per key. */
  readonly acked = new Map<string, Set<string>>();
  private cursor = 0;
  private readonly clients: EvoraClient[];
  private stopping = false;

  constructor(
    private readonly plan: ChaosJob[],
    addresses: string[],
    private readonly rng: Prng,
    /** The share of the plan that may be submitted by now (0..1): paces submission to the faults. */
    private readonly allowed: () => number,
    private readonly loops = 4,
  ) {
    this.clients = addresses.map((address) => new EvoraClient({ address, deadlineMs: 5000 }));
  }

  /** Jobs whose submit was acknowledged. */
  get ackedCount(): number {
    return this.acked.size;
  }

  /** Submits the whole plan; resolves when every chunk was acknowledged (or given up). */
  async run(): Promise<void> {
    await Promise.all(Array.from({ length: this.loops }, (_, i) => this.loop(i)));
  }

  /** Ends the loops after their current call (Ctrl-C, errors, the overall deadline). */
  stop(): void {
    this.stopping = true;
  }

  close(): void {
    for (const c of this.clients) c.close();
  }

  private async loop(n: number): Promise<void> {
    let server = n % this.clients.length;
    while (!this.stopping && this.cursor < this.plan.length) {
      // Pace: never run ahead of the fault schedule by more than its share.
      if (this.cursor >= Math.ceil(this.plan.length * this.allowed())) {
        await sleep(100);
        continue;
      }
      const size = this.rng.chance(0.3) ? 1 : this.rng.int(2, 50);
      const chunk = this.plan.slice(this.cursor, this.cursor + size);
      this.cursor += chunk.length;
      server = await this.submitUntilAcked(chunk, server);
    }
  }

  /** One chunk, resent until acknowledged; returns the server to use next. */
  private async submitUntilAcked(chunk: ChaosJob[], server: number): Promise<number> {
    let delay = 50;
    for (;;) {
      if (this.stopping) return server;
      const client = this.clients[server]!;
      server = (server + 1) % this.clients.length;
      this.stats.calls++;
      try {
        const inputs = chunk.map((j) => ({
          queue: j.queue,
          type: j.kind,
          payload: j.payload,
          idempotencyKey: j.key,
          maxAttempts: j.maxAttempts,
        }));
        const ids = chunk.length === 1 ? [(await client.submit(inputs[0]!)).job.id] : (await client.submitMany(inputs)).map((r) => r.job.id);
        chunk.forEach((j, i) => {
          const set = this.acked.get(j.key) ?? new Set<string>();
          set.add(ids[i]!);
          this.acked.set(j.key, set);
        });
        return server;
      } catch (err) {
        const code = err instanceof EvoraApiError ? err.codeName : 'CLIENT_ERROR';
        this.stats.errorsByCode[code] = (this.stats.errorsByCode[code] ?? 0) + 1;
        if (err instanceof EvoraApiError && !RETRYABLE.has(code)) {
          this.stats.rejected++;
          process.stderr.write(`chaos: submit rejected (${code}): ${err.message}\n`);
          return server;
        }
        await sleep(delay);
        delay = Math.min(delay * 2, 1000);
      }
    }
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
