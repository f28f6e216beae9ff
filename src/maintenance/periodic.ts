import type { Logger } from '../logger.js';

/**
 * The shape of every background service (sweeper, elector, ...): one loop that calls
 * `runOnce()` every `intervalMs`, `start()`/`stop()` that are safe to call twice, and an
 * AbortSignal that ends the loop's wait at once on stop. Tests call `runOnce()` directly.
 * `wake()` runs the next iteration now instead of at the end of the interval.
 */
export abstract class PeriodicService {
  private controller: AbortController | null = null;
  private loop: Promise<void> | null = null;
  private wakeNow: (() => void) | null = null;

  protected constructor(
    readonly name: string,
    protected intervalMs: number,
    protected readonly logger: Logger,
  ) {}

  /** One unit of work. Must not throw for expected conditions; errors are logged. */
  abstract runOnce(): Promise<unknown>;

  /** Starts the loop. Safe to call twice. */
  start(): void {
    if (this.controller) return;
    const controller = new AbortController();
    this.controller = controller;
    this.loop = this.run(controller.signal);
  }

  /**
   * Stops the loop, waits for the current iteration to end, then releases what the service
   * holds (also when only `runOnce()` was used). Safe to call twice.
   */
  async stop(): Promise<void> {
    const controller = this.controller;
    if (controller) {
      controller.abort();
      this.wakeNow?.();
      await this.loop;
      this.controller = null;
      this.loop = null;
    }
    await this.onStop();
  }

  /** Runs the next iteration now. */
  wake(): void {
    this.wakeNow?.();
  }

  get running(): boolean {
    return this.controller !== null;
  }

  /** Hook for releasing resources after the loop has ended; must be idempotent. */
  protected async onStop(): Promise<void> {}

  private async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      try {
        await this.runOnce();
      } catch (err) {
        this.logger.error({ err, component: this.name }, `${this.name}: iteration failed`);
      }
      if (signal.aborted) break;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, this.intervalMs);
        function done() {
          clearTimeout(timer);
          resolve();
        }
        this.wakeNow = done;
      });
      this.wakeNow = null;
    }
  }
}
