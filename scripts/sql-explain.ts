/**
 * Prints the plan of any store statement (src/store/sql/*.sql) with sample parameters, on a
 * seeded database: the statement exactly as the store runs it, read through the loader.
 *
 *   npx tsx scripts/sql-explain.ts <statementName> [--analyze [--repeat N]] [--generic]
 *   npx tsx scripts/sql-explain.ts --all [--analyze]   (every statement, one seed)
 *   npx tsx scripts/sql-explain.ts --list
 *
 * --analyze runs it (EXPLAIN ANALYZE, BUFFERS) inside a transaction that is rolled back;
 * --repeat N (with --analyze) runs it N times, each rolled back, prints the last plan and the
 * median and the range of the execution times (one run's time is noise on a busy machine).
 * --generic shows the generic plan a prepared statement may settle on (no values).
 * The seed: FINISHED (default 100,000) COMPLETED jobs of history, PENDING (default 10,000)
 * waiting jobs, RUNNING (default 1,000) claimed ones, in queue "explain"; CLAIM (default 100)
 * is the size of the claim and of the batch writes. Starts its own embedded PostgreSQL in a
 * temp folder, or with DATABASE_URL makes a scratch database on that server (the role needs
 * CREATEDB) and drops it afterwards. TYPES=a,b gives jobClaim a job-type filter (the seed's
 * jobs are all of type "noop"; unset = any type).
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { embeddedPostgresStart, freePort } from '../src/server/embedded-postgres.js';
import { statementNamed, statementsDeclared } from '../src/store/catalog.js';
import { migrate } from '../src/store/migrate.js';
import { queryConfig, type Statement } from '../src/store/statements.js';
import { Store } from '../src/store/store.js';
import type { Job } from '../src/domain/job.js';
import { uuidv7 } from '../src/domain/ids.js';

const args = process.argv.slice(2);
const name = args.find((a, i) => !a.startsWith('--') && args[i - 1] !== '--repeat');
const all = args.includes('--all');
if (args.includes('--list') || (!name && !all)) {
  const names = statementsDeclared().map((s) => `${s.name}${s.preparedName ? ' (prepared)' : ''}${s.kind === 'script' ? ' (script)' : ''}`);
  console.log(`usage: npx tsx scripts/sql-explain.ts <statementName>|--all [--analyze] [--generic]\n\n${names.sort().join('\n')}`);
  process.exit(args.includes('--list') ? 0 : 2);
}
const chosen = all ? statementsDeclared().filter((s) => s.kind === 'query') : [statementNamed(name!)];
if (chosen.some((s) => s.kind === 'script')) {
  console.error(`${name} is utility SQL (run as a script): it has no plan`);
  process.exit(2);
}
const analyze = args.includes('--analyze');
const generic = args.includes('--generic');
const repeatAt = args.indexOf('--repeat');
const REPEAT = repeatAt >= 0 ? Number(args[repeatAt + 1]) : 1;
if (!Number.isInteger(REPEAT) || REPEAT < 1 || (REPEAT > 1 && !analyze)) {
  console.error('--repeat wants a whole number >= 1, with --analyze');
  process.exit(2);
}
const FINISHED = Number(process.env.FINISHED ?? 100_000);
const PENDING = Number(process.env.PENDING ?? 10_000);
const RUNNING = Number(process.env.RUNNING ?? 1_000);
const CLAIM = Number(process.env.CLAIM ?? 100);
const QUEUE = 'explain';
const WORKER = 'explain-worker';

/** What the samples refer to. */
interface Seed {
  running: Job[];
  pendingId: string;
  batch: { batchId: number; hiId: string; horizon: string };
}

