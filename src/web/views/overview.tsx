/** The service at a glance (LMSP 3 and 15): identity, this session, and live figures from /metrics. */
import { useEffect, useState } from 'preact/hooks';
import { ThroughputChart } from '../chart.js';
import { formatBytes, formatDuration, formatNumber } from '../format.js';
import type { MetricsSampler, MetricsState } from '../metrics.js';
import { request } from '../session.js';
import { Code, ErrorNotice, Notice, PageHeading, useApp, usePoll } from '../ui.js';
import type { Service } from '../wire.js';

function useMetrics(sampler: MetricsSampler | null): MetricsState | null {
  const [state, setState] = useState<MetricsState | null>(sampler?.current ?? null);
  useEffect(() => (sampler ? sampler.subscribe(setState) : undefined), [sampler]);
  return state;
}

function Figure({ label, value, testId }: { label: string; value: string; testId?: string }) {
  return (
    <div class="figure">
      <dt>{label}</dt>
      <dd data-testid={testId}>{value}</dd>
    </div>
  );
}

function Figures({ state }: { state: MetricsState }) {
  const { figures, samples } = state;
  if (!figures) return state.error ? <Notice kind="error">{state.error}</Notice> : <p class="empty">Reading /metrics…</p>;
  const latest = samples.at(-1);
  const running = (figures.tasks.loading ?? 0) + (figures.tasks.running ?? 0) + (figures.tasks.cancelling ?? 0);
  // The span the chart draws, as it is: "over the last 6.0 s", not a minute it does not cover.
  const span = samples.length > 1 ? samples.at(-1)!.at - samples[0]!.at : 0;
  return (
    <>
      {state.error && <Notice kind="error">{state.error}</Notice>}
      <dl class="figures">
        <Figure label="Tokens per second" value={latest ? formatNumber(latest.tokensPerSecond, 1) : '-'} testId="tokens-per-second" />
        <Figure label="Queued tasks" value={formatNumber(figures.tasks.queued ?? 0)} testId="queued" />
        <Figure label="Running tasks" value={formatNumber(running)} />
        <Figure label="Open streams" value={formatNumber(figures.openStreams)} />
        <Figure label="Models loaded" value={formatNumber(figures.modelsLoaded)} />
        <Figure label="Tokens generated" value={formatNumber(figures.tokensTotal)} testId="tokens-total" />
        <Figure label="Finished since start" value={`${formatNumber(figures.finished.completed ?? 0)} completed, ${formatNumber(figures.finished.failed ?? 0)} failed, ${formatNumber(figures.finished.cancelled ?? 0)} cancelled`} />
        <Figure label="Median queue wait" value={formatDuration(figures.queueWaitMedian)} />
        <Figure label="Median time to first token" value={formatDuration(figures.firstTokenMedian)} />
        <Figure label="Memory (resident)" value={formatBytes(figures.residentBytes)} />
        <Figure label="Up for" value={figures.startedAt ? formatDuration(figures.at - figures.startedAt) : '-'} />
      </dl>
      <figure class="panel chart-panel">
        <ThroughputChart samples={samples} />
        <figcaption>
          Tokens per second (solid) and queued tasks (dashed), sampled every 2 s since this page opened
          {span > 0 ? `, over the last ${formatDuration(span)}` : ''}. Now: {latest ? formatNumber(latest.tokensPerSecond, 1) : '-'} tokens per second, {formatNumber(figures.tasks.queued ?? 0)} queued.
        </figcaption>
      </figure>
    </>
  );
}

export function OverviewView({ sampler }: { sampler: MetricsSampler | null }) {
  const { session } = useApp();
  const service = usePoll(() => request<Service>(null, 'GET', 'v1/service'), null, []);
  const metrics = useMetrics(sampler);
  const capabilities = service.data ? Object.entries(service.data.capabilities).filter(([, on]) => on).map(([name]) => name) : [];
  return (
    <>
      <PageHeading>Overview</PageHeading>
      <ErrorNotice error={service.error} />
      <div class="columns">
        <section class="panel" aria-labelledby="service-heading">
          <h2 id="service-heading">Service</h2>
          {service.data && (
            <dl class="facts">
              <div><dt>Name</dt><dd>{service.data.name}</dd></div>
              <div><dt>Service id</dt><dd><Code>{service.data.id}</Code></dd></div>
              <div><dt>Software</dt><dd>{service.data.software.name} {service.data.software.version}</dd></div>
              <div><dt>Protocol</dt><dd>{service.data.protocol.toUpperCase()} {service.data.protocol_version}</dd></div>
              <div><dt>Capabilities</dt><dd>{capabilities.join(', ') || '-'}</dd></div>
            </dl>
          )}
        </section>
        <section class="panel" aria-labelledby="session-heading">
          <h2 id="session-heading">This session</h2>
          <dl class="facts">
            <div><dt>Client</dt><dd>{session.client.name}</dd></div>
            <div><dt>Client id</dt><dd><Code>{session.client.id}</Code></dd></div>
            <div><dt>Scopes</dt><dd>{session.client.scopes.join(', ')}</dd></div>
          </dl>
        </section>
      </div>
      <section aria-labelledby="figures-heading">
        <h2 id="figures-heading">Figures</h2>
        {metrics ? <Figures state={metrics} /> : <Notice>Live figures need a token with the <code>metrics</code> or <code>admin</code> scope.</Notice>}
      </section>
    </>
  );
}
