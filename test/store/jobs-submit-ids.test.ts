import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

/**
 * job-insert-many-ids.sql is job-insert-many.sql with another last SELECT (ids only) and a
 * narrower RETURNING for its insert: the inserts, the events and the wake-ups must stay the
 * same, line for line.
 */

const body = (file: string): string[] => {
  const lines = readFileSync(new URL(`../../src/store/sql/${file}`, import.meta.url), 'utf8').trimEnd().split('\n');
  const start = lines.findIndex((l) => !l.startsWith('--'));
  return lines.slice(start);
};

describe('job-insert-many-ids.sql', () => {
  it('is job-insert-many.sql but for what its insert returns and its last SELECT, which returns only id', () => {
    const many = body('job-insert-many.sql');
    const ids = body('job-insert-many-ids.sql');
    const returning = many.indexOf('  RETURNING *');
    expect(returning).toBeGreaterThan(0);
    expect(ids[returning]).toBe('  RETURNING id, queue, type, state, attempt, worker_id, created_at, run_at');
    expect(ids.slice(0, -1).filter((_, i) => i !== returning)).toEqual(many.slice(0, -1).filter((_, i) => i !== returning));
    expect(many.at(-1)).toBe('SELECT * FROM inserted WHERE (SELECT count(*) FROM woken) >= 0');
    expect(ids.at(-1)).toBe('SELECT id FROM inserted WHERE (SELECT count(*) FROM woken) >= 0');
  });
});
