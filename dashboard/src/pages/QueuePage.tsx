/**
 * One queue: its counts, pause and resume, its settings, editable by an admin through
 * PUT /v1/queues/{name} (only the fields shown are sent; the rest keep their values), and
 * its deletion (DELETE /v1/queues/{name}, behind a confirm dialog; only an empty queue).
 */
import { useQuery } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { Link, useNavigate, useParams } from 'react-router';
import { api } from '../api';
import { useCanAct } from '../auth';
import { ActionButton, ActionStatus, ErrorLine, Loading, useAction, type ActionOutcome } from '../components/status';
import { DeleteQueueDialog } from '../components/DeleteQueueDialog';
import { count, durationSeconds, toDuration } from '../format';
import { keys, LIVE, useQueue } from '../queries';
import type { BackoffKind, Queue, QueueStats } from '../types';
import { usePageTitle } from '../title';

export function QueuePage() {
  const name = useParams().name ?? '';
  usePageTitle(`Queue ${name}`);
  const queue = useQueue(name);
  const canAct = useCanAct();
  const stats = useQuery({
    queryKey: [...keys.stats, name],
    queryFn: ({ signal }) => api<{ stats: QueueStats }>('GET', `/queues/${encodeURIComponent(name)}/stats`, { signal }),
    ...LIVE,
  });
  const path = `/queues/${encodeURIComponent(name)}`;
  const toggle = useAction(
    (action: 'pause' | 'resume') => api<{ queue: Queue }>('POST', `${path}/${action}`).then((r) => `${r.queue.name} ${r.queue.paused ? 'paused' : 'resumed'}`),
    [keys.queues, keys.stats],
  );
  const save = useAction(
    (body: Record<string, unknown>) => api<{ queue: Queue }>('PUT', path, { body }).then((r) => `Saved the settings of ${r.queue.name}`),
    [keys.queues, keys.stats],
  );
  const navigate = useNavigate();
  const [confirmDelete, setConfirmDelete] = useState(false);
  // The queue's own status line says a refusal (what is in the queue); a delete goes back to the list.
  const remove = useAction(
    () => api<object>('DELETE', path).then(() => {
      void navigate('/queues');
      return `Deleted ${name}`;
    }),
    [keys.queues, keys.stats],
  );
  const q = queue.data?.queue;
  const s = stats.data?.stats;
  // When our last save succeeded: the form then reloads what the server made of it.
  const [savedAt, setSavedAt] = useState(0);
  if (save.outcome?.ok && save.outcome.at !== savedAt) setSavedAt(save.outcome.at);
  return (
    <section>
      <p className="crumbs">
        <Link to="/queues">Queues</Link> /
      </p>
      <h1>
        Queue <span className="mono">{name}</span>{' '}
        {q && (
          <span className={`badge ${q.paused ? 'badge-warn' : 'badge-ok'}`} data-testid="queue-state">
            {q.paused ? 'paused' : 'active'}
          </span>
        )}
      </h1>
      <ErrorLine error={queue.error} />
      <Loading when={queue.isPending && !queue.error} />
      {q && (
        <div className="actions">
          {q.paused ? (
            <ActionButton testId="queue-resume" onClick={() => toggle.run('resume')} disabled={toggle.pending}>
              Resume
            </ActionButton>
          ) : (
            <ActionButton testId="queue-pause" onClick={() => toggle.run('pause')} disabled={toggle.pending}>
              Pause
            </ActionButton>
          )}
          <Link to={`/jobs?queue=${encodeURIComponent(name)}`}>Jobs of this queue</Link>
          <Link to={`/dead-letters?queue=${encodeURIComponent(name)}`}>Dead letters</Link>
          <ActionButton testId="queue-delete" danger onClick={() => setConfirmDelete(true)} disabled={remove.pending}>
            Delete queue
          </ActionButton>
        </div>
      )}
      {canAct && (
        <DeleteQueueDialog name={name} open={confirmDelete} onConfirm={() => remove.run(undefined)} onClose={() => setConfirmDelete(false)} />
      )}
      <ActionStatus outcome={latest(remove.outcome, toggle.outcome)} testId="queue-action-status" />
      {s && (
        <dl className="facts" data-testid="queue-counts">
          {(['pending', 'running', 'waiting', 'completed', 'dlq', 'cancelled'] as const).map((field) => (
            <div key={field}>
              <dt>{field === 'dlq' ? 'DLQ' : field}</dt>
              <dd data-testid={`count-${field}`}>{count(s[field])}</dd>
            </div>
          ))}
        </dl>
      )}
      {/* The stats of a queue that cannot be read fail the same way (NOT_FOUND, UNAVAILABLE):
          the queue's line says it once. */}
      <ErrorLine error={queue.error ? null : stats.error} testId="stats-error" />
      {/* Keyed by the settings it shows and our last save: a change of them (another
          operator's) or a save reloads the fields; a pause or resume, which changes the
          queue but none of them, keeps what is being typed. */}
      {q && <Settings key={`${q.name}@${JSON.stringify(initial(q))}@${savedAt}`} queue={q} save={save} />}
    </section>
  );
}

