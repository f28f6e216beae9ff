import { afterEach, describe, expect, it } from 'vitest';
import { PeriodicService, startJitterDefaultMs } from '../../src/maintenance/periodic.js';
import { Lifecycle } from '../../src/maintenance/lifecycle.js';
import { silentLogger } from '../../src/logger.js';
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

  constructor(opts: { intervalMs?: number; startJitterMaxMs?: number } = {}) {
    super('ticker', { intervalMs: opts.intervalMs ?? 10, startJitterMaxMs: opts.startJitterMaxMs ?? 0 }, silentLogger());
  }

  async runOnce(signal: AbortSignal): Promise<void> {
    this.ticks++;
    if (this.holdTicks && !signal.aborted) await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
    this.ended.push(signal.aborted);
  }
}

const started: Ticker[] = [];
afterEach(async () => {
  for (const t of started.splice(0)) await t.stop();
});

function setup(opts: { intervalMs?: number; startJitterMaxMs?: number } = {}) {
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
