/**
 * A rolling upgrade of Evora, for real: what docs/store.md "Upgrading" reports comes from
 * runs of this script (its parts are in scripts/upgrade/). Not part of the test suite or CI:
 * it needs a build of an older Evora, and a run takes about a minute.
 *
 * Mixed versions (the default). One private PostgreSQL. The OLDER Evora (--old: a built
 * checkout) creates the roles (`evora db create-role`, superuser URL) and runs two servers as
 * the application role; SDK workers (this checkout's SDK, and some of the older SDK: one
 * pinned to each server, one balanced over all four ports) and a submitter (both SDKs) push
 * --jobs jobs through them (test/chaos/jobs.ts's mix: fast, slow, flaky and doomed jobs)
 * while THIS checkout's Evora is rolled in, each step with its share of the jobs:
 *   1. a new server is started as the application role before the migration: it must refuse;
 *   2. `evora migrate` of this checkout with the superuser's URL, while the old servers work:
 *      its time, the locks its backend was seen holding (sampled every few ms), the longest
 *      lock wait of any other connection meanwhile;
 *   3. a while with only the old servers on the new schema, then two new servers start;
 *   4. the old servers are stopped (SIGTERM) one by one; one is started again after the
 *      migration, twice: it must refuse (exit code and line recorded);
 *   5. every job must end as planned, checked in the database by test/chaos/checks.ts's
 *      verdict (one row per key and the acknowledged id, COMPLETED once, the result of the
 *      lease it holds, the DLQ exactly the doomed jobs, GetQueueStats of the new servers equal
 *      to the database); the old servers' workers must have been given jobs claimed after
 *      the migration and the old servers must have taken submissions after it; no server may
 *      log an error; the new leader must have run the audit retention.
 * --as superuser: the servers connect as the superuser instead (no roles), and steps 1-3 are
 * two new servers started at once, each migrating at its start (exactly one must apply).
 * --limited: the queues have max_concurrency, so claims take the limited path
 * (sql/job-claim-limited.sql, evora.queue_limit).
 *
 *   npm run build                                     # this checkout (the new Evora): dist/
 *   git worktree add --detach /tmp/evora-old <older commit>
 *   (cd /tmp/evora-old && ln -s "$OLDPWD/node_modules" node_modules && npx tsc -p tsconfig.build.json && node scripts/build-assets.mjs)
 *   npx tsx scripts/upgrade-check.ts --old /tmp/evora-old [--as app|superuser] [--limited] [--jobs 4000] [--rate 150]
 *
 * Migration time (--time). No servers. A PostgreSQL at the schema of version --from (this
 * checkout's migrations up to it: a released migration never changes), seeded with
 * --outbox-rows outbox rows and --jobs-rows jobs, then the pending migrations applied by
 * this checkout's runner (what `evora migrate` and a server's start call) while one
 * connection submits jobs (evora.submit_job) and another reads one job by id, in loops
 * (none with --quiet): how long the migrations took, the locks the runner was seen holding,
 * the longest submit and read meanwhile. --blocker-ms N keeps a transaction that wrote to
 * the outbox open for N ms as the migrations start; --lock-timeout-ms N gives the
 * migrations' connection that lock_timeout, in its URL (`?options=-c lock_timeout=N`).
 *
 *   npx tsx scripts/upgrade-check.ts --time --from 21 --outbox-rows 1000000
 *   npx tsx scripts/upgrade-check.ts --time --from 10 --jobs-rows 1000000 [--quiet]
 *   npx tsx scripts/upgrade-check.ts --time --from 21 --outbox-rows 10000 --blocker-ms 3000 [--lock-timeout-ms 1000]
 *
 * Exits 1 when a check of the mixed run fails, or the timed migrations fail. Logs (the
 * servers', PostgreSQL's, every CLI run's) stay in the folder printed first.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { RunContext } from './upgrade/common.js';
import { mixedRun } from './upgrade/mixed.js';
import { upgradeOptionsParse } from './upgrade/options.js';
import { migrationTiming } from './upgrade/timing.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const opts = upgradeOptionsParse(process.argv.slice(2));
const ctx: RunContext = { runDir: mkdtempSync(join(tmpdir(), 'evora-upgrade-')), say: (line) => process.stdout.write(`${line}\n`) };
ctx.say(`logs: ${ctx.runDir}`);
let code = 1;
try {
  code = opts.time ? await migrationTiming(ctx, opts) : await mixedRun(ctx, opts, opts.old!, root);
} catch (err) {
  ctx.say(`the run itself failed: ${(err as Error).stack ?? String(err)}`);
}
process.exit(code);
