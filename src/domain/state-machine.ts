/**
 * The server's state machines (a worker session, a queue's claimer, the dispatcher, a Work
 * stream and its writer, a background service's lifecycle) name their states and list the
 * moves each state may make, checked here. A move the table does not list, or bookkeeping
 * that would go wrong (a slot count), is a bug in the server, never a client's mistake: it
 * throws at once instead of corrupting state (the gRPC layer answers such an error INTERNAL
 * and logs it). The SDK has its own (src/sdk/worker/state.ts): it imports no server code.
 */

/** For each state, the states it may move to. A move not listed is a bug. */
export type Transitions<S extends string> = { readonly [K in S]: readonly S[] };

/** The server's own bookkeeping went wrong (a bug, never a client's error). */
export class BrokenInvariantError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'BrokenInvariantError';
  }
}

/** A state machine was asked for a move its transition table does not allow. */
export class IllegalTransitionError extends BrokenInvariantError {
  constructor(
    readonly machine: string,
    readonly from: string,
    readonly to: string,
  ) {
    super(`${machine}: no transition from ${from} to ${to}`);
    this.name = 'IllegalTransitionError';
  }
}

/** Returns `to` when `table` lets `from` move there; throws IllegalTransitionError otherwise. */
export function checkTransition<S extends string>(machine: string, table: Transitions<S>, from: S, to: S): S {
  if (!table[from].includes(to)) throw new IllegalTransitionError(machine, from, to);
  return to;
}
