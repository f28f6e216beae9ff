import { describe, expect, it } from 'vitest';
import { doomedCount, jobsPlan } from './jobs.js';
import { optionsParse, Prng } from './options.js';

// The chaos suite's own logic that needs no processes (docs/chaos.md): its seeded
// schedule, its job plan and its flags. The suite itself runs with `npm run chaos`.
describe('chaos suite plan', () => {
  it('a seed gives the same random stream, another seed another', () => {
    const a = new Prng(42);
    const b = new Prng(42);
    const seqA = Array.from({ length: 20 }, () => a.int(0, 1000));
    expect(Array.from({ length: 20 }, () => b.int(0, 1000))).toEqual(seqA);
    const c = new Prng(43);
    expect(Array.from({ length: 20 }, () => c.int(0, 1000))).not.toEqual(seqA);
  });

  it('the job plan depends only on the seed: a retried submit sends the same job', () => {
    expect(jobsPlan(1000, 7)).toEqual(jobsPlan(1000, 7));
    expect(jobsPlan(1000, 7).map((j) => j.kind)).not.toEqual(jobsPlan(1000, 8).map((j) => j.kind));
  });

  it('plans exactly the doomed jobs the DLQ check expects, each key once', () => {
    for (const n of [200, 1000, 10_000]) {
      const plan = jobsPlan(n, 1);
      expect(plan.filter((j) => j.kind === 'doomed')).toHaveLength(doomedCount(n));
      expect(new Set(plan.map((j) => j.key)).size).toBe(n);
    }
    expect(doomedCount(10_000)).toBe(25);
    const plan = jobsPlan(10_000, 1);
    expect(plan.filter((j) => j.kind === 'slow').length).toBeGreaterThan(1000);
    expect(plan.every((j) => (j.kind === 'doomed' ? j.maxAttempts === 3 : j.maxAttempts === 25))).toBe(true);
  });

  it('flags: the short variant, another build, unknown flags refused', () => {
    expect(optionsParse(['--short', '--seed', '5'])).toMatchObject({ jobs: 1000, faultsPerKind: 5, seed: 5, short: true });
    expect(optionsParse([])).toMatchObject({ jobs: 10_000, faultsPerKind: 40 });
    expect(optionsParse(['--dist', '/x/dist']).serverCmd.slice(1)).toEqual(['/x/dist/src/cli/main.js', 'serve']);
    expect(() => optionsParse(['--nope'])).toThrow('unknown flag --nope');
  });
});
