/**
 * A few figures read from the Prometheus text of `GET /metrics` (LMSP 15), for people: the
 * dashboard's overview and `lmsp top` show the same ones, parsed by a real parser.
 */
import parsePrometheusTextFormat, { type ParsedFamily } from 'parse-prometheus-text-format';

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

/** Tokens generated per second between two scrapes; a restarted service starts its counters again
 * from zero, which never reads as a negative rate. */
export function tokensPerSecond(previous: Figures, current: Figures): number {
  const elapsed = current.at - previous.at;
  return elapsed > 0 ? Math.max(0, current.tokensTotal - previous.tokensTotal) / elapsed : 0;
}
