import { describe, expect, it } from 'vitest';
import { jobInput, queueName } from '../helpers/factories.js';
import { storeSetup } from '../helpers/store-setup.js';

/** evora.queue_limit's signature (0016_rate_limit_job_types.sql), which job-claim-limited.sql calls. */
const SIGNATURE = '(text, integer, double precision, integer, bigint, timestamptz, text[])';
const QUEUE_LIMIT = `evora.queue_limit${SIGNATURE}`;

describe('a claim whose later step fails gives back what an earlier statement leased', () => {
  it('the limited statement fails after the plain one committed: the plain queue\'s job is PENDING again, no attempt used', async () => {
    const { store, sql } = await storeSetup();
    const [plain, limited] = [queueName('plain'), queueName('limited')];
    await store.queueUpsert({ name: limited, maxConcurrency: 1 });
    const { job } = await store.jobSubmit({ job: jobInput({ queue: plain }) });
    await store.jobSubmit({ job: jobInput({ queue: limited }) });

    // A real fault in the database: the function the limited claim calls is gone.
    await sql.query(`ALTER FUNCTION ${QUEUE_LIMIT} RENAME TO queue_limit_gone`);
    try {
      const err = await store.jobClaim({ queues: [plain, limited], workerIds: ['w', 'w'] }).then(() => null, (e: unknown) => e);
      expect(err).toBeInstanceOf(Error);
      const { rows } = await sql.query('SELECT state, attempt FROM evora.jobs WHERE id = $1', [job.id]);
      expect(rows[0]).toEqual({ state: 'PENDING', attempt: 0 });
    } finally {
      await sql.query(`ALTER FUNCTION evora.queue_limit_gone${SIGNATURE} RENAME TO queue_limit`);
    }
    const claimed = await store.jobClaim({ queues: [plain], workerIds: ['w'] });
    expect(claimed.map((j) => [j.id, j.attempt])).toEqual([[job.id, 1]]);
  });
});
