/**
 * The overview: every queue's counts by state as text (a paused queue marked), its throughput
 * and workers, the telemetry lag, and the last hour's throughput and latency charts (all
 * refreshed every 2 s).
 */
import { useMemo, useState } from 'react';
import { Link } from 'react-router';
import type uPlot from 'uplot';
import { Chart, type ChartSeries } from '../components/Chart';
import { ErrorLine, Loading } from '../components/status';
import { count, ms, num, outboxLagText } from '../format';
import { useQueues, useQueueSeries, useQueueStats } from '../queries';
import type { SeriesPoint } from '../types';
import { usePageTitle } from '../title';

/** The count columns, in table order: [field, heading]. */
const COUNTS = [
  ['pending', 'Pending'],
  ['running', 'Running'],
  ['waiting', 'Waiting'],
  ['completed', 'Completed'],
  ['dlq', 'DLQ'],
  ['cancelled', 'Cancelled'],
] as const;

const perMinute = (v: number) => `${num(v)}/min`;
const THROUGHPUT: readonly ChartSeries[] = [
  { label: 'submitted', color: '--series-1', format: perMinute },
  { label: 'completed', color: '--series-2', format: perMinute },
  { label: 'failed', color: '--series-3', format: perMinute },
  { label: 'dead-lettered', color: '--series-4', format: perMinute },
];
const LATENCY: readonly ChartSeries[] = [
  { label: 'wait p50', color: '--series-1', format: ms },
  { label: 'wait p95', color: '--series-5', format: ms },
  { label: 'run p50', color: '--series-2', format: ms },
  { label: 'run p95', color: '--series-6', format: ms },
];

export function Overview() {
  usePageTitle('Overview');
  const stats = useQueueStats();
  // Paused is a queue's setting, not a stat: read from the queue list, so that a queue whose
  // pending count grows because nobody may take its jobs says why on the page an operator
  // opens first. Until the list answers (or if it fails) no row is marked.
  const queues = useQueues();
  const paused = useMemo(() => new Set((queues.data?.queues ?? []).filter((q) => q.paused).map((q) => q.name)), [queues.data]);
  const [chartQueue, setChartQueue] = useState('');
  const rows = stats.data?.stats ?? [];
  // Server-wide: every queue's stats carry the same value.
  const lag = stats.data ? outboxLagText(rows[0]?.outboxLagEvents, rows[0]?.outboxLagEstimated) : '— events';
  return (
    <section>
      <h1>Overview</h1>
      <p className="muted" data-testid="outbox-lag">
        Telemetry lag: <strong>{lag}</strong> not yet projected
      </p>
      <ErrorLine error={stats.error} />
      <Loading when={stats.isPending && !stats.error} />
      <div className="table-wrap">
        <table data-testid="overview-table">
          <caption className="sr-only">Jobs by state per queue</caption>
          <thead>
            <tr>
              <th scope="col">Queue</th>
              {COUNTS.map(([field, heading]) => (
                <th scope="col" className="num" key={field}>
                  {heading}
                </th>
              ))}
              <th scope="col" className="num">Workers</th>
              <th scope="col" className="num">Throughput/min</th>
              <th scope="col" className="num">Wait p95</th>
              <th scope="col" className="num">Run p95</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((row) => (
              <tr key={row.queue} data-testid={`queue-row-${row.queue}`}>
                <th scope="row" className="name">
                  <Link to={`/queues/${encodeURIComponent(row.queue)}`}>{row.queue}</Link>
                  {paused.has(row.queue) && (
                    <>
                      {' '}
                      <span className="badge badge-warn" data-testid="queue-paused-badge">
                        paused
                      </span>
                    </>
                  )}
                </th>
                {COUNTS.map(([field]) => (
                  <td className="num" key={field} data-testid={`count-${field}`}>
                    {count(row[field])}
                  </td>
                ))}
                <td className="num" data-testid="count-workers">
                  {row.connectedWorkers ?? 0}
                </td>
                <td className="num" data-testid="throughput">
                  {num((row.throughput?.last1m ?? 0) * 60)}
                </td>
                <td className="num">{ms(row.wait?.p95Ms)}</td>
                <td className="num">{ms(row.run?.p95Ms)}</td>
              </tr>
            ))}
            {stats.isSuccess && rows.length === 0 && (
              <tr>
                <td colSpan={COUNTS.length + 5}>No queues yet.</td>
              </tr>
            )}
          </tbody>
        </table>
      </div>
      <h2>Last hour</h2>
      <label className="inline">
        Queue{' '}
        <select value={chartQueue} onChange={(e) => setChartQueue(e.target.value)} data-testid="chart-queue">
          <option value="">all queues</option>
          {rows.map((row) => (
            <option key={row.queue} value={row.queue}>
              {row.queue}
            </option>
          ))}
        </select>
      </label>
      <Charts queue={chartQueue} />
    </section>
  );
}

function Charts({ queue }: { queue: string }) {
  const series = useQueueSeries(queue);
  const points = series.data?.points;
  const data = useMemo(() => toColumns(points ?? []), [points]);
  return (
    <>
      <ErrorLine error={series.error} testId="series-error" />
      <div className="charts">
        <Chart title="Throughput (jobs per minute)" series={THROUGHPUT} data={data.throughput} testId="chart-throughput" yLabel="jobs/min" />
        <Chart title="Wait and run latency" series={LATENCY} data={data.latency} testId="chart-latency" yLabel="ms" />
      </div>
    </>
  );
}

function toColumns(points: readonly SeriesPoint[]): { throughput: uPlot.AlignedData; latency: uPlot.AlignedData } {
  const x = points.map((p) => new Date(p.minute).getTime() / 1000);
  const n = (v: string | number | undefined) => (v === undefined ? 0 : Number(v));
  return {
    throughput: [x, points.map((p) => n(p.submitted)), points.map((p) => n(p.completed)), points.map((p) => n(p.failed)), points.map((p) => n(p.deadLettered))],
    latency: [x, points.map((p) => n(p.waitP50Ms)), points.map((p) => n(p.waitP95Ms)), points.map((p) => n(p.runP50Ms)), points.map((p) => n(p.runP95Ms))],
  };
}
