import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { CLOCK_SKEW_IGNORED_MS, DatabaseClock } from '../../src/dispatcher/database-clock.js';

/** A DatabaseClock on a clock the test moves, and the warnings it logged. */
function setup(start = 1_800_000_000_000) {
  let local = start;
  const warnings: string[] = [];
  const logger = pino(
    { level: 'warn' },
    new Writable({
      write(chunk: Buffer, _enc, done) {
        warnings.push((JSON.parse(chunk.toString()) as { msg: string }).msg);
        done();
      },
    }),
  );
  const clock = new DatabaseClock(logger, () => local);
  return { clock, warnings, at: () => local, move: (ms: number) => (local += ms) };
}

describe('DatabaseClock: PostgreSQL\'s time as this process reckons it', () => {
  it('clocks within a second of each other count as one: now() is this clock exactly, nothing logged', () => {
    const { clock, warnings, at } = setup();
    expect(clock.now()).toBe(at());
    clock.observe(new Date(at() - 15), at() - 20); // a claim that took 20 ms to answer
    clock.observe(new Date(at() + CLOCK_SKEW_IGNORED_MS - 1), at() - 5);
    expect(clock.offsetMs).toBe(0);
    expect(clock.now()).toBe(at());
    expect(clock.toLocal(at() + 5000)).toBe(at() + 5000);
    expect(warnings).toEqual([]);
  });

  it('this clock 40 s ahead: the database\'s time is 40 s behind it, its times moved onto this clock, one warning', () => {
    const { clock, warnings, at, move } = setup();
    clock.observe(new Date(at() - 40_000 - 20), at() - 25);
    expect(clock.offsetMs).toBe(-40_020);
    expect(clock.now()).toBe(at() - 40_020);
    expect(clock.toLocal(at() - 40_020 + 1000)).toBe(at() + 1000);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/^this server's clock is about 40\.0 s ahead of PostgreSQL's: .*synchronize the clocks \(NTP\)$/);
    // A slower answer (its estimate further behind) does not move it: the largest estimate counts.
    move(1000);
    clock.observe(new Date(at() - 40_000 - 900), at() - 1000);
    expect(clock.offsetMs).toBe(-40_000 - 20);
    expect(warnings).toHaveLength(1);
  });

  it('estimates older than two windows are forgotten: a corrected clock counts as in sync again', () => {
    const { clock, at, move } = setup();
    clock.observe(new Date(at() + 5000), at() - 10); // this clock 5 s behind
    expect(clock.offsetMs).toBe(5000);
    move(30_000);
    clock.observe(new Date(at()), at() - 10); // corrected (NTP stepped it)
    expect(clock.offsetMs).toBe(5000); // the window before still counts
    move(30_000);
    clock.observe(new Date(at()), at() - 10);
    expect(clock.offsetMs).toBe(0);
  });

  it('a loaded server whose claims all answer seconds late: clocks in sync stay in sync, nothing logged', () => {
    const { clock, warnings, at, move } = setup();
    // Each claim's statement ran at once, but its answer was read 3 s later (5,000 queues'
    // claimers keeping the event loop and the pool busy), on clocks that agree: the old
    // estimate (the answer's time) put the database 3 s behind and warned to use NTP.
    for (let i = 0; i < 20; i++) {
      const askedAt = at();
      move(3000);
      clock.observe(new Date(askedAt + 10), askedAt);
    }
    expect(clock.offsetMs).toBe(0);
    expect(clock.now()).toBe(at());
    expect(warnings).toEqual([]);
  });

  it('a real skew is still seen through slow claims: the bounds exclude agreement, the safe side is taken', () => {
    const { clock, warnings, at, move } = setup();
    const askedAt = at();
    move(3000);
    clock.observe(new Date(askedAt + 100 - 5000), askedAt); // this clock 5 s ahead
    expect(clock.offsetMs).toBe(-7900);
    expect(warnings).toHaveLength(1);
  });
});
