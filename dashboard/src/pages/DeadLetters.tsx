/**
 * Dead letters: per queue, the DLQ grouped by error (largest first), and the DLQ jobs
 * themselves (paged on the server). An admin retries one job or the checked ones (RetryJobs
 * filter.ids) at once, and retries or purges a whole group (filter.errorGroup) or everything
 * matching only after a confirmation that shows the dry-run count: those filters may hold
 * jobs nobody looked at, and a retry runs side effects again.
 */
import { useState } from 'react';
import { Link, useSearchParams } from 'react-router';
import { api } from '../api';
import { useCanAct } from '../auth';
import { Ago } from '../components/Ago';
import { CopyId } from '../components/CopyId';
import { BulkActionDialog, type BulkAction } from '../components/BulkActionDialog';
import { ActionButton, ActionStatus, ErrorLine, latest, Loading, useAction } from '../components/status';
import { bulkOutcome, count } from '../format';
import { keys, useDeadLetters, useJobs, useListQueue } from '../queries';
import type { DeadLetterGroup, Job, JobFilter } from '../types';
import { usePageTitle } from '../title';

const PAGE_SIZE = 50;
const DLQ = ['JOB_STATE_DLQ'] as const;

/** The group's filter: RetryJobs / PurgeJobs over exactly that group's jobs. */
function groupFilter(group: DeadLetterGroup): JobFilter {
  return { queue: group.queue, states: [...DLQ], type: group.type || undefined, errorGroup: group.error ?? '' };
}

/** How many characters (code points) of an error's first line make its group key. */
const GROUP_KEY_CHARS = 200;

/**
 * The error group a job falls in, as the server makes it (evora.error_group: PostgreSQL
 * `left(split_part(last_error, E'\n', 1), 200)`), shown in the jobs' error column: the first
 * line, cut to 200 code points, not UTF-16 units, so an emoji or other non-BMP character
 * counts as one and is never split in half. Which jobs are a group's the server decides.
 */
function errorOf(job: Pick<Job, 'lastError'>): string {
  const firstLine = (job.lastError ?? '').split('\n')[0]!;
  return Array.from(firstLine).slice(0, GROUP_KEY_CHARS).join('');
}

/**
 * A group as its row's buttons name it (their aria-label), so a screen reader, or a test,
 * tells one row's "Purge" from another's: the group's type, error and queue, as the row shows them.
 */
function groupName(group: DeadLetterGroup): string {
  return `the ${group.type ? `${group.type} ` : ''}group "${group.error || '(no error text)'}" of ${group.queue}`;
}

/** A group's identity across refreshes (the groups are refetched, so their objects change). */
function groupKey(group: DeadLetterGroup): string {
  return JSON.stringify([group.queue, group.type ?? '', group.error ?? '']);
}

const NONE: ReadonlySet<string> = new Set();

