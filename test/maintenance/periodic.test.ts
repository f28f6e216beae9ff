import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { PeriodicService, startJitterDefaultMs, TICK_FAILURE_LOG_INTERVAL_MS, TickFailureLog } from '../../src/maintenance/periodic.js';
import { Lifecycle } from '../../src/maintenance/lifecycle.js';
import { silentLogger, type Logger } from '../../src/logger.js';
import { unavailable } from '../../src/domain/errors.js';
import { waitFor } from '../helpers/wait.js';

/**
 * The smallest concrete service, to exercise the base class itself: each tick is counted
 * and, when `holdTicks` is set, lasts until the service is stopped (like a long sweep).
 */
class Ticker extends PeriodicService {
  ticks = 0;
  /** Signals of ticks that ended, and whether they were aborted when they did. */
  ended: boolean[] = [];
  holdTicks = false;
  /** What each tick throws (null: it succeeds). */
  failWith: Error | null = null;

  constructor(opts: { intervalMs?: number; startJitterMaxMs?: number; logger?: Logger; clock?: () => number } = {}) {
    super('ticker', { intervalMs: opts.intervalMs ?? 10, startJitterMaxMs: opts.startJitterMaxMs ?? 0, clock: opts.clock }, opts.logger ?? silentLogger());
  }

  async runOnce(signal: AbortSignal): Promise<void> {
    this.ticks++;
    if (this.failWith) throw this.failWith;
    if (this.holdTicks && !signal.aborted) await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
    this.ended.push(signal.aborted);
  }
}

const started: Ticker[] = [];
afterEach(async () => {
  for (const t of started.splice(0)) await t.stop();
});

function setup(opts: { intervalMs?: number; startJitterMaxMs?: number; logger?: Logger; clock?: () => number } = {}) {
  const ticker = new Ticker(opts);
  started.push(ticker);
  return { ticker };
}

describe('periodic service lifecycle', () => {
  it('stopped -> starting -> running -> stopping -> stopped; start and stop are safe twice', async () => {
    const { ticker } = setup();
    expect(ticker.state).toBe('stopped');
    ticker.start();
    expect(ticker.state).toBe('starting');
    ticker.start();
    await waitFor(() => ticker.ticks >= 2, { what: 'two ticks' });
    expect(ticker.state).toBe('running');
    const first = ticker.stop();
    const second = ticker.stop();
    expect(ticker.state).toBe('stopping');
    await Promise.all([first, second]);
    expect(ticker.state).toBe('stopped');
    await ticker.stop();
    const ticks = ticker.ticks;
    ticker.start(); // a stopped service starts again
    await waitFor(() => ticker.ticks > ticks, { what: 'a tick after the restart' });
  });

  it('stop aborts the tick in progress and resolves only once it has returned', async () => {
    const { ticker } = setup();
    ticker.holdTicks = true;
    ticker.start();
    await waitFor(() => ticker.ticks === 1, { what: 'the first tick' });
    expect(ticker.ended).toEqual([]);
    await ticker.stop();
    expect(ticker.ended).toEqual([true]);
    expect(ticker.ticks).toBe(1);
  });

  it('starting a service that is still stopping is refused', async () => {
    const { ticker } = setup();
    ticker.holdTicks = true;
    ticker.start();
    await waitFor(() => ticker.ticks === 1, { what: 'the first tick' });
    const stopping = ticker.stop();
    expect(() => ticker.start()).toThrow(/no transition from stopping to starting/);
    await stopping;
  });

  it('waits a random start jitter before its first tick; a stop during it ends the wait at once', async () => {
    const { ticker } = setup({ intervalMs: 60_000, startJitterMaxMs: 3_600_000 });
    ticker.start();
    expect(ticker.state).toBe('starting');
    await ticker.stop();
    expect(ticker.state).toBe('stopped');
    expect(ticker.ticks).toBe(0);
  });

  it('the default jitter is a tenth of the interval, at most one second', () => {
    expect(startJitterDefaultMs(200)).toBe(20);
    expect(startJitterDefaultMs(60_000)).toBe(1000);
  });

  it('the lifecycle refuses moves outside its diagram', () => {
    const lifecycle = new Lifecycle('x');
    expect(() => lifecycle.to('running')).toThrow(/x: no transition from stopped to running/);
    lifecycle.to('starting');
    lifecycle.to('stopping');
    expect(() => lifecycle.to('running')).toThrow();
    lifecycle.to('stopped');
  });
});

