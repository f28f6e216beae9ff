/** The queue list: settings at a glance, paused state, a link to each queue's page. */
import { Link } from 'react-router';
import { ErrorLine, Loading } from '../components/status';
import { enumLabel } from '../format';
import { useQueues } from '../queries';
import { usePageTitle } from '../title';

export function Queues() {
  usePageTitle('Queues');
  const queues = useQueues();
  const rows = queues.data?.queues ?? [];
  return (
    <section>
      <h1>Queues</h1>
      <ErrorLine error={queues.error} />
      <Loading when={queues.isPending && !queues.error} />
      <div className="table-wrap">
        <table data-testid="queues-table">
          <thead>
            <tr>
              <th scope="col">Queue</th>
              <th scope="col">State</th>
              <th scope="col" className="num">Max attempts</th>
              <th scope="col">Backoff</th>
              <th scope="col" className="num">Lease (s)</th>
              <th scope="col" className="num">Max concurrency</th>
              <th scope="col" className="num">Rate limit/s</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((queue) => (
              <tr key={queue.name} data-testid={`queues-row-${queue.name}`}>
                <th scope="row" className="name">
                  <Link to={`/queues/${encodeURIComponent(queue.name)}`}>{queue.name}</Link>
                </th>
                <td data-testid="queue-paused">{queue.paused ? 'paused' : 'active'}</td>
                <td className="num">{queue.maxAttempts ?? '—'}</td>
                <td>{enumLabel(queue.backoff?.kind, 'BACKOFF_KIND_')}</td>
                <td className="num">{queue.leaseSeconds ?? '—'}</td>
                <td className="num">{queue.maxConcurrency ? queue.maxConcurrency : 'unlimited'}</td>
                <td className="num">{queue.rateLimit?.perSecond ? `${queue.rateLimit.perSecond} (burst ${queue.rateLimit.burst ?? 1})` : 'none'}</td>
              </tr>
            ))}
            {queues.isSuccess && rows.length === 0 && (
              <tr>
                <td colSpan={7}>No queues yet.</td>
              </tr>
            )}
          </tbody>
        </table>
      </div>
    </section>
  );
}
