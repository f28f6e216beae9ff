import { resolve } from 'node:path';

/**
 * The chaos suite's settings (flags of `npm run chaos -- ...`) and its seeded randomness.
 * Every random choice of the orchestrator (the fault schedule, the job mix, the delays)
 * comes from a PRNG seeded by `--seed`, so a run can be repeated with the same schedule;
 * what the processes do in between (timing, who claims what) is not reproducible.
 */
export interface ChaosOptions {
  /** Jobs submitted (idempotency keys). */
  jobs: number;
  /** Faults of each kind, at least. */
  faultsPerKind: number;
  seed: number;
  /** Command line that starts one server, `serve` included; flags are appended. */
  serverCmd: string[];
  servers: number;
  workers: number;
  /** Lease of the chaos queues, in seconds: a SIGSTOP lasts longer than this. */
  leaseSeconds: number;
  /** How long the suite waits for every job to become terminal once the faults stop. */
  settleTimeoutMs: number;
  /** Pause between two faults, ms (a range, picked by the PRNG). */
  gapMs: [number, number];
  /** Keep the PostgreSQL data folder after the run (it is removed by default). */
  keepData: boolean;
  short: boolean;
  /**
   * The chaos queues delete jobs at completion (Queue.delete_on_complete): the checks then
   * count a job without a row as completed when it has its `completed` event.
   */
  deleteOnComplete: boolean;
}

const USAGE = `usage: tsx test/chaos/run.ts [--short] [--jobs N] [--faults-per-kind K] [--seed S]
  [--dist DIR | --server-cmd "node dist/src/cli/main.js serve"] [--servers 3] [--workers 6]
  [--lease-seconds 4] [--settle-timeout-s 300] [--keep-data] [--delete-on-complete]`;

/** Parses the suite's flags; throws with the usage on anything unknown. */
export function optionsParse(argv: string[]): ChaosOptions {
  const known = ['short', 'keep-data', 'help', 'delete-on-complete', 'jobs', 'faults-per-kind', 'seed', 'dist', 'server-cmd', 'servers', 'workers',
    'lease-seconds', 'settle-timeout-s'];
  const flags = new Map<string, string | true>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (!arg.startsWith('--')) throw new Error(`unexpected argument ${arg}\n${USAGE}`);
    const [name, inline] = arg.slice(2).split('=', 2) as [string, string | undefined];
    if (!known.includes(name)) throw new Error(`unknown flag --${name}\n${USAGE}`);
    if (['short', 'keep-data', 'help', 'delete-on-complete'].includes(name)) flags.set(name, true);
    else {
      const value = inline ?? argv[++i];
      if (value === undefined) throw new Error(`--${name} needs a value\n${USAGE}`);
      flags.set(name, value);
    }
  }
  if (flags.has('help')) throw new Error(USAGE);
  const short = flags.has('short');
  const num = (name: string, fallback: number): number => {
    const v = flags.get(name);
    if (v === undefined || v === true) return fallback;
    if (!/^\d+$/.test(v)) throw new Error(`--${name} must be a whole number, got ${v}`);
    return Number(v);
  };
  const dist = flags.get('dist');
  const cmd = flags.get('server-cmd');
  const serverCmd =
    typeof cmd === 'string'
      ? cmd.split(/\s+/).filter(Boolean)
      : [process.execPath, resolve(typeof dist === 'string' ? dist : 'dist', 'src/cli/main.js'), 'serve'];
  return {
    jobs: num('jobs', short ? 1000 : 10_000),
    faultsPerKind: num('faults-per-kind', short ? 5 : 40),
    seed: num('seed', Math.floor(Math.random() * 1_000_000)),
    serverCmd,
    servers: num('servers', 3),
    workers: num('workers', short ? 4 : 6),
    leaseSeconds: num('lease-seconds', 4),
    settleTimeoutMs: num('settle-timeout-s', short ? 60 : 300) * 1000,
    gapMs: short ? [200, 700] : [400, 1400],
    keepData: flags.has('keep-data'),
    short,
    deleteOnComplete: flags.has('delete-on-complete'),
  };
}

/** A small seeded PRNG (mulberry32): the suite's only source of randomness. */
export class Prng {
  private state: number;

  constructor(seed: number) {
    this.state = seed >>> 0 || 0x2545f491;
  }

  /** Uniform in [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** A whole number in [lo, hi]. */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }

  chance(p: number): boolean {
    return this.next() < p;
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error('Prng.pick: nothing to pick from');
    return items[Math.floor(this.next() * items.length)]!;
  }

  /** A shuffled copy (Fisher-Yates). */
  shuffle<T>(items: readonly T[]): T[] {
    const out = [...items];
    for (let i = out.length - 1; i > 0; i--) {
      const j = Math.floor(this.next() * (i + 1));
      [out[i], out[j]] = [out[j]!, out[i]!];
    }
    return out;
  }

  /** An independent stream for another purpose, derived from this one's seed. */
  fork(salt: number): Prng {
    return new Prng((this.state ^ Math.imul(salt, 0x9e3779b1)) >>> 0);
  }
}

/** Milliseconds as `9m12s` / `48s`. */
export function durationFormat(ms: number): string {
  const s = Math.round(ms / 1000);
  return s >= 60 ? `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s` : `${s}s`;
}
