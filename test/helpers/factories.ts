import { randomBytes } from 'node:crypto';
import type { JobSubmitInput } from '../../src/domain/job.js';

/** A unique queue name, so tests sharing a database never see each other's jobs. */
export function queueName(prefix = 'q'): string {
  return `${prefix}_${randomBytes(4).toString('hex')}`;
}

/** A job to submit, with sensible defaults that a test overrides where it matters. */
export function jobInput(overrides: Partial<JobSubmitInput> & { queue: string }): JobSubmitInput {
  return { type: 'noop', payload: { n: 1 }, ...overrides };
}

/** Many jobs for one queue, payload `{ n: i }`. */
export function jobInputs(queue: string, count: number, overrides: Partial<JobSubmitInput> = {}): JobSubmitInput[] {
  return Array.from({ length: count }, (_, i) => jobInput({ queue, payload: { n: i }, ...overrides }));
}
