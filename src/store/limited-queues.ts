/**
 * The queues this store has seen limited (Store.jobClaim): their claims go straight to
 * job-claim-limited.sql. Only a hint: each statement checks the queue's settings itself and
 * answers a queue that belongs to the other one with a row without a job, which corrects it.
 * (A module of its own: the claim and the lease writes both take it.)
 */
export type LimitedQueues = Set<string>;
