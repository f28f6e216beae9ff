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
