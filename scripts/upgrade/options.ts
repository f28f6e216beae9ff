import { resolve } from 'node:path';

/** The flags of scripts/upgrade-check.ts (its header says what each run does). */
export interface UpgradeOptions {
  /** A built checkout of the older Evora (the mixed run). */
  old: string | null;
  jobs: number;
  /** Jobs submitted per second at most. */
  rate: number;
  seed: number;
  /** The role the servers run as: `app` (evora db create-role's; `evora migrate` migrates) or `superuser` (each server migrates at its start). */
  as: 'app' | 'superuser';
  /** The queues limit concurrency (claims go through sql/job-claim-limited.sql and evora.queue_limit). */
  limited: boolean;
  /** The migration-time run instead of the mixed one. */
  time: boolean;
  /** --time: the version the database is migrated to before the seed. */
  from: number;
  outboxRows: number;
  jobsRows: number;
  /** --time: no submit and read loops while the migrations run. */
  quiet: boolean;
  /** --time: a transaction that wrote to the outbox is left open this long as the migrations start. */
  blockerMs: number;
  /** --time: lock_timeout for the migrations' connection, in its URL (`?options=-c lock_timeout=N`); 0: none. */
  lockTimeoutMs: number;
}

export const USAGE = `usage: npx tsx scripts/upgrade-check.ts --old DIR [--as app|superuser] [--limited] [--jobs 4000] [--rate 150] [--seed 1]
       npx tsx scripts/upgrade-check.ts --time --from VERSION [--outbox-rows N] [--jobs-rows N] [--quiet] [--blocker-ms N] [--lock-timeout-ms N]`;

/** Parses the flags; throws with the usage on anything unknown or malformed. */
export function upgradeOptionsParse(argv: string[]): UpgradeOptions {
  const o: UpgradeOptions = {
    old: null, jobs: 4000, rate: 150, seed: 1, as: 'app', limited: false,
    time: false, from: 0, outboxRows: 0, jobsRows: 0, quiet: false, blockerMs: 0, lockTimeoutMs: 0,
  };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i]!;
    const value = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${flag} needs a value\n${USAGE}`);
      return v;
    };
    const int = () => {
      const n = Number(value());
      if (!Number.isInteger(n) || n < 0) throw new Error(`${flag} takes a whole number\n${USAGE}`);
      return n;
    };
    if (flag === '--old') o.old = resolve(value());
    else if (flag === '--jobs') o.jobs = int();
    else if (flag === '--rate') o.rate = Math.max(1, int());
    else if (flag === '--seed') o.seed = int();
    else if (flag === '--as') {
      const as = value();
      if (as !== 'app' && as !== 'superuser') throw new Error(`--as takes app or superuser\n${USAGE}`);
      o.as = as;
    } else if (flag === '--limited') o.limited = true;
    else if (flag === '--time') o.time = true;
    else if (flag === '--from') o.from = int();
    else if (flag === '--outbox-rows') o.outboxRows = int();
    else if (flag === '--jobs-rows') o.jobsRows = int();
    else if (flag === '--quiet') o.quiet = true;
    else if (flag === '--blocker-ms') o.blockerMs = int();
    else if (flag === '--lock-timeout-ms') o.lockTimeoutMs = int();
    else throw new Error(`unknown flag ${flag}\n${USAGE}`);
  }
  if (!o.time && !o.old) throw new Error(`--old is needed (a built checkout of the older Evora)\n${USAGE}`);
  if (o.time && o.from < 1) throw new Error(`--time needs --from (the version the database is at)\n${USAGE}`);
  return o;
}
