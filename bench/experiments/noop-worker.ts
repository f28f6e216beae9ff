/**
 * A no-op worker process on the raw Work stream, for the dispatcher measurement: completes
 * every job at once and reports, on stdout as JSON lines, each job's enqueue-to-receipt time
 * (from `payload.t`, a Date.now() at submit) and the count of acks.
 * Usage: tsx bench/experiments/noop-worker.ts <address> <queue> <slots>
 */
import * as grpc from '@grpc/grpc-js';
import { WorkerServiceClient, type WorkResponse } from '../../src/gen/evora/v1/worker.js';

const [address = '127.0.0.1:50051', queue = 'bench', slots = '100'] = process.argv.slice(2);
const client = new WorkerServiceClient(address, grpc.credentials.createInsecure());
const stream = client.work();
let acks = 0;
const latencies: number[] = [];
stream.on('data', (res: WorkResponse) => {
  const m = res.msg;
  if (m?.$case === 'job') {
    const t = Number(m.value.job?.payload?.t ?? 0);
    if (t) latencies.push(Date.now() - t);
    stream.write({ msg: { $case: 'complete', value: { jobId: m.value.job!.id, leaseToken: m.value.leaseToken, result: {} } } });
  } else if (m?.$case === 'ack') {
    acks++;
  } else if (m?.$case === 'welcome') {
    process.stdout.write(JSON.stringify({ ready: true }) + '\n');
  }
});
stream.on('error', () => process.exit(0));
setInterval(() => {
  process.stdout.write(JSON.stringify({ acks, latencies: latencies.splice(0) }) + '\n');
}, 100);
stream.write({ msg: { $case: 'hello', value: { workerId: `noop-${process.pid}`, queues: [queue], slots: Number(slots), held: [], jobTypes: [] } } });
process.on('SIGTERM', () => process.exit(0));
