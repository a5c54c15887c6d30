/**
 * A hostile neighbour on the same machine (LMSP sections 2, 4, 16), running beside the crash
 * loop's workers: floods of event streams replaying long logs, parallel pairing attempts with
 * wrong codes, and malformed requests (deep JSON, oversized bodies, a broken Content-Length, a
 * rebound Host, a foreign Origin). Loopback only. Every answer must be a 4xx (a 5xx is a broken
 * invariant), and a prober measures how long /healthz takes meanwhile (p99 wanted < 250 ms).
 */
import { LmspClient } from '../../src/api/client.js';
import type { TaskObject } from '../../src/api/types.js';
import { api, type TestService } from '../../test/helpers/service.js';
import { rawRequest } from '../../test/helpers/raw-http.js';
import { sleep } from './processes.js';
import type { Random } from './random.js';
import type { Info, Violations } from './report.js';

/** What the neighbour learns across rounds: its own admin client and the /healthz latencies. */
export class Neighbour {
  private token: string | null = null;
  readonly healthMs: number[] = [];

  constructor(private readonly info: Info, private readonly violations: Violations) {}

  /** /healthz latency at this percentile over the whole run (ms), or null without samples. */
  percentile(p: number): number | null {
    if (this.healthMs.length === 0) return null;
    const sorted = [...this.healthMs].sort((a, b) => a - b);
    return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
  }

  /** Runs until `signal` aborts (the round's kill). */
  async round(service: TestService, random: Random, round: number, signal: AbortSignal): Promise<void> {
    try {
      this.token ??= await this.pair(service);
    } catch {
      this.info.bump('neighbour.pair_failed');
      return;
    }
    await Promise.allSettled([
      this.probeHealth(service, signal),
      this.floodStreams(service, random, signal),
      this.floodPairing(service, random, signal),
      this.sendMalformed(service, random, round, signal),
    ]);
  }

  private async pair(service: TestService): Promise<string> {
    const code = await service.client.createPairingCode({ name: 'neighbour', scopes: ['admin'] });
    return (await new LmspClient({ baseUrl: service.url }).pair(code.code, 'neighbour')).token;
  }

  private check(what: string, status: number, round: number): void {
    this.info.bump(`neighbour.${what}.${status}`);
    if (status >= 500) this.violations.add('server_errors', `neighbour ${what} #${round}.${this.info.values.get(`neighbour.${what}.${status}`)}`, `${status}`);
  }

  private async probeHealth(service: TestService, signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      const started = performance.now();
      try {
        const answer = await fetch(`${service.url}/healthz`, { signal: AbortSignal.any([signal, AbortSignal.timeout(10_000)]) });
        await answer.arrayBuffer();
        if (answer.status === 200 && !signal.aborted) this.healthMs.push(performance.now() - started);
      } catch {
        // the kill: the prober stops with the round
      }
      await sleep(50, signal);
    }
  }

  /** Streams replaying whole logs, as many as the limits allow and more, opened and dropped. */
  private async floodStreams(service: TestService, random: Random, signal: AbortSignal): Promise<void> {
    const token = this.token!;
    while (!signal.aborted) {
      let tasks: TaskObject[] = [];
      try {
        const answer = await api({ url: service.url, token }, '/v1/tasks?limit=50', { signal });
        if (answer.status === 200) tasks = ((await answer.json()) as { data: TaskObject[] }).data;
      } catch {
        return;
      }
      if (tasks.length === 0) {
        await sleep(100, signal);
        continue;
      }
      const count = random.int(8, 40);
      await Promise.allSettled(Array.from({ length: count }, async () => {
        const task = random.pick(tasks);
        const controller = new AbortController();
        const stop = () => controller.abort();
        signal.addEventListener('abort', stop, { once: true });
        try {
          const answer = await fetch(`${service.url}/v1/tasks/${task.id}/events?stream=true&starting_after=0`, {
            headers: { authorization: `Bearer ${token}` }, signal: controller.signal,
          });
          this.check('stream', answer.status, 0);
          if (answer.status !== 200) {
            await answer.arrayBuffer();
            return;
          }
          const reader = answer.body!.getReader();
          const until = Date.now() + random.int(50, 1500);
          while (Date.now() < until && !(await reader.read()).done);
          controller.abort();
        } catch {
          // dropped on purpose, or the kill
        } finally {
          signal.removeEventListener('abort', stop);
        }
      }));
    }
  }

  private async floodPairing(service: TestService, random: Random, signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      const answers = await Promise.allSettled(Array.from({ length: random.int(10, 60) }, () => fetch(`${service.url}/v1/pair`, {
        method: 'POST', headers: { 'content-type': 'application/json' }, signal,
        body: JSON.stringify({ code: 'ZZZZ-ZZZZ', client_name: 'guess' }),
      }).then(async (answer) => {
        await answer.arrayBuffer();
        return answer.status;
      })));
      for (const answer of answers) if (answer.status === 'fulfilled') this.check('pair', answer.value, 0);
      await sleep(random.int(50, 400), signal);
    }
  }

  private async sendMalformed(service: TestService, random: Random, round: number, signal: AbortSignal): Promise<void> {
    const host = new URL(service.url).host;
    const token = this.token!;
    const kinds = ['deep', 'huge', 'bad_length', 'bad_json', 'rebound_host', 'foreign_origin'] as const;
    while (!signal.aborted) {
      const kind = random.pick([...kinds]);
      try {
        let status: number;
        switch (kind) {
          case 'deep':
            status = (await fetch(`${service.url}/v1/responses`, { method: 'POST', signal,
              headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'idempotency-key': `deep-${random.int(0, 1e9)}` },
              body: `${'['.repeat(100_000)}${']'.repeat(100_000)}` })).status;
            break;
          case 'huge':
            status = (await fetch(`${service.url}/v1/responses`, { method: 'POST', signal,
              headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
              body: JSON.stringify({ model: 'lmsp-tiny', input: 'x'.repeat(2 * 1024 * 1024) }) })).status;
            break;
          case 'bad_json':
            status = (await fetch(`${service.url}/v1/responses`, { method: 'POST', signal,
              headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: '{"model": "lmsp-tiny", "input": ' })).status;
            break;
          case 'bad_length':
            status = (await rawRequest(service.url, `POST /v1/responses HTTP/1.1\r\nHost: ${host}\r\nContent-Length: x1\r\n\r\n{}`, 10_000)).status;
            break;
          case 'rebound_host':
            status = (await rawRequest(service.url, `GET /v1/clients/me HTTP/1.1\r\nHost: rebind.example\r\nAuthorization: Bearer ${token}\r\nConnection: close\r\n\r\n`, 10_000)).status;
            break;
          case 'foreign_origin':
            status = (await fetch(`${service.url}/v1/pair`, { method: 'POST', signal,
              headers: { 'content-type': 'application/json', origin: 'http://evil.example' }, body: '{"code":"AAAA-AAAA","client_name":"x"}' })).status;
            break;
        }
        // A connection the kill cut answers nothing (status 0): only real answers count.
        if (status > 0) this.check(kind, status, round);
      } catch {
        // the kill
      }
      await sleep(random.int(20, 200), signal);
    }
  }
}
