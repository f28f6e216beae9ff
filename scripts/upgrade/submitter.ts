import { performance } from 'node:perf_hooks';
import type { EvoraClient } from '../../src/sdk/index.js';
import type { ChaosJob } from '../../test/chaos/jobs.js';
import type { Prng } from '../../test/chaos/options.js';
import { sleep } from './common.js';

/** An SDK module: this checkout's, or the older checkout's dist/src/sdk/index.js. */
export type Sdk = typeof import('../../src/sdk/index.js');

/** Statuses a resend on the next server may fix. */
const RETRYABLE = new Set(['UNAVAILABLE', 'DEADLINE_EXCEEDED', 'CANCELLED', 'INTERNAL', 'UNKNOWN', 'CLIENT_ERROR']);

/**
 * The mixed run's producer: submits the plan at `rate` jobs/s, up to the share of it the
 * orchestrator allows so far (each step of the upgrade gets its part of the jobs), to the
 * servers added and not yet removed, in turn; loop n speaks through sdks[n % sdks.length].
 * A failed chunk is sent again unchanged (same keys, same content) to the next server, so a
 * resend can only return the jobs already made. Records the ids acknowledged per key (the
 * verdict's input) and how many jobs each server acknowledged in each phase.
 */
export class UpgradeSubmitter {
  /** Job ids acknowledged per key. */
  readonly acked = new Map<string, Set<string>>();
  /** Jobs acknowledged per `phase | server` (`... (old SDK)` through the second SDK). */
  readonly byPhase = new Map<string, number>();
  /** Failed calls per `phase | server: status`. */
  readonly errors = new Map<string, number>();
  phase = '';
  private cursor = 0;
  private allowed = 0;
  private stopping = false;
  /** When the next chunk may go (the rate's pacing). */
  private nextAt = performance.now();
  private readonly clients = new Map<string, EvoraClient[]>();
  private turn = 0;

  constructor(
    private readonly plan: ChaosJob[],
    private readonly rate: number,
    private readonly rng: Prng,
    private readonly sdks: Sdk[],
    private readonly say: (line: string) => void,
  ) {}

  /** A server that takes submissions from now on. */
  add(label: string, address: string): void {
    this.clients.set(label, this.sdks.map((sdk) => new sdk.EvoraClient({ address, deadlineMs: 5000 }) as EvoraClient));
  }

  /** A server that takes none from now on (calls already sent finish or are resent elsewhere). */
  remove(label: string): void {
    for (const c of this.clients.get(label) ?? []) c.close();
    this.clients.delete(label);
  }

  get ackedCount(): number {
    return this.acked.size;
  }

  /** A new phase: its name, and the share of the plan (0..1) that may be submitted by its end. */
  phaseStart(name: string, share: number): void {
    this.phase = name;
    this.allowed = Math.ceil(this.plan.length * share);
  }

  async run(loops = 3): Promise<void> {
    await Promise.all(Array.from({ length: loops }, (_, n) => this.loop(n)));
  }

  stop(): void {
    this.stopping = true;
  }

  close(): void {
    for (const label of [...this.clients.keys()]) this.remove(label);
  }

  private async loop(n: number): Promise<void> {
    while (!this.stopping && this.cursor < this.plan.length) {
      if (this.cursor >= this.allowed) {
        await sleep(50);
        continue;
      }
      const size = Math.min(this.rng.chance(0.3) ? 1 : this.rng.int(2, 40), this.allowed - this.cursor);
      const chunk = this.plan.slice(this.cursor, this.cursor + size);
      this.cursor += chunk.length;
      const at = Math.max(performance.now(), this.nextAt);
      this.nextAt = at + (chunk.length / this.rate) * 1000;
      await sleep(at - performance.now());
      await this.submitUntilAcked(chunk, n % this.sdks.length);
    }
  }

  private async submitUntilAcked(chunk: ChaosJob[], sdk: number): Promise<void> {
    const inputs = chunk.map((j) => ({ queue: j.queue, type: j.kind, payload: j.payload, idempotencyKey: j.key, maxAttempts: j.maxAttempts }));
    for (let delay = 50; !this.stopping; delay = Math.min(delay * 2, 1000)) {
      const labels = [...this.clients.keys()];
      const label = labels[this.turn++ % Math.max(1, labels.length)];
      const client = label === undefined ? undefined : this.clients.get(label)?.[sdk];
      if (!label || !client) {
        await sleep(delay);
        continue;
      }
      const phase = this.phase;
      try {
        const ids = chunk.length === 1 ? [(await client.submit(inputs[0]!)).job.id] : (await client.submitMany(inputs)).map((r) => r.job.id);
        chunk.forEach((j, i) => this.acked.set(j.key, new Set([...(this.acked.get(j.key) ?? []), ids[i]!])));
        const k = `${phase} | ${label}${sdk === 1 ? ' (old SDK)' : ''}`;
        this.byPhase.set(k, (this.byPhase.get(k) ?? 0) + chunk.length);
        return;
      } catch (err) {
        // Read by name: the older SDK's EvoraApiError is another class.
        const code = (err as { codeName?: string }).codeName ?? 'CLIENT_ERROR';
        const k = `${phase} | ${label}: ${code}`;
        this.errors.set(k, (this.errors.get(k) ?? 0) + 1);
        if (!RETRYABLE.has(code)) {
          this.say(`submit refused (${code}): ${(err as Error).message}`);
          return;
        }
        await sleep(delay);
      }
    }
  }
}
