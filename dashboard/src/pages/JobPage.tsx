/**
 * One job: its state and facts, payload, result, progress, the attempts with their errors,
 * an event timeline derived from the job and its attempts, its dependency graph, and
 * cancel / retry for an admin.
 */
import { lazy, Suspense, type ReactNode } from 'react';
import { Link, useParams } from 'react-router';
import { api } from '../api';
import { Boundary } from '../components/Boundary';
import { CopyId } from '../components/CopyId';
import { ActionButton, ActionStatus, ErrorLine, Loading, useAction } from '../components/status';
import { count, enumLabel, isJobId, json, num, stateLabel, time } from '../format';
import { keys, useJob } from '../queries';
import type { Job, JobAttempt } from '../types';
import { Timeline } from './Timeline';
import { usePageTitle } from '../title';

const DepGraph = lazy(() => import('../components/DepGraph'));

const FINISHED = new Set(['JOB_STATE_COMPLETED', 'JOB_STATE_DLQ', 'JOB_STATE_CANCELLED']);
const RETRYABLE = new Set(['JOB_STATE_DLQ', 'JOB_STATE_CANCELLED']);

export function JobPage() {
  const id = useParams().id ?? '';
  usePageTitle(`Job ${id}`);
  const query = useJob(id);
  const action = useAction(
    (kind: 'cancel' | 'retry') =>
      api<{ job: Job }>('POST', `/jobs/${encodeURIComponent(id)}/${kind}`).then(
        (r) => `${kind === 'cancel' ? 'Cancel' : 'Retry'}: the job is now ${stateLabel(r.job.state)}${r.job.cancelRequested ? ' (cancel requested)' : ''}`,
      ),
    [keys.job(id), keys.jobs, keys.stats, keys.deadLetters],
  );
  const job = query.data?.job;
  const attempts = query.data?.attempts ?? [];
  const dependents = query.data?.dependents ?? [];
  return (
    <section>
      <p className="crumbs">
        <Link to="/jobs">Jobs</Link> /
      </p>
      <h1>
        {/* No copy button for an id that names no job (`/jobs/notauuid`): the error line says why. */}
        Job {isJobId(id) ? <CopyId id={id} testId="job-page-id" /> : <code data-testid="job-page-id">{id}</code>}
      </h1>
      <ErrorLine error={query.error} />
      <Loading when={query.isPending && !query.error} />
      {job && (
        <>
          <div className="actions">
            <span className={`badge state state-${stateLabel(job.state)}`} data-testid="job-state">
              {stateLabel(job.state)}
              {job.cancelRequested ? ' (cancel requested)' : ''}
            </span>
            {!FINISHED.has(job.state ?? '') && !job.cancelRequested && (
              <ActionButton testId="job-cancel" danger onClick={() => action.run('cancel')} disabled={action.pending}>
                Cancel
              </ActionButton>
            )}
            {RETRYABLE.has(job.state ?? '') && (
              <ActionButton testId="job-retry" onClick={() => action.run('retry')} disabled={action.pending}>
                Retry
              </ActionButton>
            )}
          </div>
          <ActionStatus outcome={action.outcome} testId="job-action-status" />
          <Facts job={job} />
          <div className="two">
            <div>
              <h2>Payload</h2>
              <pre data-testid="job-payload">{json(job.payload)}</pre>
            </div>
            <div>
              <h2>Result</h2>
              <pre data-testid="job-result">{json(job.result)}</pre>
            </div>
          </div>
          {job.lastError && (
            <>
              <h2>Last error</h2>
              <pre className="error-block" data-testid="job-last-error">
                {job.lastError}
              </pre>
            </>
          )}
          <h2>Attempts</h2>
          <Attempts attempts={attempts} />
          <h2>Timeline</h2>
          <Timeline job={job} attempts={attempts} />
          <h2>Dependencies</h2>
          <Dependencies job={job} dependents={dependents} />
        </>
      )}
    </section>
  );
}

