/** Live worker sessions across all servers (GET /v1/workers), refreshed every 2 s. */
import { Ago } from '../components/Ago';
import { ErrorLine, Loading } from '../components/status';
import { time } from '../format';
import { useWorkers } from '../queries';
import { usePageTitle } from '../title';

export function Workers() {
  usePageTitle('Workers');
  const workers = useWorkers();
  const rows = workers.data?.workers ?? [];
  return (
    <section>
      <h1>Workers</h1>
      <ErrorLine error={workers.error} />
      <Loading when={workers.isPending && !workers.error} />
      <div className="table-wrap">
        <table data-testid="workers-table">
          <thead>
            <tr>
              <th scope="col">Worker</th>
              <th scope="col">Server</th>
              <th scope="col">Queues</th>
              <th scope="col">Job types</th>
              <th scope="col" className="num">Slots</th>
              <th scope="col" className="num">Held jobs</th>
              <th scope="col">Connected since</th>
              <th scope="col">Last seen</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((w) => (
              <tr key={`${w.serverId}/${w.workerId}`} data-testid={`worker-row-${w.workerId}`}>
                <th scope="row" className="mono">
                  {w.workerId}
                </th>
                <td className="mono">{w.serverId}</td>
                <td className="name">{(w.queues ?? []).join(', ')}</td>
                <td className="name">{(w.jobTypes ?? []).join(', ') || 'any'}</td>
                <td className="num" data-testid="worker-slots">
                  {w.slots ?? 0}
                </td>
                <td className="num" data-testid="worker-held">
                  {w.heldJobs ?? 0}
                </td>
                <td>{time(w.connectedAt)}</td>
                <td>
                  <Ago at={w.lastSeenAt} />
                </td>
              </tr>
            ))}
            {workers.isSuccess && rows.length === 0 && (
              <tr>
                <td colSpan={8}>No worker is connected.</td>
              </tr>
            )}
          </tbody>
        </table>
      </div>
    </section>
  );
}
