import { relative } from 'node:path';
import type { Reporter, TestModule, Vitest } from 'vitest/node';
import { findGo, findGrpcurl, findPython, type Tool } from '../interop/toolchain.js';
import { ferretdbMissingReason } from './ferretdb.js';
import { findPgbouncer } from './pgbouncer.js';
import { findChromium } from '../dashboard/helpers.js';

/**
 * A vitest reporter (after the default one, vitest.config.ts) that ends a run in which
 * tests were skipped for a missing toolchain by naming each such group, what is missing,
 * and the one command that installs it all and runs every test (`npm run test:all`, what CI
 * runs). Without it `npm test` on a fresh machine skips the interop and FerretDB tests and
 * still ends green, and nothing says so but a skip count.
 *
 * What must stay true: every test that skips itself for a missing tool (toolchain.ts's
 * skipUnless/need, ferretdb.ts's skipWithoutFerretdb) is in a group below, and a group is
 * only reported when it had skipped tests AND its tools are really missing here, so tests
 * skipped by `-t`, `.only` or `.skip` are never blamed on a toolchain.
 */

/** A set of tests that run only where some toolchain is installed. */
export interface SkipGroup {
  /** What goes untested when the group is skipped. */
  name: string;
  /** Its test files, relative to the repository root. */
  files: string[];
  /** One line per missing tool; empty when everything the group needs is here. */
  missing(): string[];
}

const reasons = (...tools: Tool[]) => tools.flatMap((t) => (t.ok ? [] : [t.reason]));

/** The groups; keep in step with the skip helpers and the install scripts that test:all runs. */
export const SKIP_GROUPS: SkipGroup[] = [
  {
    name: 'interop: the grpcurl walk-through of docs/grpcurl.md',
    files: ['test/interop/grpcurl.test.ts'],
    missing: () => reasons(findGrpcurl()),
  },
  {
    name: 'interop: the Go and Python example workers',
    files: ['test/interop/workers.test.ts', 'test/interop/worker-faults.test.ts'],
    missing: () => reasons(findGo(), findPython()),
  },
  {
    name: 'telemetry on MongoDB (FerretDB)',
    files: ['test/telemetry/ferretdb-smoke.test.ts', 'test/telemetry/projector-mongo.test.ts'],
    missing: () => {
      const reason = ferretdbMissingReason();
      return reason === null ? [] : [reason];
    },
  },
  {
    name: 'the dashboard in a real browser (Chromium)',
    files: ['test/dashboard/auth.test.ts', 'test/dashboard/pages.test.ts', 'test/dashboard/screenshots.test.ts'],
    missing: () => reasons(findChromium()),
  },
  {
    name: 'Evora through pgbouncer in transaction mode',
    files: ['test/server/pgbouncer.test.ts'],
    missing: () => reasons(findPgbouncer()),
  },
];

/** The one command that installs every group's tools and runs the whole suite with none skipped. */
export const TEST_ALL_COMMAND = 'npm run test:all';

/** A skipped group: its name, how many of its tests were skipped, and why. */
export interface SkippedGroup {
  name: string;
  files: string[];
  skipped: number;
  missing: string[];
}

/**
 * The groups that were skipped, given how many tests each file skipped (relative path →
 * count). Pure but for the tool probes, which `groups` supplies.
 */
export function skippedGroups(skippedByFile: ReadonlyMap<string, number>, groups: SkipGroup[] = SKIP_GROUPS): SkippedGroup[] {
  const out: SkippedGroup[] = [];
  for (const g of groups) {
    const skipped = g.files.reduce((n, f) => n + (skippedByFile.get(f) ?? 0), 0);
    if (skipped === 0) continue;
    const missing = g.missing();
    if (missing.length > 0) out.push({ name: g.name, files: g.files, skipped, missing });
  }
  return out;
}

/** The lines that end the run; none when no group was skipped. */
export function skipSummaryLines(skipped: SkippedGroup[]): string[] {
  if (skipped.length === 0) return [];
  const total = skipped.reduce((n, g) => n + g.skipped, 0);
  return [
    '',
    ` NOT RUN: ${total} test${total === 1 ? '' : 's'} in ${skipped.length} group${skipped.length === 1 ? '' : 's'} skipped because a toolchain is missing here; a green run above does not cover them:`,
    ...skipped.flatMap((g) => [
      `   - ${g.name} (${g.files.join(', ')}): ${g.skipped} skipped`,
      ...g.missing.map((m) => `       missing: ${m}`),
    ]),
    ` To install what they need (Go and Python 3 must be on PATH) and run every test, as CI does: ${TEST_ALL_COMMAND}`,
    '',
  ];
}

export default class SkipSummaryReporter implements Reporter {
  private vitest: Vitest | undefined;

  onInit(vitest: Vitest): void {
    this.vitest = vitest;
  }

  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    const root = this.vitest?.config.root ?? process.cwd();
    const skippedByFile = new Map<string, number>();
    for (const m of testModules) {
      let n = 0;
      for (const t of m.children.allTests()) if (t.result().state === 'skipped') n++;
      if (n > 0) skippedByFile.set(relative(root, m.moduleId).split('\\').join('/'), n);
    }
    const lines = skipSummaryLines(skippedGroups(skippedByFile));
    if (lines.length === 0) return;
    const log = this.vitest ? (s: string) => this.vitest!.logger.log(s) : (s: string) => console.log(s);
    for (const l of lines) log(l);
  }
}
