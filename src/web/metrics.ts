/**
 * A few figures from `GET /metrics` (LMSP 15) for the overview: the page scrapes the Prometheus
 * text every few seconds while a session with the `metrics` or `admin` scope is open, parses it
 * with a real parser, and keeps the last minutes of tokens per second and queue depth in memory.
 */
import { figuresOf, tokensPerSecond, type Figures, type Sample } from '../api/metrics-figures.js';
import { authorization, checked, fetchService, type Session } from './session.js';

export type { Figures, Sample };

export const SAMPLE_INTERVAL_MS = 2000;
/** How much history the chart keeps and spans: ten minutes of samples. */
export const HISTORY_SECONDS = 600;

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
      const response = await checked(this.session, await fetchService('metrics', {
        headers: authorization(this.session), cache: 'no-store', credentials: 'omit',
      }));
      const figures = figuresOf(await response.text(), Date.now() / 1000);
      const previous = this.state.figures;
      const samples = this.state.samples.filter((sample) => sample.at > figures.at - HISTORY_SECONDS);
      if (previous) samples.push({ at: figures.at, tokensPerSecond: tokensPerSecond(previous, figures), queued: figures.tasks.queued ?? 0 });
      this.publish({ figures, samples, error: null });
    } catch (error) {
      this.publish({ ...this.state, error: (error as Error).message });
    }
    if (!this.stopped) this.timer = setTimeout(() => void this.scrape(), SAMPLE_INTERVAL_MS);
  }
}
