import { LongTimer } from './timers.js';

/**
 * Named states with checked transitions for the worker's lifecycles (the worker, its Work
 * stream, each held job). A transition that its table does not list is a bug in the SDK,
 * so it throws at once instead of leaving the worker in a state nobody designed.
 */

/** Which states may follow each state. A state with no successors is final. */
export type Transitions<S extends string> = Readonly<Record<S, readonly S[]>>;

/** Thrown on a transition its table does not allow (always an SDK bug). */
export class IllegalTransitionError extends Error {
  constructor(what: string, from: string, to: string) {
    super(`${what}: illegal transition ${from} -> ${to}`);
    this.name = 'IllegalTransitionError';
  }
}

/** Returns `to` if the table allows `from -> to`; throws IllegalTransitionError otherwise. */
export function transitionCheck<S extends string>(what: string, table: Transitions<S>, from: S, to: S): S {
  if (!table[from].includes(to)) throw new IllegalTransitionError(what, from, to);
  return to;
}

/**
 * One named state and the table of its transitions. What must stay true: `current` only
 * ever changes through `to()`, and only along the table.
 */
export class StateMachine<S extends string> {
  private state: S;

  constructor(
    /** Named in the error of an illegal transition. */
    private readonly what: string,
    initial: S,
    private readonly table: Transitions<S>,
    /** Called after every change (e.g. to wake waiters). */
    private readonly onChange: (from: S, to: S) => void = () => undefined,
  ) {
    this.state = initial;
  }

  get current(): S {
    return this.state;
  }

  /** True when the current state is one of `states`. */
  is(...states: S[]): boolean {
    return states.includes(this.state);
  }

  /** Moves to `next`; throws IllegalTransitionError if the table does not allow it. */
  to(next: S): void {
    const from = this.state;
    this.state = transitionCheck(this.what, this.table, from, next);
    this.onChange(from, next);
  }
}

/**
 * Waits for conditions on the worker's states: every part calls changed() after a change,
 * and each waiting until() re-checks its condition then. What must stay true: changed()
 * costs next to nothing while no one waits (it runs on every move of every job), and a
 * waiter is removed once it resolves, either way.
 */
export class ChangeWaiters {
  private readonly waiters = new Set<() => void>();

  /** Something changed: re-check every waiting condition. */
  changed(): void {
    if (this.waiters.size === 0) return;
    for (const w of [...this.waiters]) w();
  }

  /**
   * Resolves true when check() holds (re-checked on every change), false after ms. An `ms`
   * of Infinity (or NaN) waits for the condition only; one above setTimeout's limit waits
   * that long (LongTimer), never less.
   */
  until(check: () => boolean, ms: number): Promise<boolean> {
    if (check()) return Promise.resolve(true);
    if (ms <= 0) return Promise.resolve(false);
    return new Promise((resolve) => {
      const waiter = () => {
        if (!check()) return;
        timer?.clear();
        this.waiters.delete(waiter);
        resolve(true);
      };
      const timer = LongTimer.after(ms, () => {
        this.waiters.delete(waiter);
        resolve(false);
      });
      this.waiters.add(waiter);
    });
  }
}
