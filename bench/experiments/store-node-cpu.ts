/**
 * What the server's own JavaScript spends per job on the store's hot path, without gRPC
 * transport or a worker: claims of BATCH jobs (Store.jobClaim), their push encoded as the
 * Work stream sends it (leasedJobsMessages), and their completion (Store.jobCompleteMany),
 * over ROUNDS burn-downs of JOBS no-op jobs. Reports this process's CPU time per job
 * (process.cpuUsage: PostgreSQL runs in other processes, so it is Node's share alone),
 * claim / encode / complete, the minimum and median over rounds. Single-threaded and
 * in-process, so it moves far less from run to run than the bench's burn-downs do: the
 * measure for a change to what the store reads back and how.
 *
 * Usage: npx tsx bench/experiments/store-node-cpu.ts   (ROUNDS=7 JOBS=20000 BATCH=1000)
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { embeddedPostgresStart, freePort } from '../../src/server/embedded-postgres.js';
import { migrate } from '../../src/store/migrate.js';
import { Store } from '../../src/store/store.js';
import { leasedJobsMessages } from '../../src/grpc/work-messages.js';

const ROUNDS = Number(process.env.ROUNDS ?? 7);
const JOBS = Number(process.env.JOBS ?? 20_000);
const BATCH = Number(process.env.BATCH ?? 1000);

const cpuUs = () => {
  const u = process.cpuUsage();
  return u.user + u.system;
};
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const dir = await mkdtemp(join(tmpdir(), 'evora-store-cpu-'));
const pgh = await embeddedPostgresStart({ dataDir: dir, port: await freePort() });
const { store } = await Store.open({ connectionString: pgh.url, pooler: 'none', maxConnections: 2 });
try {
  await migrate(pgh.url);
  await store.queueUpsert({ name: 'q' });
  const workerIds = Array.from({ length: BATCH }, (_, i) => `w${i % 4}`);
  const r = { claim: [] as number[], encode: [] as number[], complete: [] as number[] };
  for (let round = 0; round < ROUNDS; round++) {
    for (let i = 0; i < JOBS; i += 1000) {
      await store.jobSubmitManyIds({ jobs: Array.from({ length: Math.min(1000, JOBS - i) }, () => ({ queue: 'q', type: 'noop', payload: {} })) });
    }
    let claim = 0;
    let encode = 0;
    let complete = 0;
    for (let done = 0; done < JOBS; ) {
      let t = cpuUs();
      const jobs = await store.jobClaim({ queues: ['q'], workerIds });
      claim += cpuUs() - t;
      if (jobs.length === 0) throw new Error(`the claim took nothing after ${done} jobs`);
      t = cpuUs();
      leasedJobsMessages(jobs, { batches: true });
      encode += cpuUs() - t;
      t = cpuUs();
      const out = await store.jobCompleteMany({ completions: jobs.map((j) => ({ id: j.id, token: j.leaseToken!, result: null })) });
      complete += cpuUs() - t;
      if (out.some((o) => !o.accepted)) throw new Error('a completion was refused');
      done += jobs.length;
    }
    r.claim.push(claim / JOBS);
    r.encode.push(encode / JOBS);
    r.complete.push(complete / JOBS);
  }
  const fmt = (xs: number[]) => `min ${Math.min(...xs).toFixed(2)} median ${median(xs).toFixed(2)}`;
  console.log(`Node CPU µs per job over ${ROUNDS} rounds of ${JOBS} (${BATCH} per statement)`);
  console.log(`  claim    ${fmt(r.claim)}`);
  console.log(`  encode   ${fmt(r.encode)}`);
  console.log(`  complete ${fmt(r.complete)}`);
} finally {
  await store.close();
  await pgh.stop();
  await rm(dir, { recursive: true, force: true });
}