function Facts({ job }: { job: Job }) {
  const p = job.progress;
  const progress = p
    ? [p.percent !== undefined ? `${num(p.percent)}%` : '', p.total !== undefined ? `${count(p.done)}/${count(p.total)}` : '', p.message ?? '']
        .filter(Boolean)
        .join(' · ') + ` (attempt ${p.attempt ?? '?'}, ${time(p.reportedAt)})`
    : 'none reported';
  const rows: [string, ReactNode][] = [
    ['Queue', <Link to={`/queues/${encodeURIComponent(job.queue ?? '')}`}>{job.queue}</Link>],
    ['Type', job.type],
    ['Priority', job.priority ?? 0],
    ['Attempt', `${job.attempt ?? 0} of ${job.maxAttempts ?? '?'}`],
    ['Idempotency key', job.idempotencyKey || '—'],
    ['Concurrency key', job.concurrencyKey || '—'],
    ['Worker', job.workerId || '—'],
    ['Created', time(job.createdAt)],
    ['Run at', time(job.runAt)],
    ['Started', time(job.startedAt)],
    ['Finished', time(job.finishedAt)],
    ['Lease expires', time(job.leaseExpiresAt)],
    ['Progress', progress],
  ];
  return (
    <dl className="facts wide" data-testid="job-facts">
      {rows.map(([label, value]) => (
        <div key={label}>
          <dt>{label}</dt>
          <dd data-testid={label === 'Progress' ? 'job-progress' : undefined}>{value}</dd>
        </div>
      ))}
    </dl>
  );
}

function Attempts({ attempts }: { attempts: readonly JobAttempt[] }) {
  if (attempts.length === 0) return <p className="muted">No attempt yet.</p>;
  return (
    <div className="table-wrap">
      <table data-testid="attempts-table">
        <thead>
          <tr>
            <th scope="col" className="num">#</th>
            <th scope="col">Outcome</th>
            <th scope="col">Worker</th>
            <th scope="col">Started</th>
            <th scope="col">Finished</th>
            <th scope="col">Error</th>
          </tr>
        </thead>
        <tbody>
          {attempts.map((a, i) => (
            <tr key={`${a.attempt}-${a.startedAt}-${i}`} data-testid={`attempt-row-${i + 1}`} data-outcome={a.outcome}>
              <th scope="row" className="num">
                {a.attempt}
              </th>
              <td data-testid="attempt-outcome">{enumLabel(a.outcome, 'ATTEMPT_OUTCOME_')}</td>
              <td className="mono">{a.workerId}</td>
              <td>{time(a.startedAt)}</td>
              <td>{time(a.finishedAt)}</td>
              <td>
                {a.error ? (
                  <pre className="error-block" data-testid="attempt-error">
                    {a.error}
                  </pre>
                ) : (
                  '—'
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** Most children GetJob lists (GetJobResponse.dependents): a list this long may stand for more. */
const MAX_CHILDREN_LISTED = 1000;

function Dependencies({ job, dependents }: { job: Job; dependents: readonly string[] }) {
  const parents = job.dependsOn ?? [];
  if (parents.length === 0 && dependents.length === 0) return <p className="muted">No parents and no children.</p>;
  return (
    <div className="two">
      <Boundary what="The dependency graph">
        <Suspense fallback={<p className="muted">Loading the graph…</p>}>
          <DepGraph id={job.id} parents={parents} children={dependents} />
        </Suspense>
      </Boundary>
      <div data-testid="job-dependencies">
        <h3>Parents (runs after)</h3>
        <IdList ids={parents} testId="job-parent" />
        <h3>Children (run after it)</h3>
        <IdList ids={dependents} testId="job-child" />
        {dependents.length >= MAX_CHILDREN_LISTED && (
          <p className="muted" data-testid="job-children-cut">
            The server lists at most {MAX_CHILDREN_LISTED.toLocaleString('en')} children: this job may have more.
          </p>
        )}
      </div>
    </div>
  );
}

function IdList({ ids, testId }: { ids: readonly string[]; testId: string }) {
  if (ids.length === 0) return <p className="muted">none</p>;
  return (
    <ul className="ids">
      {ids.map((id) => (
        <li key={id}>
          <CopyId id={id} to={`/jobs/${id}`} testId={testId} />
        </li>
      ))}
    </ul>
  );
}