/** Sample parameters of every statement, by name. */
function samples(seed: Seed): Record<string, Record<string, unknown>> {
  const now = new Date();
  const writes = seed.running.slice(0, CLAIM);
  const ids = writes.map((j) => j.id);
  const tokens = writes.map((j) => j.leaseToken);
  const newIds = Array.from({ length: CLAIM }, () => uuidv7());
  const many = <T>(v: T) => Array.from({ length: CLAIM }, () => v);
  const lock = { lockClass: 1, name: 'explain' };
  return {
    jobInsertMany: {
      ids: newIds, queues: many(QUEUE), types: many('noop'), payloads: many('{}'), priorities: many(0),
      runAts: many(null), idempotencyKeys: many(null), maxAttempts: many(null), policies: many(null), now: null,
    },
    jobInsertHandoff: {
      id: newIds[0], queue: QUEUE, type: 'noop', payload: '{}', priority: 0, runAt: null, idempotencyKey: null,
      maxAttempts: null, policy: null, now: null, handoffWorkerId: WORKER,
    },
    jobFindByKeys: { queues: [QUEUE], idempotencyKeys: ['key-1'], types: ['noop'], payloads: ['{}'], priorities: [0], runAts: [null], maxAttempts: [null], policies: [null] },
    jobClaim: { queues: [QUEUE], limit: CLAIM, workerIds: [WORKER], slotWorkers: many(1), types: process.env.TYPES ? process.env.TYPES.split(',') : null, now: null },
    jobHeartbeatMany: { ids, tokens, now: null },
    jobCompleteMany: { ids, tokens, results: many(null), now: null },
    jobFailMany: { ids, tokens, errors: many('explain'), retryables: many(true), retryAts: many(null), now: null },
    jobSnoozeMany: { ids, tokens, runAts: many(now), now: null },
    jobSweepExpired: { limit: CLAIM, now: new Date(now.getTime() + 3_600_000) },
    // Eight days on, the history is past its 7-day retention (but the open batch's events hold it back).
    jobPrune: { limit: 1000, now: new Date(now.getTime() + 8 * 86_400_000) },
    jobGet: { id: seed.pendingId },
    jobList: { queue: QUEUE, states: ['PENDING'], type: null, idempotencyKey: null, afterId: null, limit: 51 },
    jobCancel: { id: seed.pendingId, now: null, actorKind: 'anonymous', actorTokenId: null, actorName: '' },
    jobRetry: { id: seed.pendingId, now: null, actorKind: 'anonymous', actorTokenId: null, actorName: '' },
    jobRetryMany: {
      queue: QUEUE, states: ['DLQ', 'CANCELLED'], type: null, errorGroup: null, finishedBefore: null, ids: null, cutoff: null, limit: 500, now: null,
      auditTarget: QUEUE, auditChange: '{}', actorKind: 'anonymous', actorTokenId: null, actorName: '',
    },
    jobPurgeMany: {
      queue: QUEUE, states: ['COMPLETED'], type: null, errorGroup: null, finishedBefore: null, ids: null, cutoff: null, limit: 500, now: null,
      auditTarget: QUEUE, auditChange: '{}', actorKind: 'anonymous', actorTokenId: null, actorName: '',
    },
    jobCountMany: { queue: QUEUE, states: ['COMPLETED'], type: null, errorGroup: null, finishedBefore: null, ids: null, projectedOnly: true, retryOnly: false },
    jobDeadLetterGroups: { queue: QUEUE, scanLimit: 10_000, limit: 50 },
    jobDependentsList: { id: seed.pendingId, limit: 1000 },
    jobCascadeQueues: { queue: null, states: ['PENDING', 'WAITING', 'RUNNING'], type: null, errorGroup: null, finishedBefore: null, ids: [seed.pendingId], retry: false },
    jobHoldChain: { id: seed.pendingId },
    workerSessionSync: {
      serverId: uuidv7(), serverAddress: '127.0.0.1:50051', sessionIds: [uuidv7()], workerIds: [WORKER], queues: [QUEUE], jobTypes: [''],
      slots: [10], heldJobs: [0], freeSlots: [10], connectedAts: [now], now: null,
    },
    workerSessionDelete: { sessionIds: [uuidv7()] },
    workerSessionList: { queues: null, staleSeconds: 30, now: null },
    workerSessionPrune: { staleSeconds: 30, now: null },
    jobInsertGraph: {
      ids: newIds, queues: many(QUEUE), types: many('noop'), payloads: many('{}'), priorities: many(0), runAts: many(null),
      idempotencyKeys: many(null), maxAttempts: many(null), policies: many(null), states: many('PENDING'), parentIds: many(null),
      hasDependents: many(false), now: null,
    },
    jobParentsLock: { ids: [seed.pendingId] },
    jobResultsGet: { ids },
    jobClaimLimited: { queues: [QUEUE], limit: CLAIM, workerIds: [WORKER], slotWorkers: many(1), types: null, now: null },
    jobSweepTimedOut: { limit: CLAIM, now: new Date(now.getTime() + 3_600_000) },
    jobWaitingRepair: { limit: 100, now: null },
    jobProgressMany: {
      ids, tokens, percents: many(50), dones: many(null), totals: many(null), messages: many('explain'), checkpoints: many(null),
      reportedAts: many(now), now: null,
    },
    jobAttemptList: { id: seed.pendingId },
    queueWake: { queues: [QUEUE] },
    sessionBackendPid: {},
    migrationOwnerBecome: {},
    dbRoleState: { app: 'evora_explain_app', owner: 'evora_explain_owner' },
    dbRoleSettings: { app: 'evora_explain_app', owner: 'evora_explain_owner', verifier: null },
    queueUpsert: {
      name: QUEUE, maxAttempts: null, backoffKind: null, backoffBaseSeconds: null, backoffCapSeconds: null,
      backoffJitter: null, leaseSeconds: null, maxConcurrency: null, completedRetentionSeconds: null,
      cancelledRetentionSeconds: null, dlqRetentionSeconds: null, attemptTimeoutSeconds: null, ratePerSecond: null,
      rateBurst: null, maxConcurrencyPerKey: null, now: null, change: '{}', actorKind: 'anonymous', actorTokenId: null, actorName: '',
    },
    queueGet: { name: QUEUE },
    scheduleUpsert: {
      name: 'explain', cron: '* * * * *', timezone: 'UTC', queue: QUEUE, type: 'noop', payload: '{}', priority: 0,
      maxAttempts: null, misfirePolicy: 'skip', misfireCap: 1, nextRunAt: now, now: null, actorKind: 'anonymous', actorTokenId: null, actorName: '',
    },
    scheduleGet: { name: 'explain' },
    scheduleList: {},
    scheduleDelete: { name: 'explain', now: null, actorKind: 'anonymous', actorTokenId: null, actorName: '' },
    scheduleSetPaused: { name: 'explain', paused: false, nextRunAt: now, now: null, actorKind: 'anonymous', actorTokenId: null, actorName: '' },
    scheduleDueLock: { limit: 100, now: null },
    scheduleLock: { name: 'explain' },
    scheduleAdvanceMany: { names: ['explain'], nextRunAts: [now], lastRunAts: [null], lastJobIds: [null] },
    scheduleNextDue: { now: null },
    queueList: {},
    queueSetPaused: { name: QUEUE, paused: false, now: null, actorKind: 'anonymous', actorTokenId: null, actorName: '' },
    queueDepths: { now: null },
    outboxLag: { exactRows: 1000, now: null },
    projectorBatchOpenGet: {},
    projectorBatchOpen: { limit: 1000, sink: 'explain' },
    outboxRead: { hiId: seed.batch.hiId, horizon: seed.batch.horizon },
    outboxReadDetails: { hiId: seed.batch.hiId, horizon: seed.batch.horizon },
    projectorBatchClose: { batchId: seed.batch.batchId },
    telemetryBatchMarkApplied: { batchId: seed.batch.batchId },
    telemetryCountsAdd: { queues: [QUEUE, QUEUE], states: ['PENDING', 'RUNNING'], deltas: [-5, 5] },
    telemetryMinutesAdd: {
      queues: [QUEUE], minutes: [new Date(Math.floor(now.getTime() / 60_000) * 60_000)], submitted: [5], completed: [5],
      failed: [0], deadLettered: [0], waitHists: ['{"3": 5}'], runHists: ['{"8": 5}'],
    },
    telemetryRecentEventsCopy: { hiId: seed.batch.hiId, horizon: seed.batch.horizon },
    telemetryRecentEventsPrune: { retentionSeconds: 86_400, limit: 1000, now: null },
    telemetryCountsRead: { queues: null },
    telemetryMinutesRead: { queues: null, since: new Date(now.getTime() - 3_600_000) },
    healthCheck: {},
    adminSessionCheck: {},
    tokenCreate: {
      id: uuidv7(), name: 'explain-token', role: 'viewer', queues: [], secretHashHex: '00'.repeat(32), expiresAt: null, createdBy: '',
      now: null, actorKind: 'anonymous', actorTokenId: null, actorName: '',
    },
    tokenList: { includeRevoked: true },
    tokenRevoke: { token: 'explain-token', now: null, actorKind: 'anonymous', actorTokenId: null, actorName: '' },
    auditList: { actions: ['queue.pause'], target: QUEUE, token: null, beforeId: null, limit: 101 },
    auditPrune: { retentionDays: 365, limit: 1000, now: null },
    auditInsert: { actorKind: 'anonymous', actorTokenId: null, actorName: '', action: 'queue.pause', target: QUEUE, change: '{}', now: null },
    leaderLockTry: lock,
    leaderLockRelease: lock,
    migrationLock: { key: 1 },
    migrationAppliedList: {},
    migrationRecord: { version: 9999, name: 'explain' },
  };
}

