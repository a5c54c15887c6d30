/**
 * `lmsp top`: a live terminal view of the service (LMSP 15), from the sources the dashboard reads:
 * figures from GET /metrics (tokens per second between two scrapes, queue, streams, models) and
 * the unfinished and latest tasks from GET /v1/tasks. Redrawn every --interval on a terminal;
 * `--once` (or output that is not a terminal) prints one frame, `--json` one JSON document.
 */
import type { Command } from 'commander';
import type { LmspClient } from '../../api/client.js';
import { figuresOf, tokensPerSecond, type Figures } from '../../api/metrics-figures.js';
import type { ServiceObject, TaskObject } from '../../api/types.js';
import { parseDuration, sleep } from '../../time.js';
import { action, CliError, EXIT_USAGE, isConnectionFailure, operatorClient, printJson, serviceClient, table, withCommonOptions, type CommonOptions } from '../context.js';

const UNFINISHED = ['queued', 'loading', 'running', 'cancelling'];

export interface TopFrame {
  service: ServiceObject;
  url: string;
  figures: Figures;
  tokens_per_second: number | null;
  unfinished: TaskObject[];
  latest: TaskObject[];
}

/** `--json`: the frame with the API's snake_case names, as every other JSON output of the CLI. */
export function jsonFrame(view: TopFrame): Record<string, unknown> {
  const { figures } = view;
  return {
    service: view.service,
    url: view.url,
    tokens_per_second: view.tokens_per_second,
    figures: {
      at: figures.at, tokens_total: figures.tokensTotal, tasks: figures.tasks, finished: figures.finished,
      open_streams: figures.openStreams, models_loaded: figures.modelsLoaded, requests_total: figures.requestsTotal,
      resident_bytes: figures.residentBytes, started_at: figures.startedAt,
      queue_wait_median_seconds: figures.queueWaitMedian, first_token_median_seconds: figures.firstTokenMedian,
    },
    unfinished: view.unfinished,
    latest: view.latest,
  };
}

async function scrapeFigures(client: LmspClient): Promise<Figures> {
  return figuresOf(await client.metricsText(), Date.now() / 1000);
}

async function frame(client: LmspClient, service: ServiceObject, previous: Figures | null): Promise<TopFrame> {
  const [figures, unfinished, latest] = await Promise.all([
    scrapeFigures(client),
    client.listTasks({ status: UNFINISHED, limit: 20, order: 'asc' }),
    client.listTasks({ limit: 8 }),
  ]);
  return {
    service,
    url: client.baseUrl,
    figures,
    tokens_per_second: previous ? tokensPerSecond(previous, figures) : null,
    unfinished: unfinished.data,
    latest: latest.data.filter((task) => !UNFINISHED.includes(task.status)).slice(0, 5),
  };
}

function seconds(value: number): string {
  if (value < 60) return `${value.toFixed(value < 10 ? 1 : 0)} s`;
  if (value < 3600) return `${Math.floor(value / 60)} min`;
  return `${Math.floor(value / 3600)} h ${Math.floor((value % 3600) / 60)} min`;
}

function taskRows(tasks: TaskObject[], now: number) {
  return tasks.map((task) => ({
    task: task.id,
    kind: task.kind,
    status: task.status,
    model: task.model,
    events: task.last_sequence_number,
    time: task.started_at === null ? `waiting ${seconds(now - task.created_at)}` : seconds((task.finished_at ?? now) - task.started_at),
    client: task.client_id,
  }));
}

