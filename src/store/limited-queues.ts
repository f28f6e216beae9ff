/**
 * The queues this store has seen limited (Store.jobClaim): their claims go straight to
 * job-claim-limited.sql. Only a hint: each statement checks the queue's settings itself and
 * answers a queue that belongs to the other one with a row without a job, which corrects it.
 * (A module of its own: the claim and the lease writes both take it.)
 */
export type LimitedQueues = Set<string>;

/**
 * Queues a completion found without a concurrency limit, with when (Date.now() ms): a
 * completion reads the row of a queue it knows neither limited nor plain (lately), so that a
 * completion through a server that never claimed from a limited queue still wakes its
 * claimers (jobs-lease.ts). What must stay true: an entry is trusted only PLAIN_QUEUE_TTL_MS,
 * so a limit set later (through any server) is seen by this store's completions within it.
 */
export type PlainQueues = Map<string, number>;

/** How long a completion trusts that a queue has no concurrency limit before reading its row again. */
export const PLAIN_QUEUE_TTL_MS = 5_000;
