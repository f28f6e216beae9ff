/**
 * Where does a SubmitJobs of 1,000 jobs spend its time? Runs a server in this process on an
 * embedded PostgreSQL with pg_stat_statements and submits batches of 1,000 small jobs in
 * three modes, interleaved round by round:
 *   struct   payload as google.protobuf.Struct, whole jobs back (the raw stub; before payload_json)
 *   json     payload_json (what EvoraClient.submitMany sends), whole jobs back
 *   ids      payload_json and ids_only (submitMany(..., { idsOnly: true }))
 * For each: wall µs per job, this process's CPU µs per job (client and server together), and
 * PostgreSQL's execution time of the insert per job (pg_stat_statements). Then the pieces
 * in isolation: request encode/decode, the Struct <-> JSON work, response encode/decode.
 * Usage: npx tsx bench/experiments/profile-enqueue.ts [batches per mode and round=5] [rounds=4]
 * (MODES=ids,json runs only those modes; with node's --cpu-prof the profile is of them alone)
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import * as grpc from '@grpc/grpc-js';
import { configLoad } from '../../src/server/config.js';
import { embeddedPostgresStart, freePort } from '../../src/server/embedded-postgres.js';
import { silentLogger } from '../../src/logger.js';
import { serverStart } from '../../src/server/server.js';
import {
  JobServiceClient,
  SubmitJobsRequest,
  SubmitJobsResponse,
  type SubmitJobRequest,
} from '../../src/gen/evora/v1/job.js';
import { EvoraClient } from '../../src/sdk/index.js';

const BATCHES = Number(process.argv[2] ?? 5);
const ROUNDS = Number(process.argv[3] ?? 4);
const SIZE = 1000;
const dir = await mkdtemp(join(tmpdir(), 'evora-profile-enqueue-'));
const pgh = await embeddedPostgresStart({
  dataDir: dir,
  port: await freePort(),
  postgresFlags: ['-c', 'shared_preload_libraries=pg_stat_statements', '-c', 'pg_stat_statements.track=all'],
});
const server = await serverStart(configLoad({ databaseUrl: pgh.url, port: '0', httpPort: '0' }, {}), silentLogger());
const admin = new pg.Client({ connectionString: pgh.url });
await admin.connect();
await admin.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
const raw = new JobServiceClient(server.address, grpc.credentials.createInsecure());
const client = new EvoraClient({ address: server.address });

const payloadOf = (i: number) => ({ n: i, to: `user${i}@example.com`, tags: ['a', 'b'] });
const structJob = (i: number): SubmitJobRequest => ({
  queue: 'enq', type: 'noop', payload: payloadOf(i), priority: 0, idempotencyKey: '', maxAttempts: 0,
  dependsOn: [], ref: '', dependsOnRefs: [], payloadJson: Buffer.alloc(0),
});
const submitRaw = (req: SubmitJobsRequest) =>
  new Promise<SubmitJobsResponse>((resolve, reject) => raw.submitJobs(req, (err, res) => (err ? reject(err) : resolve(res!))));

type Mode = 'struct' | 'json' | 'ids';
const modes: Mode[] = process.env.MODES ? (process.env.MODES.split(',') as Mode[]) : ['struct', 'json', 'ids'];
const run: Record<Mode, () => Promise<unknown>> = {
  struct: () => submitRaw({ idsOnly: false, jobs: Array.from({ length: SIZE }, (_, i) => structJob(i)) }),
  json: () => client.submitMany(Array.from({ length: SIZE }, (_, i) => ({ queue: 'enq', type: 'noop', payload: payloadOf(i) }))),
  ids: () => client.submitMany(Array.from({ length: SIZE }, (_, i) => ({ queue: 'enq', type: 'noop', payload: payloadOf(i) })), { idsOnly: true }),
};
const totals = Object.fromEntries(modes.map((m) => [m, { wallUs: 0, cpuUs: 0, jobs: 0, pgMs: 0 }])) as Record<
  Mode,
  { wallUs: number; cpuUs: number; jobs: number; pgMs: number }
>;
const insertTime = async () =>
  Number((await admin.query(`SELECT coalesce(sum(total_exec_time), 0) AS ms FROM pg_stat_statements WHERE query LIKE '%INSERT INTO evora.jobs%'`)).rows[0].ms);

for (const m of modes) for (let b = 0; b < 3; b++) await run[m](); // warm-up: plans, JIT, the queue row
for (let r = 0; r < ROUNDS; r++) {
  for (const m of modes) {
    const pg0 = await insertTime();
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    for (let b = 0; b < BATCHES; b++) await run[m]();
    const wall = (performance.now() - t0) * 1000;
    const cpu = process.cpuUsage(cpu0);
    const t = totals[m];
    t.wallUs += wall;
    t.cpuUs += cpu.user + cpu.system;
    t.jobs += BATCHES * SIZE;
    t.pgMs += (await insertTime()) - pg0;
  }
}
console.log('end to end, per job (node = client + server in this process):');
console.table(
  modes.map((m) => {
    const t = totals[m];
    return {
      mode: m,
      'wall µs': +(t.wallUs / t.jobs).toFixed(1),
      'jobs/s': Math.round(t.jobs / (t.wallUs / 1e6)),
      'node CPU µs': +(t.cpuUs / t.jobs).toFixed(1),
      'insert in PostgreSQL µs': +((t.pgMs * 1000) / t.jobs).toFixed(1),
    };
  }),
);

// The pieces in isolation, per job (not with MODES, so that a CPU profile holds the submits alone).
if (!process.env.MODES) {
  const full = await submitRaw({ idsOnly: false, jobs: Array.from({ length: SIZE }, (_, i) => structJob(i)) });
  const idsRes = await submitRaw({ idsOnly: true, jobs: Array.from({ length: SIZE }, (_, i) => structJob(i)) });
  const time = (fn: () => unknown, n = 20) => {
    fn();
    const t0 = performance.now();
    for (let k = 0; k < n; k++) fn();
    return +(((performance.now() - t0) * 1000) / n / SIZE).toFixed(2);
  };
  const structReq = { idsOnly: false, jobs: Array.from({ length: SIZE }, (_, i) => structJob(i)) };
  const jsonReq = {
    idsOnly: true,
    jobs: Array.from({ length: SIZE }, (_, i) => ({ ...structJob(i), payload: undefined, payloadJson: Buffer.from(JSON.stringify(payloadOf(i))) })),
  };
  const structBytes = SubmitJobsRequest.encode(structReq).finish();
  const jsonBytes = SubmitJobsRequest.encode(jsonReq).finish();
  const fullBytes = SubmitJobsResponse.encode(full).finish();
  const idsBytes = SubmitJobsResponse.encode(idsRes).finish();
  console.log('pieces, µs per job:');
  console.table([
    { piece: 'request encode (Struct payload)', us: time(() => SubmitJobsRequest.encode(structReq).finish()), bytesPerJob: structBytes.length / SIZE },
    { piece: 'request encode (payload_json)', us: time(() => SubmitJobsRequest.encode(jsonReq).finish()), bytesPerJob: jsonBytes.length / SIZE },
    { piece: 'request decode (Struct payload)', us: time(() => SubmitJobsRequest.decode(structBytes)) },
    { piece: 'request decode (payload_json)', us: time(() => SubmitJobsRequest.decode(jsonBytes)) },
    { piece: 'Struct payload -> JSON text (server, twice: size check + insert)', us: time(() => structReq.jobs.forEach((j) => (JSON.stringify(j.payload), JSON.stringify(j.payload)))) },
    { piece: 'payload_json bytes -> text (server)', us: time(() => jsonReq.jobs.forEach((j) => new TextDecoder().decode(j.payloadJson))) },
    { piece: 'response encode (whole jobs)', us: time(() => SubmitJobsResponse.encode(full).finish()), bytesPerJob: fullBytes.length / SIZE },
    { piece: 'response encode (ids only)', us: time(() => SubmitJobsResponse.encode(idsRes).finish()), bytesPerJob: idsBytes.length / SIZE },
    { piece: 'response decode (whole jobs)', us: time(() => SubmitJobsResponse.decode(fullBytes)) },
    { piece: 'response decode (ids only)', us: time(() => SubmitJobsResponse.decode(idsBytes)) },
  ]);
}

client.close();
raw.close();
await admin.end();
await server.stop();
await pgh.stop();
await rm(dir, { recursive: true, force: true });
