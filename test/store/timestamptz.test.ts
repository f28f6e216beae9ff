import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { timestamptzParse } from '../../src/store/types.js';

const reference = pg.types.getTypeParser(1184) as (v: string) => Date;

describe('timestamptz parsing (the store sessions run in UTC)', () => {
  it('reads the UTC text form exactly as pg does, to the millisecond', () => {
    for (const v of [
      '2026-11-26 01:50:07+00',
      '2026-11-26 01:50:07.1+00',
      '2026-11-26 01:50:07.123+00',
      '2026-11-26 01:50:07.123456+00',
      '2026-11-26 01:50:07.999999+00',
      '1999-12-31 23:59:59.000001+00',
      '2032-02-29 00:00:00+00',
    ]) {
      expect(timestamptzParse(v).getTime(), v).toBe(reference(v).getTime());
    }
  });

  it('hands other forms to pg: offsets, infinity, BC and short years', () => {
    for (const v of ['2026-11-26 02:50:07.5+01', '2026-11-26 01:50:07+05:30', 'infinity', '-infinity', '0044-03-15 12:00:00+00 BC', '0099-01-01 00:00:00+00']) {
      const got = timestamptzParse(v);
      const want = reference(v);
      expect(got instanceof Date ? got.getTime() : got, v).toBe(want instanceof Date ? want.getTime() : want);
    }
  });
});

describe('timestamptz parsing reuses recent values', () => {
  it('the same text gives the same instant every time, also after the cache is cleared', () => {
    const first = timestamptzParse('2026-11-26 02:00:00.5+00');
    for (let i = 0; i < 600; i++) timestamptzParse(`2026-11-26 02:00:${String(i % 60).padStart(2, '0')}.${i}+00`);
    expect(timestamptzParse('2026-11-26 02:00:00.5+00').getTime()).toBe(first.getTime());
    expect(first.toISOString()).toBe('2026-11-26T02:00:00.500Z');
  });
});
