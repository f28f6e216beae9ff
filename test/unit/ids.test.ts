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
