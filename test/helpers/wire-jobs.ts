import type { Job } from '../../src/store/store.js';

/** Leased jobs as the store returns them, for the wire encoder and decoder tests. */

export const base = new Date('2026-03-01T12:34:56.789Z');

export function job(over: Partial<Job> = {}): Job {
  return {
    id: '0197a0c2-1111-7222-8333-944445555666',
    queue: 'emails',
    type: 'send',
    payload: { to: 'a@example.com', n: 3 },
    state: 'RUNNING',
    priority: 0,
    runAt: base,
    attempt: 1,
    maxAttempts: 25,
    leaseToken: 'f00dfeedf00dfeedf00dfeedf00dfeed',
    lockedUntil: new Date(base.getTime() + 30_000),
    workerId: 'host-1:4242',
    idempotencyKey: null,
    result: null,
    lastError: null,
    cancelRequestedAt: null,
    createdAt: new Date(base.getTime() - 1_500),
    startedAt: base,
    finishedAt: null,
    ...over,
  };
}

/** Jobs that exercise every field and every JSON type on the wire. */
export const variants: [string, Job][] = [
  ['a plain leased job', job()],
  ['an empty payload, no token, no lease', job({ payload: {}, leaseToken: null, lockedUntil: null, startedAt: null })],
  [
    'every JSON type, nested, unicode and long strings, odd keys',
    job({
      payload: {
        s: 'ünïcødé ✓ 𝄞',
        empty: '',
        '': 'empty key',
        long: 'x'.repeat(300),
        longUnicode: 'é'.repeat(100),
        int: 42,
        neg: -7.25,
        big: 2 ** 53 - 1,
        zero: 0,
        t: true,
        f: false,
        nil: null,
        list: [1, 'two', null, false, { deep: [[]] }, []],
        obj: { a: { b: { c: 'd' } }, e: {} },
      },
    }),
  ],
  ['a payload over 16 KiB (multi-byte length prefixes)', job({ payload: { blob: 'y'.repeat(20_000), list: Array.from({ length: 500 }, (_, i) => i) } })],
  [
    'every optional field set, negative priority, big attempt numbers',
    job({
      priority: -5,
      attempt: 300,
      maxAttempts: 1000,
      idempotencyKey: 'welcome-42',
      result: { ok: true },
      lastError: 'boom: ✗',
      cancelRequestedAt: base,
      finishedAt: base,
    }),
  ],
  ['whole-second and pre-1970 timestamps', job({ runAt: new Date(0), createdAt: new Date(-86_400_123), startedAt: new Date(1_700_000_000_000) })],
  ['a timestamp after 2106 (int64 seconds over 32 bits)', job({ runAt: new Date('2200-01-01T00:00:00.001Z') })],
  ['a job that is not RUNNING (no lease_expires_at in Job)', job({ state: 'PENDING' })],
];

