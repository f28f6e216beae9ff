import { request as httpRequest } from 'node:http';
import { beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/server/embedded-postgres.js';
import { queueName } from '../helpers/factories.js';
import { RawWorker } from '../helpers/raw-worker.js';
import { call, serverSetup, type Clients } from '../helpers/server-setup.js';
import { waitFor } from '../helpers/wait.js';

let clients: Clients;
let base: string;
beforeAll(async () => {
  const port = await freePort();
  ({ clients } = await serverSetup({ metricsPort: String(port) }));
  base = `http://127.0.0.1:${port}`;
});

const metric = (text: string, name: string, labels: string) => {
  const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}}`));
  return line ? Number(line.split(' ').pop()) : undefined;
};

describe('/metrics and /healthz', () => {
  it('/healthz answers 200 while the process runs (test/server/db-outage.test.ts: during an outage too)', async () => {
    const res = await fetch(`${base}/healthz`);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('ok\n');
    expect((await fetch(`${base}/nope`)).status).toBe(404);
  });

  it('the metrics port on loopback answers /metrics only to a loopback Host: a page rebound to 127.0.0.1 (DNS rebinding) is refused', async () => {
    const url = new URL(base);
    const get = (host: string) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = httpRequest({ host: url.hostname, port: url.port, path: '/metrics', headers: { host } }, (res) => {
          let body = '';
          res.setEncoding('utf8').on('data', (c: string) => (body += c)).on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        });
        req.on('error', reject).end();
      });
    const rebound = await get(`evil.example:${url.port}`);
    expect(rebound.status).toBe(403);
    expect(rebound.body).toMatch(/^served without a token on loopback, this answers only requests addressed to localhost, 127\.0\.0\.1 or \[::1\], not "evil\.example:\d+"\n$/);
    expect((await get(`localhost:${url.port}`)).status).toBe(200);
  });

  it('counts submitted, completed, failed and dead-lettered jobs by queue, with depth, latency histograms, workers and outbox lag', async () => {
    const queue = queueName();
    await call(clients.queues, 'upsertQueue', { name: queue, maxAttempts: 1 });
    await call(clients.jobs, 'submitJobs', { idsOnly: false,
      jobs: Array.from({ length: 4 }, () => ({ queue, type: 't', payload: {}, priority: 0, idempotencyKey: '', maxAttempts: 0, dependsOn: [], ref: '', dependsOnRefs: [], payloadJson: Buffer.alloc(0) })),
    });
    const before = await (await fetch(`${base}/metrics`)).text();
    expect(metric(before, 'evora_jobs_submitted_total', `queue="${queue}"`)).toBe(4);
    expect(metric(before, 'evora_queue_depth', `queue="${queue}"`)).toBe(4);
    expect(before).toMatch(/^evora_outbox_lag_events \d+/m);
    expect(before).toMatch(/^evora_outbox_lag_estimated 0$/m); // a short outbox: counted exactly

    const w = new RawWorker(clients);
    await w.hello('metrics-worker', [queue], 4);
    await w.until(() => w.jobs.length === 4);
    const [a, b, c, d] = w.jobs;
    w.complete(a!);
    w.complete(b!);
    w.send({ msg: { $case: 'fail', value: { jobId: c!.job!.id, leaseToken: c!.leaseToken, error: 'x', nonRetryable: true } } });
    w.send({ msg: { $case: 'fail', value: { jobId: d!.job!.id, leaseToken: d!.leaseToken, error: 'y', nonRetryable: false } } });
    await w.until(() => w.received.filter((r) => r.msg?.$case === 'ack').length === 4);
    const text = await waitFor(async () => {
      const t = await (await fetch(`${base}/metrics`)).text();
      return metric(t, 'evora_jobs_dead_lettered_total', `queue="${queue}"`) === 2 ? t : null;
    });
    expect(metric(text!, 'evora_jobs_completed_total', `queue="${queue}"`)).toBe(2);
    // A non-retryable failure and a last attempt: both failed, both dead-lettered.
    expect(metric(text!, 'evora_jobs_failed_total', `queue="${queue}"`)).toBe(2);
    expect(metric(text!, 'evora_claim_duration_seconds_count', `queue="${queue}"`)).toBeGreaterThanOrEqual(1);
    expect(metric(text!, 'evora_push_latency_seconds_count', `queue="${queue}"`)).toBe(4);
    expect(text).toMatch(/^evora_connected_workers 1$/m);
    // The only server of its database is the leader (elected at start).
    await waitFor(async () => /^evora_leader 1$/m.test(await (await fetch(`${base}/metrics`)).text()), { what: 'evora_leader 1' });
    // Drained: the queue's depth series reads 0; it does not disappear.
    expect(metric(text!, 'evora_queue_depth', `queue="${queue}"`)).toBe(0);
    w.close();
  });

  it('a known queue without claimable jobs has an evora_queue_depth series at 0', async () => {
    const empty = queueName('empty');
    await call(clients.queues, 'upsertQueue', { name: empty });
    const text = await (await fetch(`${base}/metrics`)).text();
    expect(metric(text, 'evora_queue_depth', `queue="${empty}"`)).toBe(0);
  });

  it("Node's process metrics have their conventional names, process_* and nodejs_*, and Evora's are all evora_*", async () => {
    const text = await (await fetch(`${base}/metrics`)).text();
    const names = new Set(text.split('\n').filter((l) => l && !l.startsWith('#')).map((l) => l.split(/[{ ]/)[0]!));
    expect(names).toContain('process_cpu_seconds_total');
    expect(names).toContain('process_resident_memory_bytes');
    expect(names).toContain('nodejs_heap_size_used_bytes');
    expect(names).toContain('nodejs_eventloop_lag_seconds');
    for (const n of names) {
      expect(n, 'one prefix at most').not.toMatch(/^evora_(process|nodejs)_/);
      expect(n, 'every metric is a process, Node or Evora one').toMatch(/^(process|nodejs|evora)_/);
    }
  });
});
