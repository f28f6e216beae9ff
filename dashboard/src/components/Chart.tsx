/**
 * A time-series line chart (uPlot: small, canvas, fast with live updates). The plot is
 * built once per theme and fed new data in place; its colours come from the CSS variables
 * so it follows light and dark. The numbers it draws are also shown as text elsewhere. Its
 * time axis is in the browser's zone, named in the caption as every time of the dashboard is.
 */
import { useEffect, useRef } from 'react';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { time, zoneName } from '../format';
import { cssVar, useTheme } from './theme';

export interface ChartSeries {
  label: string;
  /** A CSS variable holding the line colour, e.g. "--series-1". */
  color: string;
  /** Formats a value for the legend. */
  format?: (value: number) => string;
}

export function Chart(props: {
  title: string;
  series: readonly ChartSeries[];
  /** [x seconds since epoch, ...one array per series]. */
  data: uPlot.AlignedData;
  testId: string;
  yLabel: string;
}) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const theme = useTheme();
  const { series, yLabel } = props;

  useEffect(() => {
    const element = box.current;
    if (!element) return;
    const text = cssVar('--text');
    const grid = cssVar('--border');
    const axis = { stroke: text, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } };
    const options: uPlot.Options = {
      width: Math.max(element.clientWidth, 280),
      height: 220,
      scales: { x: { time: true } },
      axes: [axis, { ...axis, label: yLabel, size: 60 }],
      series: [
        // The legend's time (where the pointer is): the exact minute, its zone named.
        { value: (_u: uPlot, v: number | null) => (v == null ? '—' : time(new Date(v * 1000).toISOString())) },
        ...series.map((s) => ({
          label: s.label,
          stroke: cssVar(s.color),
          width: 2,
          value: (_u: uPlot, v: number | null) => (v == null ? '—' : s.format ? s.format(v) : String(v)),
        })),
      ],
      legend: { live: true },
    };
    const created = new uPlot(options, [[], ...series.map(() => [])], element);
    plot.current = created;
    const observer = new ResizeObserver(() => created.setSize({ width: Math.max(element.clientWidth, 280), height: 220 }));
    observer.observe(element);
    return () => {
      observer.disconnect();
      created.destroy();
      plot.current = null;
    };
  }, [theme, series, yLabel]);

  useEffect(() => {
    plot.current?.setData(props.data);
  }, [props.data, theme]);

  return (
    <figure className="chart" data-testid={props.testId}>
      {/* The axis shows the browser's local times without a zone: the caption names it. */}
      <figcaption>
        {props.title} <span className="muted">(times in {zoneName()})</span>
      </figcaption>
      <div ref={box} role="img" aria-label={`${props.title} chart; the numbers are in the table`} />
    </figure>
  );
}
