/**
 * The confirmation of a bulk action over a filter (purge, retry or cancel): a native <dialog>
 * (modal, traps focus, Escape closes) that first asks the server how many jobs the filter
 * matches (PurgeJobs / RetryJobs / CancelJobs dryRun) and acts only on the explicit confirm.
 * Focus starts on the safe choice, so Enter or Escape right after opening changes nothing. A
 * purge or retry confirmed acts on at most what was counted: it sends the filter bounded by
 * the dry run's finishedBefore, so jobs that finish after the count (a DLQ group still
 * filling up) are left alone (docs/api.md "Acting on what was counted"); a cancel has no
 * such bound (its jobs have not finished), and takes the jobs submitted up to the confirm.
 * The outcome, with the count it was confirmed on, goes to the caller's status line.
 */
import { useQuery } from '@tanstack/react-query';
import { useEffect, useRef } from 'react';
import { api, errorLine } from '../api';
import { count, countOf } from '../format';
import type { JobFilter } from '../types';

/** Which bulk action a dialog confirms. */
export type BulkAction = 'purge' | 'retry' | 'cancel';

/**
 * What differs between the actions: the endpoint of the dry run (the same one the action
 * then calls), the words, and the test-id prefix (`purge-dialog`, `retry-count`, …).
 */
const TEXT: Record<BulkAction, {
  path: string;
  title: string;
  /** The count line reads: This <verb> <N jobs> <after> */
  verb: string;
  after: string;
  /** What the confirm leaves alone, said under the count. */
  bound: string;
  confirm: string;
  danger: boolean;
}> = {
  purge: {
    path: '/jobs/purge',
    title: 'Purge jobs?',
    verb: 'deletes',
    after: 'for good: they can no longer be retried.',
    bound: 'Only the jobs counted: any that finish from now on are left alone.',
    confirm: 'Delete',
    danger: true,
  },
  retry: {
    path: '/jobs/retry',
    title: 'Retry jobs?',
    verb: 'runs',
    after: 'again: whatever they do (send an email, take a payment) they do again.',
    bound: 'Only the jobs counted: any that finish from now on are left alone.',
    confirm: 'Retry',
    danger: false,
  },
  cancel: {
    path: '/jobs/cancel',
    title: 'Cancel jobs?',
    verb: 'cancels',
    after: '(a running one is asked to stop by its worker), with the jobs that wait on them: none of them runs unless retried.',
    bound: 'Jobs submitted after you confirm are left alone; pause the queue first to stop new ones from starting.',
    confirm: 'Cancel',
    danger: true,
  },
};

/** The dry-run count and confirmation of one bulk action; closed while `filter` is null. */
export function BulkActionDialog(props: {
  action: BulkAction;
  /** The filter to act on; null = closed. */
  filter: JobFilter | null;
  description: string;
  /** The filter bounded to the jobs counted, and how many were counted. */
  onConfirm: (filter: JobFilter, counted: string) => void;
  onClose: () => void;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  const { action, filter } = props;
  const text = TEXT[action];
  useEffect(() => {
    const dialog = ref.current;
    if (!dialog) return;
    if (filter && !dialog.open) dialog.showModal();
    if (!filter && dialog.open) dialog.close();
  }, [filter]);
  const dryRun = useQuery({
    queryKey: ['bulk-dry-run', action, filter],
    queryFn: ({ signal }) => api<{ count?: string; finishedBefore?: string }>('POST', text.path, { body: { filter, dryRun: true }, signal }),
    enabled: filter !== null,
    gcTime: 0,
    staleTime: 0,
    // The count shown is the one confirmed: it does not change under the operator's eyes.
    refetchOnWindowFocus: false,
    refetchOnReconnect: false,
  });
  const matched = count(dryRun.data?.count);
  const jobs = countOf(dryRun.data?.count, 'job');
  return (
    <dialog ref={ref} onClose={props.onClose} data-testid={`${action}-dialog`} aria-labelledby={`${action}-title`}>
      <form
        method="dialog"
        onSubmit={(event) => {
          event.preventDefault();
          // The bound of the count shown (one answer: a refetch changes both). The server's
          // is never later than a finishedBefore the filter had, so that one stays in force.
          if (filter && dryRun.data) props.onConfirm({ ...filter, finishedBefore: dryRun.data.finishedBefore ?? filter.finishedBefore }, matched);
          props.onClose();
        }}
      >
        <h2 id={`${action}-title`}>{text.title}</h2>
        <p>{props.description}</p>
        {dryRun.isPending && filter && <p className="muted">Counting…</p>}
        {dryRun.error && (
          <p className="error-line" role="alert">
            {errorLine(dryRun.error)}
          </p>
        )}
        {dryRun.isSuccess && (
          <>
            <p data-testid={`${action}-count`}>
              This {text.verb} <strong>{jobs}</strong> {text.after}
            </p>
            <p className="muted">{text.bound}</p>
          </>
        )}
        <div className="actions">
          <button type="button" onClick={props.onClose} data-testid={`${action}-cancel`} autoFocus>
            Keep them
          </button>
          <button
            type="submit"
            className={text.danger ? 'danger' : undefined}
            disabled={!dryRun.isSuccess || matched === '0'}
            data-testid={`${action}-confirm`}
            data-action=""
          >
            {text.confirm} {matched}
          </button>
        </div>
      </form>
    </dialog>
  );
}
