/**
 * The jobs list: filters (queue, states, type, idempotency key; an id jumps to that job's
 * page) kept in the URL, pages fetched from the server with page tokens ("Next" pushes the
 * answer's next_page_token on a stack, "Previous" pops it), full ids with a copy button.
 * The stack is the history entry's state, not React state: each page is an entry of its
 * own, so a reload stays on the page and Back and Forward walk the pages.
 * An admin may cancel every pending, waiting or running job the applied filter matches
 * (CancelJobs, after its dry run's count in the confirmation dialog).
 */
import { useState, type FormEvent } from 'react';
import { Link, useLocation, useNavigate, useSearchParams } from 'react-router';
import { useCanAct } from '../auth';
import { Ago } from '../components/Ago';
import { BulkActionDialog } from '../components/BulkActionDialog';
import { CopyId } from '../components/CopyId';
import { ActionButton, ActionStatus, ErrorLine, Loading, useAction } from '../components/status';
import { api } from '../api';
import { bulkOutcome, isJobId, stateLabel } from '../format';
import { keys, useJobs, useListQueue } from '../queries';
import { JOB_STATES, type JobFilter, type JobState } from '../types';
import { usePageTitle } from '../title';

const PAGE_SIZE = 50;

/** The states a cancel takes (CancelJobs). */
const CANCELLABLE: readonly JobState[] = ['JOB_STATE_PENDING', 'JOB_STATE_WAITING', 'JOB_STATE_RUNNING'];

/**
 * The CancelJobs filter of the list's filter, or null when there is none to offer: nothing
 * filtered on (the server refuses an empty filter, and "every job" is not a click away), an
 * idempotency key (a bulk filter has none), or only finished states chosen.
 */
function cancelFilterOf(filter: { queue: string; states: JobState[]; type: string; key: string }): JobFilter | null {
  if (filter.key || (!filter.queue && !filter.type && filter.states.length === 0)) return null;
  const states = filter.states.filter((s) => CANCELLABLE.includes(s));
  if (filter.states.length > 0 && states.length === 0) return null;
  return { queue: filter.queue || undefined, type: filter.type || undefined, states: states.length > 0 ? states : undefined };
}

/** The page-token stack kept in a history entry's state ([] for anything else: a first page). */
function pageTokensOf(state: unknown): string[] {
  const tokens = (state as { pageTokens?: unknown } | null)?.pageTokens;
  return Array.isArray(tokens) && tokens.every((t) => typeof t === 'string') ? tokens : [];
}

/**
 * A state of the URL as the checkboxes name it. `?state=DLQ` (the API's short form, what a
 * person types into a link; any case) is JOB_STATE_DLQ, so its box shows checked for the
 * filter the list applies. Anything else is kept as given: the server's line says why it is refused.
 */
function urlState(value: string): string {
  const upper = value.toUpperCase();
  const full = upper.startsWith('JOB_STATE_') ? upper : `JOB_STATE_${upper}`;
  return (JOB_STATES as readonly string[]).includes(full) ? full : value;
}

