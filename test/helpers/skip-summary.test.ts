import { describe, expect, it } from 'vitest';
import { SKIP_GROUPS, TEST_ALL_COMMAND, skippedGroups, skipSummaryLines, type SkipGroup } from './skip-summary.js';
import { existsSync, readFileSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { REPO_ROOT } from '../interop/toolchain.js';

/** The end-of-run summary of toolchain groups that `npm test` skipped (test/helpers/skip-summary.ts). */

const group = (name: string, files: string[], missing: string[]): SkipGroup => ({ name, files, missing: () => missing });

describe('the skip summary', () => {
  it('names each group that skipped tests for a missing tool, with why, and the command that runs them all', () => {
    const groups = [
      group('grpcurl', ['test/a.test.ts'], ['grpcurl not found']),
      group('workers', ['test/b.test.ts', 'test/c.test.ts'], ['go not found', 'no Python venv']),
      group('ferretdb', ['test/d.test.ts'], ['no FerretDB']),
    ];
    const skipped = skippedGroups(new Map([['test/b.test.ts', 3], ['test/c.test.ts', 2], ['test/d.test.ts', 4]]), groups);
    expect(skipped.map((g) => [g.name, g.skipped])).toEqual([['workers', 5], ['ferretdb', 4]]);
    const text = skipSummaryLines(skipped).join('\n');
    expect(text).toContain('NOT RUN: 9 tests in 2 groups');
    expect(text).toContain('workers (test/b.test.ts, test/c.test.ts): 5 skipped');
    expect(text).toContain('missing: go not found');
    expect(text).toContain('missing: no Python venv');
    expect(text).not.toContain('grpcurl');
    expect(text.trimEnd().split('\n').pop()).toMatch(new RegExp(`${TEST_ALL_COMMAND}$`));
  });

  it('blames no toolchain when its tools are there (tests skipped by -t, .only or .skip) or nothing was skipped', () => {
    const groups = [group('present', ['test/a.test.ts'], [])];
    expect(skippedGroups(new Map([['test/a.test.ts', 3]]), groups)).toEqual([]);
    expect(skipSummaryLines([])).toEqual([]);
  });

  it('covers every test file that skips itself for a missing tool, and test:all is a script', async () => {
    const covered = new Set(SKIP_GROUPS.flatMap((g) => g.files));
    for (const f of covered) expect(existsSync(join(REPO_ROOT, f)), f).toBe(true);
    const files = (await readdir(join(REPO_ROOT, 'test'), { recursive: true })).filter((f) => f.endsWith('.test.ts'));
    const skippers = files
      .map((f) => `test/${f.split('\\').join('/')}`)
      .filter((f) => /\b(skipUnless|skipWithoutFerretdb|need)\(/.test(readFileSync(join(REPO_ROOT, f), 'utf8')));
    expect(skippers.length).toBeGreaterThanOrEqual(4);
    for (const f of skippers) expect(covered.has(f), `${f} skips for missing tools but is in no SKIP_GROUPS entry`).toBe(true);
    const pkg = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    expect(TEST_ALL_COMMAND).toBe('npm run test:all');
    expect(pkg.scripts['test:all']).toContain('EVORA_INTEROP_REQUIRED=1');
    expect(pkg.scripts['test:all']).toContain('EVORA_TELEMETRY_REQUIRED=1');
  });
});
