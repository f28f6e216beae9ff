/**
 * The purge confirmation: a native <dialog> (modal, traps focus, Escape closes) that first
 * asks the server how many jobs the filter matches (PurgeJobs dryRun) and deletes only
 * after "Delete". The outcome goes to the caller's status line.
 */
import { useQuery } from '@tanstack/react-query';
import { useEffect, useRef } from 'react';
import { api, errorLine } from '../api';
import type { JobFilter } from '../types';

export function PurgeDialog(props: {
  /** The filter to purge; null = closed. */
  filter: JobFilter | null;
  description: string;
  onConfirm: (filter: JobFilter) => void;
  onClose: () => void;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  const { filter } = props;
  useEffect(() => {
    const dialog = ref.current;
    if (!dialog) return;
    if (filter && !dialog.open) dialog.showModal();
    if (!filter && dialog.open) dialog.close();
  }, [filter]);
  const dryRun = useQuery({
    queryKey: ['purge-dry-run', filter],
    queryFn: ({ signal }) => api<{ count?: string }>('POST', '/jobs/purge', { body: { filter, dryRun: true }, signal }),
    enabled: filter !== null,
    gcTime: 0,
    staleTime: 0,
  });
  const matched = dryRun.data?.count ?? '0';
  return (
    <dialog ref={ref} onClose={props.onClose} data-testid="purge-dialog" aria-labelledby="purge-title">
      <form
        method="dialog"
        onSubmit={(event) => {
          event.preventDefault();
          if (filter) props.onConfirm(filter);
          props.onClose();
        }}
      >
        <h2 id="purge-title">Purge jobs?</h2>
        <p>{props.description}</p>
        {dryRun.isPending && filter && <p className="muted">Counting…</p>}
        {dryRun.error && (
          <p className="error-line" role="alert">
            {errorLine(dryRun.error)}
          </p>
        )}
        {dryRun.isSuccess && (
          <p data-testid="purge-count">
            This deletes <strong>{matched}</strong> {matched === '1' ? 'job' : 'jobs'} for good: they can no longer be retried.
          </p>
        )}
        <div className="actions">
          <button type="button" onClick={props.onClose} data-testid="purge-cancel" autoFocus>
            Keep them
          </button>
          <button type="submit" className="danger" disabled={!dryRun.isSuccess || matched === '0'} data-testid="purge-confirm" data-action="">
            Delete {matched}
          </button>
        </div>
      </form>
    </dialog>
  );
}
