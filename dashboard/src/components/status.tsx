/**
 * Loading, error and action-result lines. Every failure is one readable line (code: message)
 * with role="alert"; every action reports its outcome in a role="status" line beside it.
 */
import { useMutation, useQueryClient, type QueryKey } from '@tanstack/react-query';
import { useState, useSyncExternalStore, type ReactNode } from 'react';
import { errorLine, isServerUnreachable, isUnreachableError, subscribeReach } from '../api';
import { useCanAct } from '../auth';

/**
 * A query's error as one line, wrapped and whole, also in its title (nothing when there is
 * none). A server that cannot be reached at all is said once for the page, by the banner
 * under the header (UnreachableBanner), not again by every view that polls it.
 */
export function ErrorLine({ error, testId = 'error' }: { error: unknown; testId?: string }) {
  if (!error || isUnreachableError(error)) return null;
  const text = errorLine(error);
  return (
    <p className="error-line" role="alert" data-testid={testId} title={text}>
      {text}
    </p>
  );
}

/** "Loading…" while the first answer is on its way. */
export function Loading({ when }: { when: boolean }) {
  return when ? <p className="muted" aria-live="polite">Loading…</p> : null;
}

/** The outcome of the last action of a panel. */
export type ActionOutcome = { ok: boolean; text: string; at: number } | null;

/** The most recent of several actions' outcomes (one status line for a panel). */
export function latest(...outcomes: ActionOutcome[]): ActionOutcome {
  return outcomes.reduce<ActionOutcome>((best, o) => (o && (!best || o.at > best.at) ? o : best), null);
}

/**
 * Runs an action: on success shows what `run` returns, on failure its error line, and
 * afterwards refreshes the queries it may have changed (`invalidate`, by key prefix).
 */
export function useAction<V>(run: (vars: V) => Promise<string>, invalidate: readonly QueryKey[]) {
  const queryClient = useQueryClient();
  const [outcome, setOutcome] = useState<ActionOutcome>(null);
  const mutation = useMutation({
    mutationFn: run,
    onMutate: () => setOutcome(null),
    onSuccess: (text) => setOutcome({ ok: true, text, at: Date.now() }),
    onError: (error) => setOutcome({ ok: false, text: errorLine(error), at: Date.now() }),
    onSettled: () => Promise.all(invalidate.map((queryKey) => queryClient.invalidateQueries({ queryKey }))),
  });
  return { run: mutation.mutate, runAsync: mutation.mutateAsync, pending: mutation.isPending, outcome, setOutcome };
}

/** The one-line result of an action (a failure wraps, whole, and is also in the title). */
export function ActionStatus({ outcome, testId = 'action-status' }: { outcome: ActionOutcome; testId?: string }) {
  return (
    <p
      className={outcome ? (outcome.ok ? 'ok-line' : 'error-line') : 'action-line'}
      role={outcome && !outcome.ok ? 'alert' : 'status'}
      data-testid={testId}
      data-ok={outcome ? String(outcome.ok) : undefined}
      title={outcome?.text || undefined}
    >
      {outcome?.text ?? ''}
    </p>
  );
}

/**
 * A button that changes something. Rendered only for callers who may act (useCanAct), and
 * marked data-action so a test can check that a viewer sees none.
 */
export function ActionButton(props: {
  onClick: () => void;
  testId: string;
  disabled?: boolean;
  danger?: boolean;
  children: ReactNode;
  label?: string;
}) {
  const canAct = useCanAct();
  if (!canAct) return null;
  return (
    <button
      type="button"
      className={props.danger ? 'danger' : undefined}
      onClick={props.onClick}
      disabled={props.disabled}
      data-testid={props.testId}
      data-action=""
      aria-label={props.label}
    >
      {props.children}
    </button>
  );
}

/**
 * One line for the whole page while the server cannot be reached (down, restarting): the
 * views keep their last answers under it and go on asking every 2 s; it goes with the first
 * answer, without a reload.
 */
export function UnreachableBanner() {
  const down = useSyncExternalStore(subscribeReach, isServerUnreachable);
  if (!down) return null;
  return (
    <p className="error-line banner" role="alert" data-testid="unreachable">
      UNAVAILABLE: the server cannot be reached. The page asks again every 2 s; what it shows is from before.
    </p>
  );
}
