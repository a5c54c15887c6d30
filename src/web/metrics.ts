/**
 * A few figures from `GET /metrics` (LMSP 15) for the overview: the page scrapes the Prometheus
 * text every few seconds while a session with the `metrics` or `admin` scope is open, parses it
 * with a real parser, and keeps the last minutes of tokens per second and queue depth in memory.
 */
import parsePrometheusTextFormat, { type ParsedFamily } from 'parse-prometheus-text-format';
import { authorization, checked, type Session } from './session.js';

export const SAMPLE_INTERVAL_MS = 2000;
/** How much history the chart keeps: ten minutes of samples. */
const HISTORY_SECONDS = 600;

export interface Figures {
  /** When this scrape was taken (epoch seconds). */
  at: number;
  tokensTotal: number;
  tasks: Record<string, number>;
  finished: Record<string, number>;
  openStreams: number;
  modelsLoaded: number;
  requestsTotal: number;
  residentBytes: number | null;
  startedAt: number | null;
  /** Median estimates from the histograms since the service started; null without observations. */
  queueWaitMedian: number | null;
  firstTokenMedian: number | null;
}

export interface Sample {
  at: number;
  tokensPerSecond: number;
  queued: number;
}

function sum(family: ParsedFamily | undefined, filter: (labels: Record<string, string>) => boolean = () => true): number {
  return (family?.metrics ?? []).filter((sample) => filter(sample.labels ?? {})).reduce((total, sample) => total + Number(sample.value ?? 0), 0);
}

function byLabel(family: ParsedFamily | undefined, label: string): Record<string, number> {
  const result: Record<string, number> = {};
  for (const sample of family?.metrics ?? []) {
    const key = sample.labels?.[label];
    if (key !== undefined) result[key] = (result[key] ?? 0) + Number(sample.value ?? 0);
  }
  return result;
}

/** The median of a histogram, interpolated inside its bucket, as Prometheus' histogram_quantile does. */
export function histogramMedian(family: ParsedFamily | undefined): number | null {
  const sample = family?.metrics[0];
  if (!sample?.buckets || Number(sample.count ?? 0) === 0) return null;
  const buckets = Object.entries(sample.buckets).map(([le, count]) => [le === '+Inf' ? Infinity : Number(le), Number(count)] as const)
    .sort((a, b) => a[0] - b[0]);
  const rank = Number(sample.count) / 2;
  let previousBound = 0;
  let previousCount = 0;
  for (const [bound, count] of buckets) {
    if (count >= rank) {
      if (bound === Infinity) return previousBound;
      return previousBound + (bound - previousBound) * ((rank - previousCount) / Math.max(1, count - previousCount));
    }
    previousBound = bound;
    previousCount = count;
  }
  return null;
}

export function figuresOf(text: string, at: number): Figures {
  const families = new Map(parsePrometheusTextFormat(text).map((family) => [family.name, family]));
  const resident = families.get('process_resident_memory_bytes');
  const started = families.get('process_start_time_seconds');
  return {
    at,
    tokensTotal: sum(families.get('lmsp_generated_tokens_total')),
    tasks: byLabel(families.get('lmsp_tasks'), 'status'),
    finished: byLabel(families.get('lmsp_tasks_finished_total'), 'status'),
    openStreams: sum(families.get('lmsp_open_streams')),
    modelsLoaded: sum(families.get('lmsp_models_loaded')),
    requestsTotal: sum(families.get('lmsp_http_requests_total')),
    residentBytes: resident ? sum(resident) : null,
    startedAt: started ? sum(started) : null,
    queueWaitMedian: histogramMedian(families.get('lmsp_queue_wait_seconds')),
    firstTokenMedian: histogramMedian(families.get('lmsp_time_to_first_token_seconds')),
  };
}

export interface MetricsState {
  figures: Figures | null;
  samples: Sample[];
  error: string | null;
}

type Listener = (state: MetricsState) => void;

/** Scrapes on a timer while anyone listens; one sampler for the whole page. */
export class MetricsSampler {
  private state: MetricsState = { figures: null, samples: [], error: null };
  private readonly listeners = new Set<Listener>();
  private timer: ReturnType<typeof setTimeout> | null = null;
  private stopped = false;

  constructor(private readonly session: Session) {}

  get current(): MetricsState {
    return this.state;
  }

  subscribe(listener: Listener): () => void {
    this.listeners.add(listener);
    listener(this.state);
    return () => this.listeners.delete(listener);
  }

  start(): void {
    void this.scrape();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
  }

  private publish(state: MetricsState): void {
    this.state = state;
    for (const listener of this.listeners) listener(state);
  }

  private async scrape(): Promise<void> {
    if (this.stopped) return;
    try {
      const response = await checked(this.session, await fetch('metrics', {
        headers: authorization(this.session), cache: 'no-store', credentials: 'omit',
      }));
      const figures = figuresOf(await response.text(), Date.now() / 1000);
      const previous = this.state.figures;
      const samples = this.state.samples.filter((sample) => sample.at > figures.at - HISTORY_SECONDS);
      if (previous) {
        const elapsed = figures.at - previous.at;
        // A restarted service starts its counters again from zero: no negative rate.
        const tokens = Math.max(0, figures.tokensTotal - previous.tokensTotal);
        samples.push({ at: figures.at, tokensPerSecond: elapsed > 0 ? tokens / elapsed : 0, queued: figures.tasks.queued ?? 0 });
      }
      this.publish({ figures, samples, error: null });
    } catch (error) {
      this.publish({ ...this.state, error: (error as Error).message });
    }
    if (!this.stopped) this.timer = setTimeout(() => void this.scrape(), SAMPLE_INTERVAL_MS);
  }
}