/** The newer of two action outcomes (the status line says the last thing done). */
function latest(a: ActionOutcome, b: ActionOutcome): ActionOutcome {
  return !a ? b : !b ? a : a.at >= b.at ? a : b;
}

const KINDS: readonly BackoffKind[] = ['BACKOFF_KIND_EXPONENTIAL', 'BACKOFF_KIND_LINEAR', 'BACKOFF_KIND_FIXED'];

/** The form's fields as text (what the inputs hold). */
function initial(q: Queue) {
  const text = (v: number | undefined) => (v === undefined ? '' : String(v));
  return {
    maxAttempts: text(q.maxAttempts),
    kind: q.backoff?.kind ?? 'BACKOFF_KIND_EXPONENTIAL',
    base: text(durationSeconds(q.backoff?.base)),
    cap: text(durationSeconds(q.backoff?.cap)),
    jitter: text(q.backoff?.jitter ?? 0),
    leaseSeconds: text(q.leaseSeconds),
    maxConcurrency: text(q.maxConcurrency ?? 0),
    perSecond: text(q.rateLimit?.perSecond ?? 0),
    burst: text(q.rateLimit?.burst ?? 1),
    maxConcurrencyPerKey: text(q.maxConcurrencyPerKey ?? 0),
    // Seconds on the wire; days here (an operator thinks of a retention in days). 0 = forever.
    completedDays: text(days(q.completedRetention)),
    cancelledDays: text(days(q.cancelledRetention)),
    dlqDays: text(days(q.dlqRetention)),
    // Unset on the wire = none = 0 here.
    attemptTimeout: text(durationSeconds(q.attemptTimeout) ?? 0),
  };
}

const DAY_SECONDS = 86_400;

/** A retention (a proto Duration) in days, to at most 6 decimals; absent = 0 (forever). */
function days(retention: string | undefined): number {
  return Number(((durationSeconds(retention) ?? 0) / DAY_SECONDS).toFixed(6));
}

type Fields = ReturnType<typeof initial>;

/** The numeric fields (the form's number inputs); delete on complete is a checkbox of its own. */
type NumberField = Exclude<keyof Fields, 'kind'>;