/** Seeds history, waiting and running jobs, keyed jobs, and an open projector batch. */
async function seed(store: Store, sql: pg.Pool): Promise<Seed> {
  await store.queueUpsert({ name: QUEUE, leaseSeconds: 30 });
  const client = await sql.connect();
  try {
    // History seeded directly as COMPLETED: replica mode skips the transition trigger.
    await client.query('SET session_replication_role = replica');
    await client.query(
      `INSERT INTO evora.jobs (queue, type, state, max_attempts, attempt, lease_token, finished_at, result)
       SELECT $1, 'noop', 'COMPLETED', 5, 1, gen_random_uuid(), now(), '{}' FROM generate_series(1, $2)`,
      [QUEUE, FINISHED],
    );
  } finally {
    client.release();
  }
  const input = (i: number) => ({ queue: QUEUE, type: 'noop', payload: {}, idempotencyKey: i < 10 ? `key-${i}` : undefined });
  for (let done = 0; done < PENDING + RUNNING; done += 1000) {
    const n = Math.min(1000, PENDING + RUNNING - done);
    await store.jobSubmitMany({ jobs: Array.from({ length: n }, (_, i) => input(done + i)) });
  }
  const running: Job[] = [];
  while (running.length < RUNNING) {
    const got = await store.jobClaim({ queues: [QUEUE], limit: Math.min(1000, RUNNING - running.length), workerId: WORKER });
    if (got.length === 0) break;
    running.push(...got);
  }
  const pending = await store.jobList({ queue: QUEUE, states: ['PENDING'], limit: 1 });
  const batch = await store.projectorBatchOpen({ sink: 'explain', limit: 1000, details: false });
  if (!batch || !pending.jobs[0]) throw new Error('sql-explain: the seed made no outbox batch or no pending job');
  await sql.query('VACUUM ANALYZE evora.jobs');
  await sql.query('VACUUM ANALYZE evora.job_events');
  return { running, pendingId: pending.jobs[0].id, batch: { batchId: batch.batchId, ...batch.outbox } };
}