/** The /dead-letters page: the DLQ's error groups and jobs, with retry and purge for admins. */
export function DeadLetters() {
  usePageTitle('Dead letters');
  const [search, setSearch] = useSearchParams();
  // A token limited to queues sees the dead letters of one of them, never of all queues.
  const listQueue = useListQueue(search.get('queue') ?? '');
  const queue = listQueue.queue ?? '';
  const canAct = useCanAct();
  const groups = useDeadLetters(queue, listQueue.queue !== null);
  // The chosen group belongs to the queue it was chosen under; the page tokens and the
  // checked rows belong to the list they were made on (the queue and group): when either
  // changes, by the controls or by the URL (back, a link), they start over empty.
  const [chosen, setChosen] = useState<{ queue: string; group: DeadLetterGroup } | null>(null);
  const group = chosen?.queue === queue ? chosen.group : null;
  const listKey = JSON.stringify([queue, group ? groupKey(group) : null]);
  const [paging, setPaging] = useState<{ listKey: string; tokens: string[] }>({ listKey, tokens: [] });
  const tokens = paging.listKey === listKey ? paging.tokens : [];
  const setTokens = (next: string[]) => setPaging({ listKey, tokens: next });
  const [selection, setSelection] = useState<{ listKey: string; ids: ReadonlySet<string> }>({ listKey, ids: NONE });
  const selected = selection.listKey === listKey ? selection.ids : NONE;
  // The bulk action waiting for its confirmation (the dialog is open while this is set).
  const [bulk, setBulk] = useState<{ action: BulkAction; filter: JobFilter; description: string } | null>(null);
  // A group's jobs are those of the group's own queue (the one its actions act on), also
  // when the page shows every queue; the server filters by the group, so every page holds
  // only the group's jobs (the same filter its retry and purge take).
  const groupJobs = group ? groupFilter(group) : null;
  const jobs = useJobs({
    queue: group ? group.queue : queue,
    states: DLQ,
    type: groupJobs?.type,
    error_group: groupJobs?.errorGroup,
    page_token: tokens[tokens.length - 1],
    page_size: PAGE_SIZE,
  }, listQueue.queue !== null);
  const invalidate = [keys.deadLetters, keys.jobs, keys.stats, keys.queues];
  // `counted`: the dialog's dry-run count, which the outcome is compared with (none for checked rows).
  const retry = useAction(
    ({ filter, counted }: { filter: JobFilter; counted?: string }) =>
      api<{ count?: string }>('POST', '/jobs/retry', { body: { filter } }).then((r) => bulkOutcome('Retried', r.count, counted)),
    invalidate,
  );
  const retryOne = useAction((id: string) => api<{ job: Job }>('POST', `/jobs/${id}/retry`).then(() => `Retried job ${id}`), invalidate);
  const purgeAction = useAction(
    ({ filter, counted }: { filter: JobFilter; counted: string }) =>
      api<{ count?: string }>('POST', '/jobs/purge', { body: { filter } }).then((r) => bulkOutcome('Purged', r.count, counted)),
    invalidate,
  );
  const outcome = latest(purgeAction.outcome, retry.outcome, retryOne.outcome);

  function chooseQueue(name: string) {
    setChosen(null);
    setSearch(name ? { queue: name } : {});
  }
  function chooseGroup(next: DeadLetterGroup | null) {
    setChosen(next ? { queue, group: next } : null);
  }
  function toggle(id: string, on: boolean) {
    const next = new Set(selected);
    if (on) next.add(id);
    else next.delete(id);
    setSelection({ listKey, ids: next });
  }
  const allMatching: JobFilter = group ? groupFilter(group) : { queue: queue || undefined, states: [...DLQ] };
  const scope = group ? `the group "${group.error}" of ${group.queue}` : queue ? `every DLQ job of ${queue}` : 'every DLQ job of every queue';
  // Only the newest DLQ jobs are grouped (docs/api.md: 10,000): beyond that every count is a
  // lower bound, so it reads "at least N" and no action's label carries it.
  const truncated = groups.data?.truncated === true;
  const groupCount = (g: DeadLetterGroup) => (truncated ? `at least ${count(g.count)}` : count(g.count));
  const retryAllText = (g: DeadLetterGroup) => (truncated ? 'Retry all' : `Retry all ${count(g.count)}`);
  // The server says how many groups there were before the limit cut the list.
  const listed = (groups.data?.groups ?? []).length;
  const totalGroups = groups.data?.totalGroups ?? listed;
  const limited = totalGroups > listed;
  const rows = jobs.data?.jobs ?? [];
  // While a page loads the rows are the page before's, and so is their next token: Next
  // waits for the page (as on the jobs page).
  const loadingPage = jobs.isPlaceholderData;
  const next = loadingPage ? undefined : jobs.data?.nextPageToken;
  return (
    <section>
      <h1>Dead letters</h1>
      <label className="inline">
        Queue{' '}
        <select value={queue} onChange={(e) => chooseQueue(e.target.value)} data-testid="dlq-queue">
          {!listQueue.limited && <option value="">all queues</option>}
          {listQueue.names.map((name) => (
            <option key={name} value={name}>
              {name}
            </option>
          ))}
          {/* A queue of the URL not listed (a token limited by a prefix, which lists no queue
              names; a queue not made yet): the picker shows it, not "all queues". */}
          {queue && !listQueue.names.includes(queue) && <option value={queue}>{queue}</option>}
        </select>
      </label>
      <ActionStatus outcome={outcome} testId="dlq-action-status" />
      <h2>By error</h2>
      <ErrorLine error={groups.error} />
      <Loading when={groups.isPending && !groups.error} />
      {truncated && (
        <p className="note" role="status" data-testid="dlq-truncated">
          There are more dead letters than the server groups: these counts cover only the newest
          10,000 DLQ jobs, so each group may hold more jobs than shown. Retrying or purging a
          group still takes all of its jobs.
        </p>
      )}
      {limited && (
        <p className="note" role="status" data-testid="dlq-limited">
          Only the {listed} largest of {count(totalGroups)} groups are listed; smaller ones are not shown.
          {queue ? ' Retry all matching and Purge all matching below still take every job of the queue.' : ' Pick a queue to see its own groups.'}
        </p>
      )}
      <div className="table-wrap">
        <table data-testid="dlq-groups">
          <thead>
            <tr>
              <th scope="col">Queue</th>
              <th scope="col">Type</th>
              <th scope="col">Error</th>
              <th scope="col" className="num">Jobs</th>
              <th scope="col">Newest</th>
              <th scope="col">
                <span className="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {(groups.data?.groups ?? []).map((g, i) => (
              <tr key={`${g.queue}|${g.type}|${g.error}`} data-testid="dlq-group" data-index={i} aria-selected={group !== null && groupKey(group) === groupKey(g)}>
                <th scope="row" className="name">{g.queue}</th>
                <td className="name">{g.type}</td>
                <td className="clip" title={g.error}>
                  {g.error || '(no error text)'}
                </td>
                <td className="num" data-testid="dlq-group-count">
                  {groupCount(g)}
                </td>
                <td>
                  <Ago at={g.newestFinishedAt} />
                </td>
                <td className="actions">
                  <button type="button" onClick={() => chooseGroup(g)} data-testid="dlq-group-show" aria-label={`Show jobs of ${groupName(g)}`}>
                    Show jobs
                  </button>
                  <ActionButton
                    testId="dlq-group-retry"
                    onClick={() => setBulk({ action: 'retry', filter: groupFilter(g), description: `Retry the group "${g.error}" of ${g.queue}.` })}
                    disabled={retry.pending}
                    label={`${retryAllText(g)} of ${groupName(g)}`}
                  >
                    {retryAllText(g)}
                  </ActionButton>
                  <ActionButton
                    testId="dlq-group-purge"
                    danger
                    onClick={() => setBulk({ action: 'purge', filter: groupFilter(g), description: `Purge the group "${g.error}" of ${g.queue}.` })}
                    label={`Purge ${groupName(g)}`}
                  >
                    Purge
                  </ActionButton>
                </td>
              </tr>
            ))}
            {groups.isSuccess && (groups.data.groups ?? []).length === 0 && (
              <tr>
                <td colSpan={6}>The dead-letter queue is empty.</td>
              </tr>
            )}
          </tbody>
        </table>
      </div>
      <h2>
        Jobs {group ? <>in the group “{group.error}”</> : null}{' '}
        {group && (
          <button type="button" className="link-button" onClick={() => chooseGroup(null)} data-testid="dlq-group-clear">
            show all
          </button>
        )}
      </h2>
      <div className="actions">
        <ActionButton testId="dlq-retry-selected" onClick={() => retry.run({ filter: { ids: [...selected] } }, { onSuccess: () => setSelection({ listKey, ids: NONE }) })} disabled={selected.size === 0 || retry.pending}>
          Retry selected ({selected.size})
        </ActionButton>
        <ActionButton testId="dlq-retry-all" onClick={() => setBulk({ action: 'retry', filter: allMatching, description: `Retry ${scope}.` })} disabled={retry.pending}>
          Retry all matching
        </ActionButton>
        <ActionButton testId="dlq-purge-all" danger onClick={() => setBulk({ action: 'purge', filter: allMatching, description: `Purge ${scope}.` })}>
          Purge all matching
        </ActionButton>
      </div>
      <ErrorLine error={jobs.error} testId="jobs-error" />
      <div className="table-wrap">
        <table data-testid="dlq-jobs">
          <thead>
            <tr>
              {canAct && (
                <th scope="col">
                  <span className="sr-only">Select</span>
                </th>
              )}
              <th scope="col">Id</th>
              <th scope="col">Queue</th>
              <th scope="col">Type</th>
              <th scope="col">Finished</th>
              <th scope="col">Last error</th>
              {canAct && (
                <th scope="col">
                  <span className="sr-only">Actions</span>
                </th>
              )}
            </tr>
          </thead>
          <tbody>
            {rows.map((job) => (
              <tr key={job.id} data-testid={`dlq-job-row-${job.id}`}>
                {canAct && (
                  <td>
                    <input
                      type="checkbox"
                      checked={selected.has(job.id)}
                      onChange={(e) => toggle(job.id, e.target.checked)}
                      aria-label={`Select ${job.id}`}
                      data-testid="dlq-select"
                    />
                  </td>
                )}
                <td>
                  <CopyId id={job.id} to={`/jobs/${job.id}`} testId="job-id" />
                </td>
                <td className="name">
                  <Link to={`/queues/${encodeURIComponent(job.queue ?? '')}`}>{job.queue}</Link>
                </td>
                <td className="name">{job.type}</td>
                <td>
                  <Ago at={job.finishedAt} />
                </td>
                <td className="clip" title={job.lastError}>
                  {errorOf(job)}
                </td>
                {canAct && (
                  <td>
                    <ActionButton testId="dlq-retry-one" onClick={() => retryOne.run(job.id)} disabled={retryOne.pending} label={`Retry ${job.id}`}>
                      Retry
                    </ActionButton>
                  </td>
                )}
              </tr>
            ))}
            {jobs.isSuccess && rows.length === 0 && (
              <tr>
                <td colSpan={canAct ? 7 : 5}>{group ? 'No job of this group is dead-lettered any more.' : 'No dead-lettered jobs.'}</td>
              </tr>
            )}
          </tbody>
        </table>
      </div>
      <div className="pager">
        <button type="button" disabled={tokens.length === 0} onClick={() => setTokens(tokens.slice(0, -1))} data-testid="dlq-prev">
          Previous
        </button>
        <span className="muted">
          Page {tokens.length + 1}
          {loadingPage ? ' (loading…)' : ''}
        </span>
        <button type="button" disabled={!next} onClick={() => next && setTokens([...tokens, next])} data-testid="dlq-next">
          Next
        </button>
      </div>
      {canAct && (
        <BulkActionDialog
          action={bulk?.action ?? 'purge'}
          filter={bulk?.filter ?? null}
          description={bulk?.description ?? ''}
          onConfirm={(filter, counted) => (bulk?.action === 'retry' ? retry : purgeAction).run({ filter, counted })}
          onClose={() => setBulk(null)}
        />
      )}
    </section>
  );
}
