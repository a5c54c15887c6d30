/**
 * Tokens per second and queue depth over the history the dashboard keeps (the time axis spans
 * the samples kept, at least a minute of them), drawn by uPlot (small, fast, no
 * dependencies, canvas). The canvas is hidden from assistive technology: the caption says the same
 * figures in words.
 */
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import { HISTORY_SECONDS, type Sample } from './metrics.js';

const HEIGHT = 220;

function dataOf(samples: Sample[]): uPlot.AlignedData {
  return [samples.map((sample) => sample.at), samples.map((sample) => sample.tokensPerSecond), samples.map((sample) => sample.queued)];
}

/** The shortest span the time axis shows, so that the first samples are not one pixel wide. */
const MIN_SPAN_SECONDS = 60;

function valid(at: number | null): at is number {
  return at !== null && Number.isFinite(at) && at > 0;
}

/**
 * The time axis spans the samples kept, from the oldest to the newest (at least a minute, at most
 * the history), so it covers what the caption says; before the first sample it ends now (not at 1970).
 */
function timeRange(oldest: number | null, newest: number | null): [number, number] {
  const end = valid(newest) ? newest : Date.now() / 1000;
  const start = valid(oldest) ? Math.min(oldest, end - MIN_SPAN_SECONDS) : end - MIN_SPAN_SECONDS;
  return [Math.max(start, end - HISTORY_SECONDS), end];
}

/** Times of day on the axis, without a date: the chart never spans more than its history. */
function timeLabels(_u: uPlot, splits: number[]): string[] {
  return splits.map((at) => new Date(at * 1000).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit' }));
}

export function ThroughputChart({ samples }: { samples: Sample[] }) {
  const host = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);

  useEffect(() => {
    const element = host.current!;
    const style = getComputedStyle(document.documentElement);
    const ink = style.getPropertyValue('--muted').trim() || '#555';
    const grid = style.getPropertyValue('--line').trim() || '#ddd';
    const axis = { stroke: ink, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } };
    plot.current = new uPlot({
      width: Math.max(280, element.clientWidth),
      height: HEIGHT,
      legend: { show: true },
      cursor: { drag: { x: false, y: false } },
      // From the samples themselves: for a single one uPlot would offer a day's span.
      scales: { x: { time: true, range: (u) => timeRange(u.data[0][0] ?? null, u.data[0].at(-1) ?? null) }, tokens: { range: (_u, _min, max) => [0, Math.max(10, max * 1.1)] }, queue: { range: (_u, _min, max) => [0, Math.max(4, max + 1)] } },
      axes: [
        { ...axis, values: timeLabels, space: 110 },
        { ...axis, scale: 'tokens', label: 'tokens/s', size: 60 },
        { ...axis, scale: 'queue', side: 1, label: 'queued', size: 50, grid: { show: false } },
      ],
      series: [
        {},
        { label: 'Tokens per second', scale: 'tokens', stroke: style.getPropertyValue('--accent').trim() || '#1f4f8f', width: 2, value: (_u, v) => (v === null ? '-' : v.toFixed(1)) },
        { label: 'Queued tasks', scale: 'queue', stroke: style.getPropertyValue('--warn').trim() || '#8a5a00', width: 2, dash: [6, 4], value: (_u, v) => (v === null ? '-' : String(v)) },
      ],
    }, dataOf(samples), element);
    const resize = new ResizeObserver(() => plot.current?.setSize({ width: Math.max(280, element.clientWidth), height: HEIGHT }));
    resize.observe(element);
    return () => {
      resize.disconnect();
      plot.current?.destroy();
      plot.current = null;
    };
  }, []);

  useEffect(() => {
    plot.current?.setData(dataOf(samples));
  }, [samples]);

  return <div ref={host} class="chart" aria-hidden="true" />;
}