/** The plan's lines, in a transaction that is rolled back (ANALYZE runs the statement). */
async function explain(sql: pg.Pool, s: Statement, params: Record<string, unknown>): Promise<string[]> {
  const options = generic ? '(GENERIC_PLAN, COSTS OFF)' : analyze ? '(ANALYZE, BUFFERS, COSTS OFF)' : '(COSTS OFF)';
  const config = queryConfig(s as Statement<Record<string, unknown>>, params);
  const client = await sql.connect();
  try {
    await client.query('BEGIN');
    const { rows } = await client.query<{ 'QUERY PLAN': string }>(
      generic ? `EXPLAIN ${options} ${s.text}` : { text: `EXPLAIN ${options} ${s.text}`, values: config.values },
    );
    return rows.map((r) => r['QUERY PLAN']);
  } finally {
    await client.query('ROLLBACK');
    client.release();
  }
}

const dir = process.env.DATABASE_URL ? null : await mkdtemp(join(tmpdir(), 'evora-explain-'));
const embedded = dir ? await embeddedPostgresStart({ dataDir: dir, port: await freePort() }) : null;
const serverUrl = process.env.DATABASE_URL ?? embedded!.url;
const database = `evora_explain_${randomBytes(4).toString('hex')}`;
const url = new URL(serverUrl);
url.pathname = `/${database}`;
const admin = new pg.Client({ connectionString: serverUrl });
await admin.connect();
await admin.query(`CREATE DATABASE ${database}`);
let store: Store | null = null;
const sql = new pg.Pool({ connectionString: url.toString(), max: 2 });
sql.on('error', () => undefined);
try {
  await migrate(url.toString());
  store = new Store({ connectionString: url.toString() });
  const sample = samples(await seed(store, sql));
  console.log(`on ${FINISHED} COMPLETED, ${PENDING} PENDING and ${RUNNING} RUNNING jobs${generic ? ' (generic plans)' : ''}`);
  for (const statement of chosen) {
    const params = sample[statement.name];
    if (!params) throw new Error(`sql-explain: no sample parameters for ${statement.name}: add them to samples()`);
    let lines = await explain(sql, statement, params);
    if (REPEAT > 1) {
      const times: number[] = [];
      for (let i = 0; i < REPEAT; i++) {
        lines = await explain(sql, statement, params);
        const m = /^Execution Time: ([\d.]+) ms/.exec(lines.at(-1) ?? '');
        if (m) times.push(Number(m[1]));
      }
      times.sort((a, b) => a - b);
      lines = [...lines, `Execution Time over ${REPEAT} runs: median ${times[Math.floor((times.length - 1) / 2)]} ms (${times[0]} .. ${times.at(-1)} ms)`];
    }
    const shown = Object.entries(params).map(([k, v]) => `${k}=${Array.isArray(v) ? `[${v.length}]` : v instanceof Date ? v.toISOString() : String(v)}`);
    console.log(`\n${statement.name} (sql/${statement.file}) with ${shown.join(', ') || 'no parameters'}:\n`);
    for (const line of lines) console.log(line);
  }
} finally {
  await store?.close();
  await sql.end();
  await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`).catch(() => undefined);
  await admin.end();
  await embedded?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
}