/** One screen of text. */
export function renderFrame(view: TopFrame, width = 120): string {
  const { figures } = view;
  const now = Date.now() / 1000;
  const running = (figures.tasks.loading ?? 0) + (figures.tasks.running ?? 0) + (figures.tasks.cancelling ?? 0);
  const up = figures.startedAt ? seconds(now - figures.startedAt) : '-';
  const columns = ['task', 'kind', 'status', 'model', 'events', 'time', 'client'];
  const lines = [
    `lmsp ${view.service.software.version}  ${view.service.name}  ${view.url}  up ${up}  ${new Date().toLocaleTimeString()}`,
    [
      `tokens/s ${view.tokens_per_second === null ? '-' : view.tokens_per_second.toFixed(1)}`,
      `queued ${figures.tasks.queued ?? 0}`,
      `running ${running}`,
      `streams ${figures.openStreams}`,
      `models loaded ${figures.modelsLoaded}`,
      `finished ${figures.finished.completed ?? 0} completed, ${figures.finished.failed ?? 0} failed, ${figures.finished.cancelled ?? 0} cancelled`,
    ].join('   '),
    '',
    view.unfinished.length > 0 ? table(taskRows(view.unfinished, now), columns) : 'no unfinished tasks',
    '',
    'latest finished',
    view.latest.length > 0 ? table(taskRows(view.latest, now), columns) : 'none',
  ];
  return lines.map((line) => line.split('\n').map((part) => part.slice(0, width)).join('\n')).join('\n');
}

export function registerTop(program: Command): void {
  withCommonOptions(program.command('top')
    .description('a live view of the running service: throughput, queue and tasks (q or Ctrl-C quits)')
    .option('--interval <duration>', 'time between two frames', '1s')
    .option('--once', 'print one frame and exit'))
    .action(action(async (options: CommonOptions & { interval: string; once?: boolean }) => {
      const intervalMs = parseDuration(options.interval);
      if (intervalMs === null || intervalMs < 100) throw new CliError(`--interval: expected a duration of at least 100ms, got '${options.interval}'`, EXIT_USAGE);
      const client = await operatorClient(options);
      const service = await client.service();
      const live = !options.once && !options.json && process.stdout.isTTY === true;
      if (!live) {
        // Two scrapes an interval apart give a rate.
        const first = await scrapeFigures(client);
        await sleep(intervalMs);
        const view = await frame(client, service, first);
        if (options.json) return printJson(jsonFrame(view));
        process.stdout.write(`${renderFrame(view, Number.MAX_SAFE_INTEGER)}\n`);
        return;
      }
      await runLive(client, service, intervalMs, () => serviceClient(options));
    }));
}

const DEFAULT_COLUMNS = 120;

/** Redraws on the terminal's alternate screen until q or Ctrl-C. */
async function runLive(first: LmspClient, firstService: ServiceObject, intervalMs: number, find: () => Promise<LmspClient | null>): Promise<void> {
  let client = first;
  let service = firstService;
  const out = process.stdout;
  let stopped = false;
  const stop = () => {
    stopped = true;
  };
  out.write('\x1b[?1049h\x1b[?25l');
  const restore = () => out.write('\x1b[?25h\x1b[?1049l');
  process.on('exit', restore);
  if (process.stdin.isTTY) {
    process.stdin.setRawMode(true);
    process.stdin.resume();
    process.stdin.on('data', (key: Buffer) => {
      if (key[0] === 0x71 || key[0] === 0x03) stop(); // q, Ctrl-C
    });
  }
  process.on('SIGINT', stop);
  let previous: Figures | null = null;
  while (!stopped) {
    try {
      const view = await frame(client, service, previous);
      previous = view.figures;
      // A terminal that reports no size (0 columns: a pty nobody sized) gets the usual width.
      out.write(`\x1b[H\x1b[2J${renderFrame(view, out.columns || DEFAULT_COLUMNS)}\n\nq quits`);
    } catch (error) {
      let why = `cannot read the service: ${(error as Error).message}`;
      if (isConnectionFailure(error)) {
        // The service stopped or restarts: said so, and read again until it answers, where it
        // answers now (a restart may have taken another port).
        why = `the service at ${client.baseUrl} is not answering; trying again every ${intervalMs / 1000} s`;
        const found = await find().catch(() => null);
        // Another start: its name, version and start time are read again.
        const now = found && (await found.service().catch(() => null));
        if (found && now) [client, service] = [found, now];
      }
      out.write(`\x1b[H\x1b[2J${why}\n\nq quits`);
    }
    for (let waited = 0; waited < intervalMs && !stopped; waited += 50) await sleep(50);
  }
  restore();
  process.off('exit', restore);
  process.exit(0);
}
