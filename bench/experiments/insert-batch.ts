import { uuidv7 } from '../../src/domain/ids.js';

/**
 * The parameters of one batch of the store's batch insert (job-insert-many*.sql), by name:
 * `size` no-op jobs of queue "enq" with small payloads (`payloadOf(i)`), nothing else set.
 * Shared by the insert experiments (insert-variants.ts, insert-copy.ts) so that they insert
 * the same jobs.
 */
export function insertBatchValues(size: number, payloads: (string | null)[] | string = insertPayloads(size)): Record<string, unknown> {
  return {
    ids: Array.from({ length: size }, () => uuidv7()),
    queues: Array(size).fill('enq'),
    types: Array(size).fill('noop'),
    payloads,
    priorities: Array(size).fill(0),
    runAts: Array(size).fill(null),
    idempotencyKeys: Array(size).fill(null),
    maxAttempts: Array(size).fill(null),
    policies: Array(size).fill(null),
    now: null,
  };
}

/** The payload text of job i of a batch. */
export function insertPayloadOf(i: number): string {
  return JSON.stringify({ n: i, to: `user${i}@example.com`, tags: ['a', 'b'] });
}

/** The payloads of a batch of `size`, as text. */
export function insertPayloads(size: number): string[] {
  return Array.from({ length: size }, (_, i) => insertPayloadOf(i));
}
