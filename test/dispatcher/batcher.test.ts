import { describe, expect, it } from 'vitest';
import { Batcher } from '../../src/dispatcher/batcher.js';
import { isValueRefused } from '../../src/store/availability.js';
import { storeSetup } from '../helpers/store-setup.js';

/** An error as pg reports a refused value (SQLSTATE class 22). */
const valueError = () => Object.assign(new Error('unsupported Unicode escape sequence'), { code: '22P05' });

/** A batcher over a flush that refuses a batch holding 'bad' with `error()`, and what it settled. */
function setup(error: () => Error) {
  const flushes: string[][] = [];
  const settled: { items: string[]; outputs: string[] | null; err: unknown }[] = [];
  const batcher = new Batcher<string, string>(
    async (items) => {
      flushes.push(items);
      if (items.includes('bad')) throw error();
      return items.map((i) => `${i}!`);
    },
    (items, outputs, err) => settled.push({ items, outputs, err }),
    1000,
    isValueRefused,
  );
  return { batcher, flushes, settled };
}

describe('Batcher: one bad item fails alone', () => {
  it('a batch refused for a value is written again item by item: the others are written, the bad one fails', async () => {
    const { batcher, flushes, settled } = setup(valueError);
    for (const item of ['a', 'bad', 'c']) batcher.add(item);
    await batcher.idle();
    expect(flushes).toEqual([['a', 'bad', 'c'], ['a'], ['bad'], ['c']]);
    expect(settled.map((s) => [s.items, s.outputs])).toEqual([
      [['a'], ['a!']],
      [['bad'], null],
      [['c'], ['c!']],
    ]);
    expect(isValueRefused(settled[1]!.err)).toBe(true);
  });

  it('any other failure (the database gone, a bug) fails the batch as one, written once', async () => {
    const { batcher, flushes, settled } = setup(() => Object.assign(new Error('Connection terminated unexpectedly'), { code: undefined }));
    for (const item of ['a', 'bad', 'c']) batcher.add(item);
    await batcher.idle();
    expect(flushes).toEqual([['a', 'bad', 'c']]);
    expect(settled).toHaveLength(1);
    expect(settled[0]!.outputs).toBeNull();
  });
});

describe('isValueRefused recognises what PostgreSQL raises', () => {
  it('a NUL in jsonb and an interval out of range are; a unique violation and a syntax error are not', async () => {
    const { sql } = await storeSetup();
    const errorOf = (text: string, values: unknown[] = []) => sql.query(text, values).then(() => null, (e: unknown) => e);
    expect(isValueRefused(await errorOf('SELECT $1::jsonb', ['{"a":"\\u0000"}']))).toBe(true);
    expect(isValueRefused(await errorOf('SELECT make_interval(secs => 1e15)'))).toBe(true);
    expect(isValueRefused(await errorOf('SELEC 1'))).toBe(false);
    const duplicate = await errorOf("INSERT INTO evora.queues (name) VALUES ('twice'), ('twice')");
    expect((duplicate as { code?: string }).code).toBe('23505');
    expect(isValueRefused(duplicate)).toBe(false);
  });
});
