import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { isUuid, uuidv7 } from '../../src/domain/ids.js';

/** What isUuid means, as a regular expression. */
const CANONICAL = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

describe('isUuid', () => {
  it('takes canonical UUIDs in either case', () => {
    for (const id of [randomUUID(), randomUUID().toUpperCase(), uuidv7(), '00000000-0000-0000-0000-000000000000']) {
      expect(isUuid(id)).toBe(true);
    }
  });

  it('refuses anything else: wrong length, dashes elsewhere, other characters', () => {
    const id = randomUUID();
    for (const s of ['', 'x', id.slice(1), `${id}a`, id.replace(/-/g, ''), `{${id.slice(1, 35)}}`, `${id.slice(0, 7)}-${id.slice(7, 8)}${id.slice(9)}`]) {
      expect(isUuid(s)).toBe(false);
    }
  });

  it('agrees with the regular expression on every one-character change of a UUID', () => {
    const id = randomUUID();
    const codes = [...Array.from({ length: 384 }, (_, c) => c), 0x3000, 0xd800, 0xff10, 0xff21, 0xffff];
    for (let i = 0; i < 36; i++) {
      for (const code of codes) {
        const s = id.slice(0, i) + String.fromCharCode(code) + id.slice(i + 1);
        expect(isUuid(s), JSON.stringify(s)).toBe(CANONICAL.test(s));
      }
    }
  });
});

describe('uuidv7', () => {
  /** The 48-bit millisecond time an id carries. */
  const msOf = (id: string) => parseInt(id.replace(/-/g, '').slice(0, 12), 16);

  it('carries its millisecond, version 7 and the RFC 9562 variant', () => {
    // Ahead of any clock this runs on and of the ids made before it (the generator never goes back).
    const at = Date.UTC(2100, 10, 28, 12, 34, 56, 789);
    for (let i = 0; i < 3000; i++) {
      const id = uuidv7(at + i);
      expect(id).toMatch(CANONICAL);
      expect(msOf(id)).toBe(at + i);
      expect(id[14]).toBe('7');
      expect('89ab').toContain(id[19]);
    }
  });

  it('increases within a millisecond, past a refill of its random bytes and past the sequence limit', () => {
    const at = Date.UTC(2101, 0, 1);
    const ids = Array.from({ length: 10_000 }, () => uuidv7(at));
    expect(new Set(ids).size).toBe(ids.length);
    for (let i = 1; i < ids.length; i++) expect(ids[i]! > ids[i - 1]!, `${ids[i - 1]} < ${ids[i]}`).toBe(true);
    // 10,000 ids in one millisecond overflow the 12-bit sequence: the later ones borrow the next milliseconds.
    expect(msOf(ids.at(-1)!)).toBeGreaterThan(at);
  });
});
