/** Recurring schedules: next fire, last job, paused state; pause, resume and run now. */
import { Link } from 'react-router';
import { api } from '../api';
import { Ago } from '../components/Ago';
import { ActionButton, ActionStatus, ErrorLine, Loading, useAction } from '../components/status';
import { time } from '../format';
import { keys, useSchedules } from '../queries';
import type { Schedule } from '../types';
import { usePageTitle } from '../title';

type Act = { name: string; kind: 'pause' | 'resume' | 'trigger' };

export function Schedules() {
  usePageTitle('Schedules');
  const schedules = useSchedules();
  const action = useAction(async ({ name, kind }: Act) => {
    const path = `/schedules/${encodeURIComponent(name)}/${kind}`;
    if (kind === 'trigger') {
      const r = await api<{ jobId?: string; created?: boolean }>('POST', path, { body: {} });
      return `${name}: ran now, job ${r.jobId ?? '?'}${r.created === false ? ' (already submitted)' : ''}`;
    }
    const r = await api<{ schedule: Schedule }>('POST', path);
    return `${name} ${r.schedule.paused ? 'paused' : 'resumed'}`;
  }, [keys.schedules, keys.jobs, keys.stats]);
  const rows = schedules.data?.schedules ?? [];
  return (
    <section>
      <h1>Schedules</h1>
      <ErrorLine error={schedules.error} />
      <Loading when={schedules.isPending && !schedules.error} />
      <ActionStatus outcome={action.outcome} testId="schedule-action-status" />
      <div className="table-wrap">
        <table data-testid="schedules-table">
          <thead>
            <tr>
              <th scope="col">Schedule</th>
              <th scope="col">Cron</th>
              <th scope="col">Queue / type</th>
              <th scope="col">State</th>
              <th scope="col">Next fire</th>
              <th scope="col">Last job</th>
              <th scope="col">
                <span className="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {rows.map((s) => (
              <tr key={s.name} data-testid={`schedule-row-${s.name}`}>
                <th scope="row" className="name">{s.name}</th>
                <td className="mono">
                  {s.cron} {s.timezone && <span className="muted">({s.timezone})</span>}
                </td>
                <td className="name">
                  {s.queue} / {s.type}
                </td>
                <td data-testid="schedule-state">{s.paused ? 'paused' : 'active'}</td>
                <td>
                  {s.paused ? (
                    '—'
                  ) : (
                    <>
                      {time(s.nextRunAt)} (<Ago at={s.nextRunAt} />)
                    </>
                  )}
                </td>
                <td>
                  {s.lastJobId ? (
                    <Link to={`/jobs/${s.lastJobId}`} className="mono" data-testid="schedule-last-job">
                      {s.lastJobId}
                    </Link>
                  ) : (
                    '—'
                  )}
                  {s.lastRunAt && (
                    <span className="muted">
                      {' '}
                      <Ago at={s.lastRunAt} />
                    </span>
                  )}
                </td>
                <td className="actions">
                  {s.paused ? (
                    <ActionButton testId="schedule-resume" onClick={() => action.run({ name: s.name, kind: 'resume' })} disabled={action.pending} label={`Resume ${s.name}`}>
                      Resume
                    </ActionButton>
                  ) : (
                    <ActionButton testId="schedule-pause" onClick={() => action.run({ name: s.name, kind: 'pause' })} disabled={action.pending} label={`Pause ${s.name}`}>
                      Pause
                    </ActionButton>
                  )}
                  <ActionButton testId="schedule-trigger" onClick={() => action.run({ name: s.name, kind: 'trigger' })} disabled={action.pending} label={`Run ${s.name} now`}>
                    Run now
                  </ActionButton>
                </td>
              </tr>
            ))}
            {schedules.isSuccess && rows.length === 0 && (
              <tr>
                <td colSpan={7}>No schedules.</td>
              </tr>
            )}
          </tbody>
        </table>
      </div>
    </section>
  );
}