/** The /jobs page. */
export function Jobs() {
  usePageTitle('Jobs');
  const [search, setSearch] = useSearchParams();
  const navigate = useNavigate();
  // A token limited to queues lists the jobs of one of them, never of "any".
  const listQueue = useListQueue(search.get('queue') ?? '');
  const filter = {
    queue: listQueue.queue ?? '',
    states: search.getAll('state').map(urlState) as JobState[],
    type: search.get('type') ?? '',
    key: search.get('key') ?? '',
  };
  const filterKey = `${search.toString()}|${filter.queue}`;
  const location = useLocation();
  // The page tokens that led to this page, from the history entry (a new filter is a new
  // entry without them: the first page).
  const tokens = pageTokensOf(location.state);
  /** Shows the page these tokens lead to, as a new history entry. */
  const goPage = (next: string[]) => void navigate({ search: location.search }, { state: { pageTokens: next } });
  const jobs = useJobs({
    queue: filter.queue,
    states: filter.states,
    type: filter.type,
    idempotency_key: filter.key,
    page_token: tokens[tokens.length - 1],
    page_size: PAGE_SIZE,
  }, listQueue.queue !== null);
  const canAct = useCanAct();
  const cancelFilter = cancelFilterOf(filter);
  // The cancel waiting for its confirmation (the dialog is open while this is set).
  const [confirming, setConfirming] = useState<JobFilter | null>(null);
  const cancelAll = useAction(
    ({ filter: f, counted }: { filter: JobFilter; counted: string }) =>
      api<{ count?: string }>('POST', '/jobs/cancel', { body: { filter: f } }).then((r) => bulkOutcome('Cancelled', r.count, counted)),
    [keys.jobs, keys.stats, keys.queues],
  );
  const [form, setForm] = useState({ ...filter, id: '' });
  const [idError, setIdError] = useState('');
  // A URL change from outside the form (a link, the back button) shows its filters.
  const [formKey, setFormKey] = useState(filterKey);
  if (formKey !== filterKey) {
    setFormKey(filterKey);
    setForm({ ...filter, id: '' });
  }

  function apply(event: FormEvent) {
    event.preventDefault();
    const id = form.id.trim();
    if (id) {
      if (!isJobId(id)) {
        setIdError(`"${id}" is not a job id (a UUID)`);
        return;
      }
      void navigate(`/jobs/${id.toLowerCase()}`);
      return;
    }
    setIdError('');
    const next = new URLSearchParams();
    if (form.queue) next.set('queue', form.queue);
    for (const state of form.states) next.append('state', state);
    if (form.type.trim()) next.set('type', form.type.trim());
    if (form.key.trim()) next.set('key', form.key.trim());
    setSearch(next);
  }
  function toggleState(state: JobState, on: boolean) {
    setForm({ ...form, states: on ? [...form.states, state] : form.states.filter((s) => s !== state) });
  }
  const rows = jobs.data?.jobs ?? [];
  // While a page loads, the rows shown are the page before's (placeholderData): its next
  // token is not this page's, so Next waits for the page (a second click would show the
  // page just asked for under the next page's number, twice in the history).
  const loadingPage = jobs.isPlaceholderData;
  const next = loadingPage ? undefined : jobs.data?.nextPageToken;
  return (
    <section>
      <h1>Jobs</h1>
      <form className="filters" onSubmit={apply} data-testid="jobs-filters">
        <label>
          Queue
          <select value={form.queue} onChange={(e) => setForm({ ...form, queue: e.target.value })} data-testid="filter-queue">
            {!listQueue.limited && <option value="">any</option>}
            {listQueue.names.map((name) => (
              <option key={name} value={name}>
                {name}
              </option>
            ))}
            {form.queue && !listQueue.names.includes(form.queue) && <option value={form.queue}>{form.queue}</option>}
          </select>
        </label>
        <fieldset className="states">
          <legend>States</legend>
          {JOB_STATES.map((state) => (
            <label key={state} className="check">
              <input
                type="checkbox"
                checked={form.states.includes(state)}
                onChange={(e) => toggleState(state, e.target.checked)}
                data-testid={`filter-state-${state.replace('JOB_STATE_', '').toLowerCase()}`}
              />
              {stateLabel(state)}
            </label>
          ))}
        </fieldset>
        <label>
          Type
          <input value={form.type} onChange={(e) => setForm({ ...form, type: e.target.value })} data-testid="filter-type" />
        </label>
        <label>
          Idempotency key
          <input value={form.key} onChange={(e) => setForm({ ...form, key: e.target.value })} data-testid="filter-key" />
        </label>
        <label>
          Job id
          <input
            value={form.id}
            onChange={(e) => setForm({ ...form, id: e.target.value })}
            placeholder="opens the job"
            className="mono"
            data-testid="filter-id"
          />
        </label>
        <button type="submit" data-testid="filter-apply">
          Apply
        </button>
      </form>
      {idError && (
        <p className="error-line" role="alert" data-testid="filter-id-error">
          {idError}
        </p>
      )}
      {canAct && cancelFilter && (
        <div className="actions">
          <ActionButton testId="jobs-cancel-all" danger onClick={() => setConfirming(cancelFilter)} disabled={cancelAll.pending}>
            Cancel all matching
          </ActionButton>
        </div>
      )}
      <ActionStatus outcome={cancelAll.outcome} testId="jobs-action-status" />
      <ErrorLine error={jobs.error} />
      <Loading when={jobs.isPending && !jobs.error} />
      <div className="table-wrap">
        <table data-testid="jobs-table">
          <thead>
            <tr>
              <th scope="col">Id</th>
              <th scope="col">Queue</th>
              <th scope="col">Type</th>
              <th scope="col">State</th>
              <th scope="col" className="num">Attempt</th>
              <th scope="col">Created</th>
              <th scope="col">Last error</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((job) => (
              <tr key={job.id} data-testid={`job-row-${job.id}`} data-state={job.state}>
                <td>
                  <CopyId id={job.id} to={`/jobs/${job.id}`} testId="job-id" />
                </td>
                <td className="name">
                  <Link to={`/queues/${encodeURIComponent(job.queue ?? '')}`}>{job.queue}</Link>
                </td>
                <td className="name">{job.type}</td>
                <td>
                  <span className={`state state-${stateLabel(job.state)}`} data-testid="job-state">
                    {stateLabel(job.state)}
                  </span>
                </td>
                <td className="num">
                  {job.attempt ?? 0}/{job.maxAttempts ?? '?'}
                </td>
                <td>
                  <Ago at={job.createdAt} />
                </td>
                <td className="clip" title={job.lastError}>
                  {job.lastError?.split('\n')[0]}
                </td>
              </tr>
            ))}
            {jobs.isSuccess && rows.length === 0 && (
              <tr>
                <td colSpan={7}>No jobs match.</td>
              </tr>
            )}
          </tbody>
        </table>
      </div>
      <div className="pager">
        <button type="button" disabled={tokens.length === 0} onClick={() => goPage(tokens.slice(0, -1))} data-testid="jobs-prev">
          Previous
        </button>
        <span className="muted" data-testid="jobs-page">
          Page {tokens.length + 1}
          {loadingPage ? ' (loading…)' : ''}
        </span>
        <button type="button" disabled={!next} onClick={() => next && goPage([...tokens, next])} data-testid="jobs-next">
          Next
        </button>
      </div>
      {canAct && (
        <BulkActionDialog
          action="cancel"
          filter={confirming}
          description={confirming ? cancelDescription(confirming) : ''}
          onConfirm={(f, counted) => cancelAll.run({ filter: f, counted })}
          onClose={() => setConfirming(null)}
        />
      )}
    </section>
  );
}

/** The dialog's line: "Cancel the pending or running jobs of queue q of type t." */
function cancelDescription(f: JobFilter): string {
  const what = f.states ? f.states.map(stateLabel).join(' or ') : 'pending, waiting and running';
  return `Cancel the ${what} jobs${f.queue ? ` of queue ${f.queue}` : ''}${f.type ? ` of type ${f.type}` : ''}.`;
}
