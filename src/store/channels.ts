/**
 * The NOTIFY channels of the store's statements. The statements in ./sql/ write these names
 * as literals (`pg_notify('evora_job_available', queue)`); test/store/statements.test.ts
 * checks that they use no other channel.
 */

/** NOTIFY channel that names a queue which has work claimable now. */
export const CHANNEL_JOB_AVAILABLE = 'evora_job_available';
/**
 * NOTIFY channel that names a RUNNING job an operator has asked to cancel (payload: its id),
 * or a job whose attempt the timeout sweep just failed (payload: "<id> timeout").
 */
export const CHANNEL_JOB_CANCEL = 'evora_job_cancel';
/**
 * NOTIFY channel that names a schedule created, changed or resumed (payload: its name): the
 * leader's scheduler re-reads when its next fire is due.
 */
export const CHANNEL_SCHEDULE_CHANGED = 'evora_schedule_changed';
/**
 * NOTIFY channel sent by every write to the token table (payload: the token's id): each
 * server's token cache (src/auth/) reads the table again at once.
 */
export const CHANNEL_TOKENS_CHANGED = 'evora_tokens_changed';