/** A logger that keeps its lines (info and up, or `level`), and them as [level, message]. */
function captured(level = 'info') {
  const lines: { level: number; msg: string; err?: { message: string }; more_since_last_line?: number; failed_ticks?: number }[] = [];
  const logger = pino({ level }, { write: (s: string) => void lines.push(JSON.parse(s) as (typeof lines)[number]) });
  const logged = () => lines.map((l) => [l.level, l.msg]);
  return { logger, lines, logged };
}
const ERROR = 50;
const INFO = 30;
const DEBUG = 20;

describe('a tick that fails again and again is logged at error once per interval', () => {
  it('TickFailureLog: once at error, repeats at debug, again at error after the interval with the count, a different failure at once, one line when it ends', () => {
    const { logger, lines, logged } = captured('debug');
    const clock = { now: 1_000 };
    const log = new TickFailureLog('pruner', logger, () => clock.now);
    const boom = () => Object.assign(new Error('permission denied for table jobs'), { code: '42501' });
    log.succeeded(); // nothing failed: nothing to say
    for (let i = 0; i < 10; i++) {
      log.failed(boom());
      clock.now += 60_000; // a pruner's minute
    }
    // 10 failures over 10 minutes: the first at error, then at debug until 5 minutes passed.
    expect(logged().slice(0, 7)).toEqual([
      [ERROR, 'pruner: tick failed'],
      ...Array.from({ length: 4 }, () => [DEBUG, 'pruner: tick failed again']),
      [ERROR, 'pruner: tick still failing (and 4 more since the last line)'],
      [DEBUG, 'pruner: tick failed again'],
    ]);
    expect(lines[5]).toMatchObject({ failed_ticks: 6, more_since_last_line: 4, err: { message: 'permission denied for table jobs' } });
    expect(logged().filter(([level]) => level === ERROR)).toHaveLength(2);
    // Another failure is logged at once; the same message with another code is another failure.
    log.failed(new TypeError("Cannot read properties of undefined (reading 'id')"));
    log.failed(Object.assign(new Error('permission denied for table jobs'), { code: 'XX000' }));
    log.failed(Object.assign(new Error('permission denied for table jobs'), { code: 'XX000' }));
    clock.now += 1_500;
    log.succeeded();
    log.succeeded();
    expect(logged().slice(10)).toEqual([
      [ERROR, 'pruner: tick failed'],
      [ERROR, 'pruner: tick failed'],
      [DEBUG, 'pruner: tick failed again'],
      [INFO, 'pruner: ticks succeed again after 13 failed ticks over 601.5 s'],
    ]);
    expect(TICK_FAILURE_LOG_INTERVAL_MS).toBe(5 * 60_000);
    // A new run of failures starts over.
    log.failed(boom());
    expect(logged().at(-1)).toEqual([ERROR, 'pruner: tick failed']);
  });

  it('every periodic service logs its failing ticks through it; an outage stays at debug and does not end the run', async () => {
    const { logger, logged } = captured();
    const clock = { now: 0 };
    const { ticker } = setup({ logger, clock: () => clock.now });
    ticker.failWith = new Error('boom');
    ticker.start();
    await waitFor(() => ticker.ticks >= 5, { what: 'five failed ticks' });
    ticker.failWith = unavailable('database unavailable: connection refused');
    const failed = ticker.ticks;
    await waitFor(() => ticker.ticks >= failed + 3, { what: 'ticks during an outage' });
    ticker.failWith = null;
    clock.now = 2_000;
    await waitFor(() => logged().length === 2, { what: 'the recovery line' });
    await ticker.stop();
    expect(logged().map(([level, msg]) => [level, (msg as string).replace(/\d+ failed ticks/, 'N failed ticks')])).toEqual([
      [ERROR, 'ticker: tick failed'],
      [INFO, 'ticker: ticks succeed again after N failed ticks over 2 s'],
    ]);
  });
});
