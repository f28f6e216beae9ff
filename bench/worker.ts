/**
 * A benchmark worker process (forked by bench/run.ts with IPC): runs one system's worker
 * with a no-op handler and measures, in this process, when handlers start, the
 * enqueue-to-start latency (payload.t, stamped by the harness with the same clock) and when
 * completions are committed. Its stdout and stderr go to the harness's stderr.
 */
import type { FromWorker, SystemWorker, ToWorker, WorkerHooks, WorkerInit, WorkerReport } from './lib/protocol.js';
import { now } from './lib/util.js';

const send = (m: FromWorker) => process.send?.(m);

const state = { started: 0, done: 0, firstStart: 0, lastDone: 0, latencies: [] as number[] };
let lastSent = { started: -1, done: -1 };

const hooks: WorkerHooks = {
  started(payload) {
    const t = now();
    if (state.started++ === 0) state.firstStart = t;
    const stamp = (payload as { t?: unknown } | null)?.t;
    if (typeof stamp === 'number') state.latencies.push(t - stamp);
  },
  done(n) {
    if (n <= 0) return;
    state.done += n;
    state.lastDone = now();
  },
};

async function load(init: WorkerInit): Promise<SystemWorker> {
  switch (init.system) {
    case 'evora':
      return (await import('./workers/evora.js')).evoraWorker(init, hooks);
    case 'graphile-worker':
      return (await import('./workers/graphile.js')).graphileWorker(init, hooks);
    case 'pg-boss':
      return (await import('./workers/pgboss.js')).pgBossWorker(init, hooks);
    case 'bullmq':
      return (await import('./workers/bullmq.js')).bullmqWorker(init, hooks);
  }
}

let worker: SystemWorker | null = null;
let progressTimer: NodeJS.Timeout | null = null;

function report(): WorkerReport {
  return { ...state, latencies: state.latencies, rss: process.memoryUsage.rss() };
}

process.on('message', (m: ToWorker) => {
  void (async () => {
    try {
      switch (m.t) {
        case 'init':
          worker = await load(m);
          await worker.prepare();
          send({ t: 'ready' });
          return;
        case 'go':
          progressTimer = setInterval(() => {
            if (state.started === lastSent.started && state.done === lastSent.done) return;
            lastSent = { started: state.started, done: state.done };
            send({ t: 'progress', started: state.started, done: state.done });
          }, 20);
          await worker!.go();
          return;
        case 'report':
          send({ t: 'report', report: report() });
          return;
        case 'stop':
          if (progressTimer) clearInterval(progressTimer);
          await Promise.race([worker?.stop(), new Promise((r) => setTimeout(r, 10_000))]);
          send({ t: 'stopped' });
          process.disconnect?.();
          setTimeout(() => process.exit(0), 50);
          return;
      }
    } catch (err) {
      send({ t: 'error', message: `${m.t}: ${err instanceof Error ? err.stack ?? err.message : String(err)}` });
    }
  })();
});
process.on('disconnect', () => setTimeout(() => process.exit(0), 1000).unref());
process.on('SIGTERM', () => process.exit(0));
