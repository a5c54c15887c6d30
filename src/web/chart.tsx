/**
 * Tokens per second and queue depth over the history the dashboard keeps (the time axis always
 * spans all of it, even with one sample), drawn by uPlot (small, fast, no
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

/** The time axis ends at the newest sample, or now before the first one (not at 1970). */
function timeRange(newest: number | null): [number, number] {
  const end = newest !== null && Number.isFinite(newest) && newest > 0 ? newest : Date.now() / 1000;
  return [end - HISTORY_SECONDS, end];
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
      scales: { x: { time: true, range: (_u, _min, max) => timeRange(max) }, tokens: { range: (_u, _min, max) => [0, Math.max(10, max * 1.1)] }, queue: { range: (_u, _min, max) => [0, Math.max(4, max + 1)] } },
      axes: [
        { ...axis },
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
