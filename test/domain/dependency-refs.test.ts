import { describe, expect, it } from 'vitest';
import { checkDependencyRefs } from '../../src/domain/validate.js';

/** The ref checks of a SubmitJobs call (checkDependencyRefs): graphs as deep as a batch allows. */

const chain = (n: number) => Array.from({ length: n }, (_, i) => ({ ref: `r${i}`, dependsOnRefs: i > 0 ? [`r${i - 1}`] : [] }));

describe('checkDependencyRefs', () => {
  it('accepts a chain of 10,000 jobs in any order, and a diamond', () => {
    expect(() => checkDependencyRefs(chain(10_000).reverse())).not.toThrow();
    expect(() =>
      checkDependencyRefs([
        { ref: 'd', dependsOnRefs: ['b', 'c'] },
        { ref: 'b', dependsOnRefs: ['a'] },
        { ref: 'c', dependsOnRefs: ['a'] },
        { ref: 'a' },
        { dependsOnRefs: ['d'] },
      ]),
    ).not.toThrow();
  });

  it('names a cycle of 10,000 jobs by its ends, in one line', () => {
    const jobs = chain(10_000);
    jobs[0]!.dependsOnRefs = ['r9999'];
    expect(() => checkDependencyRefs(jobs)).toThrow(/^depends_on_refs form a cycle: "r0" -> "r9999" -> "r9998" -> "r9997" -> … \(9995 more\) -> "r1" -> "r0"$/);
  });

  it('holds a job to 1,000 parents, ids and refs together, a ref named twice counting once', () => {
    const parents = chain(1000).map(({ ref }) => ({ ref }));
    const ids = (n: number) => Array.from({ length: n }, (_, i) => `01900000-0000-7000-8000-${String(i).padStart(12, '0')}`);
    const refs = (n: number) => parents.slice(0, n).map((p) => p.ref);
    expect(() => checkDependencyRefs([...parents, { dependsOnRefs: refs(1000) }])).not.toThrow();
    expect(() => checkDependencyRefs([...parents, { dependsOnRefs: [...refs(999), ...refs(999)], dependsOn: ids(1) }])).not.toThrow();
    expect(() => checkDependencyRefs([...parents, { dependsOnRefs: refs(1), dependsOn: ids(1000) }])).toThrow(
      'jobs[1000] names more than 1000 parents (depends_on and depends_on_refs together)',
    );
    expect(() => checkDependencyRefs([...parents, { dependsOnRefs: refs(500), dependsOn: ids(501) }])).toThrow(/^jobs\[1000\] names more than 1000 parents/);
  });

  it('refuses an unknown ref, a ref used twice and an invalid ref', () => {
    expect(() => checkDependencyRefs([{ ref: 'a' }, { dependsOnRefs: ['b'] }])).toThrow('jobs[1].depends_on_refs names unknown ref "b"');
    expect(() => checkDependencyRefs([{ ref: 'a' }, { ref: 'a' }])).toThrow('ref "a" is used twice (jobs[0] and jobs[1])');
    expect(() => checkDependencyRefs([{ ref: 'no spaces' }])).toThrow(/^jobs\[0\]\.ref "no spaces" may contain only/);
    // An unknown ref is shown as a name would be: escaped, and cut, so the line stays one short line
    // (a 1 MB ref with a newline was echoed whole: a 1 MB status line in two pieces).
    expect(() => checkDependencyRefs([{ ref: 'a' }, { dependsOnRefs: [`x\nforged log line${'y'.repeat(1_000_000)}`] }])).toThrow(
      /^jobs\[1\]\.depends_on_refs names unknown ref "x\\nforged log liney+…"$/,
    );
  });
});
