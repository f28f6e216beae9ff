import { checkTransition, type Transitions } from '../domain/state-machine.js';

/**
 * The states a background part (a periodic service, the maintainer) goes through:
 *
 *   stopped ──start()──▶ starting ──first tick──▶ running
 *      ▲                    │                        │
 *      └──── stopping ◀──stop()──────────────────stop()
 *
 * `starting` is the wait before the first tick (a service's start jitter); `stopping` lasts
 * until the tick in progress has ended. Any other move is a bug in the caller and throws.
 */
export type LifecycleState = 'stopped' | 'starting' | 'running' | 'stopping';

const ALLOWED: Transitions<LifecycleState> = {
  stopped: ['starting'],
  starting: ['running', 'stopping'],
  running: ['stopping'],
  stopping: ['stopped'],
};

/**
 * One part's current lifecycle state with checked transitions: `to()` refuses a move the
 * diagram above does not have, so a part can never be, say, started while it is stopping.
 */
export class Lifecycle {
  private current: LifecycleState = 'stopped';

  constructor(
    /** The part's name, for the error message. */
    private readonly owner: string,
  ) {}

  get state(): LifecycleState {
    return this.current;
  }

  /** Moves to `next`; throws when the move is not in the diagram. */
  to(next: LifecycleState): void {
    this.current = checkTransition(this.owner, ALLOWED, this.current, next);
  }
}
