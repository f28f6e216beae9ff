/**
 * A raw Work-stream worker for the fairness experiment: holds each job for `payload.ms`
 * milliseconds (a timer, not CPU), then completes it. Reports on stdout, as JSON lines every
 * 50 ms: the jobs started since the last line as `[key, startMs]` pairs (`payload.k`, and the
 * receipt time on the machine's clock, `performance.timeOrigin + performance.now()`, so the
 * times of several worker processes compare), the count of acks and the time of the latest.
 * The key travels in the payload because a pushed Job does not carry its concurrency_key.
 * Usage: tsx bench/experiments/fairness-worker.ts <address> <queue> <slots>
 */
import * as grpc from '@grpc/grpc-js';
import { WorkerServiceClient, type WorkResponse } from '../../src/gen/evora/v1/worker.js';

const [address = '127.0.0.1:50051', queue = 'fair', slots = '100'] = process.argv.slice(2);
const client = new WorkerServiceClient(address, grpc.credentials.createInsecure());
const stream = client.work();
const clock = () => performance.timeOrigin + performance.now();
let acks = 0;
let lastAckAt = 0;
let starts: [string, number][] = [];
stream.on('data', (res: WorkResponse) => {
  const m = res.msg;
  if (m?.$case === 'job') {
    const job = m.value.job!;
    const leaseToken = m.value.leaseToken;
    starts.push([String(job.payload?.k ?? ''), clock()]);
    setTimeout(() => {
      stream.write({ msg: { $case: 'complete', value: { jobId: job.id, leaseToken, result: {} } } });
    }, Number(job.payload?.ms ?? 0));
  } else if (m?.$case === 'ack') {
    acks++;
    lastAckAt = clock();
  } else if (m?.$case === 'welcome') {
    process.stdout.write(JSON.stringify({ ready: true }) + '\n');
  }
});
stream.on('error', () => process.exit(0));
setInterval(() => {
  process.stdout.write(JSON.stringify({ starts, acks, lastAckAt }) + '\n');
  starts = [];
}, 50);
stream.write({ msg: { $case: 'hello', value: { workerId: `fair-${process.pid}`, queues: [queue], slots: Number(slots), held: [], jobTypes: [] } } });
process.on('SIGTERM', () => process.exit(0));