function Settings({ queue, save }: { queue: Queue; save: ReturnType<typeof useAction<Record<string, unknown>>> }) {
  const canAct = useCanAct();
  const [fields, setFields] = useState<Fields>(() => initial(queue));
  const [deleteOnComplete, setDeleteOnComplete] = useState(queue.deleteOnComplete ?? false);
  function submit(event: FormEvent) {
    event.preventDefault();
    if (!canAct) return;
    const int = (v: string) => (v.trim() === '' ? undefined : Math.trunc(Number(v)));
    const real = (v: string) => (v.trim() === '' ? undefined : Number(v));
    const base = real(fields.base);
    const cap = real(fields.cap);
    // Whole seconds: the server keeps retentions and timeouts in seconds.
    const seconds = (v: string) => (v.trim() === '' ? undefined : toDuration(Math.round(Number(v))));
    const retention = (v: string) => (v.trim() === '' ? undefined : toDuration(Math.round(Number(v) * DAY_SECONDS)));
    save.run({
      maxAttempts: int(fields.maxAttempts),
      backoff: {
        kind: fields.kind,
        base: base === undefined ? undefined : toDuration(base),
        cap: cap === undefined ? undefined : toDuration(cap),
        jitter: real(fields.jitter) ?? 0,
      },
      leaseSeconds: int(fields.leaseSeconds),
      maxConcurrency: int(fields.maxConcurrency),
      rateLimit: { perSecond: real(fields.perSecond) ?? 0, burst: int(fields.burst) ?? 1 },
      maxConcurrencyPerKey: int(fields.maxConcurrencyPerKey),
      completedRetention: retention(fields.completedDays),
      cancelledRetention: retention(fields.cancelledDays),
      dlqRetention: retention(fields.dlqDays),
      attemptTimeout: seconds(fields.attemptTimeout),
      deleteOnComplete,
    });
  }
  const field = (key: NumberField, label: string, props: { step?: string; min?: string; max?: string; hint?: string } = {}) => (
    <label>
      {label}
      {/* Required: an empty field would be left out of the PUT, so the old value would stay
          while the page said "Saved" (a limit cleared to lift it, say). 0 lifts a limit. */}
      <input
        type="number"
        inputMode="decimal"
        required
        value={fields[key]}
        step={props.step ?? '1'}
        min={props.min ?? '0'}
        max={props.max}
        onChange={(e) => setFields({ ...fields, [key]: e.target.value })}
        data-testid={`setting-${key}`}
      />
      {props.hint && <small className="muted">{props.hint}</small>}
    </label>
  );
  return (
    <form className="settings" onSubmit={submit} data-testid="queue-settings">
      <h2>Settings</h2>
      <fieldset disabled={!canAct || save.pending}>
        <legend className="sr-only">Queue settings</legend>
        <div className="grid">
          {field('maxAttempts', 'Max attempts', { min: '1' })}
          {field('leaseSeconds', 'Lease (seconds)', { min: '1' })}
          {field('maxConcurrency', 'Max concurrency', { hint: '0 = unlimited' })}
          {field('maxConcurrencyPerKey', 'Max concurrency per key', { hint: '0 = no per-key limit' })}
          {field('perSecond', 'Rate limit (starts/s)', { step: 'any', hint: '0 = no limit' })}
          {field('burst', 'Rate burst', { min: '1' })}
          <label>
            Backoff kind
            <select value={fields.kind} onChange={(e) => setFields({ ...fields, kind: e.target.value as BackoffKind })} data-testid="setting-kind">
              {KINDS.map((kind) => (
                <option key={kind} value={kind}>
                  {kind.replace('BACKOFF_KIND_', '').toLowerCase()}
                </option>
              ))}
            </select>
          </label>
          {field('base', 'Backoff base (s)', { step: 'any' })}
          {field('cap', 'Backoff cap (s)', { step: 'any' })}
          {field('jitter', 'Backoff jitter (0..1)', { step: 'any', max: '1' })}
          {field('attemptTimeout', 'Attempt timeout (s)', { hint: '0 = none; applies to jobs submitted after' })}
          {field('completedDays', 'Keep completed (days)', { step: 'any', hint: '0 = forever' })}
          {field('cancelledDays', 'Keep cancelled (days)', { step: 'any', hint: '0 = forever' })}
          {field('dlqDays', 'Keep dead letters (days)', { step: 'any', hint: '0 = forever; a deleted one cannot be retried' })}
          <label className="check">
            <input type="checkbox" checked={deleteOnComplete} onChange={(e) => setDeleteOnComplete(e.target.checked)} data-testid="setting-deleteOnComplete" />
            Delete jobs at completion (results not kept)
          </label>
        </div>
      </fieldset>
      {canAct && (
        <button type="submit" disabled={save.pending} data-testid="queue-save" data-action="">
          Save settings
        </button>
      )}
      <ActionStatus outcome={save.outcome} testId="queue-save-status" />
    </form>
  );
}
