/**
 * Pulls through the real service (LMSP 5.1), for bench/pull.ts: the time from `POST
 * /v1/models/pull` to `model.pull.completed` (download, hash, validation, fsync, rename and
 * registration), and what a restart saves: the service is killed with SIGKILL once half of the
 * file is on disk and started again, and the file server's own log says how many bytes the
 * resumed pull fetched.
 */
import type { ChildProcess } from 'node:child_process';
import { existsSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { TaskEvent, TaskObject } from '../src/api/types.js';
import type { LoggedRequest } from '../test/helpers/model-server.js';
import { api, waitFor } from '../test/helpers/service.js';
import { readSse } from '../test/helpers/sse.js';
import { startService, type TestService } from './lib.js';

/** The request log of bench/pull-server.ts, which prints it on SIGUSR2. */
export class ServerLog {
  private readonly lines: string[] = [];
  private buffer = '';

  constructor(private readonly server: ChildProcess) {
    server.stdout!.on('data', (chunk: Buffer) => {
      this.buffer += chunk.toString();
      let newline: number;
      while ((newline = this.buffer.indexOf('\n')) >= 0) {
        this.lines.push(this.buffer.slice(0, newline));
        this.buffer = this.buffer.slice(newline + 1);
      }
    });
  }

  async requests(): Promise<LoggedRequest[]> {
    const seen = this.lines.length;
    this.server.kill('SIGUSR2');
    const line = await waitFor(() => this.lines.slice(seen).find((entry) => entry.startsWith('{"requests"')), { timeoutMs: 10_000, what: 'the request log' });
    return (JSON.parse(line) as { requests: LoggedRequest[] }).requests;
  }
}

async function startPull(service: TestService, url: string, id: string): Promise<TaskObject> {
  const answer = await api(service, '/v1/models/pull', { method: 'POST', json: { source: url, id } });
  if (answer.status !== 202) throw new Error(`POST /v1/models/pull answered ${answer.status}: ${await answer.text()}`);
  return (await answer.json()) as TaskObject;
}

/** Follows the task's event stream to its terminal event; throws unless the pull completed. */
async function followToEnd(service: TestService, taskId: string): Promise<TaskEvent[]> {
  const response = await api(service, `/v1/tasks/${taskId}/events?stream=true`);
  const events: TaskEvent[] = [];
  for await (const frame of readSse(response)) events.push(JSON.parse(frame.data) as TaskEvent);
  const last = events.at(-1);
  if (last?.type !== 'model.pull.completed') throw new Error(`the pull ended with ${last?.type}: ${JSON.stringify(last)}`);
  return events;
}

/** Forgets a pulled model and removes its file, so the next run pulls it again and the disk stays free. */
async function dropModel(service: TestService, id: string): Promise<void> {
  await api(service, `/v1/models/${id}`, { method: 'DELETE' });
  rmSync(join(service.dataDir, 'models', `${id}.gguf`), { force: true });
}

export class ServicePulls {
  private runs = 0;

  private constructor(private service: TestService, private readonly url: string) {}

  static async start(dataDir: string, url: string): Promise<ServicePulls> {
    const service = await startService({ dataDir, env: { LMSP_HF_ENDPOINT: new URL(url).origin, LMSP_LOG_LEVEL: 'warn' } });
    return new ServicePulls(service, url);
  }

  /** One pull through the service, from the POST to its terminal event; ms. */
  async timeOne(): Promise<number> {
    const id = `bench-${(this.runs += 1)}`;
    const started = performance.now();
    const task = await startPull(this.service, this.url, id);
    await followToEnd(this.service, task.id);
    const wall = performance.now() - started;
    await dropModel(this.service, id);
    return wall;
  }

  /**
   * Kills the service once half of the file is on disk, starts it again and waits for the pull to
   * complete; answers the bytes on disk at the kill and the bytes the resumed request fetched.
   */
  async killAtHalf(size: number, log: ServerLog): Promise<{ onDisk: number; fetchedAfter: number; requests: number; range: string | null }> {
    const id = 'bench-killed';
    const before = (await log.requests()).length;
    const task = await startPull(this.service, this.url, id);
    const partial = join(this.service.dataDir, 'models', `${id}.gguf.partial`);
    await waitFor(() => existsSync(partial) && statSync(partial).size >= size / 2, { timeoutMs: 600_000, intervalMs: 5, what: 'half of the file on disk' });
    await this.service.kill();
    const onDisk = statSync(partial).size;
    this.service = await this.service.restart();
    await followToEnd(this.service, task.id);
    const after = (await log.requests()).slice(before);
    const resumed = after.at(-1)!;
    await dropModel(this.service, id);
    return { onDisk, fetchedAfter: resumed.bodyBytesSent, requests: after.length, range: resumed.range };
  }

  stop(): Promise<void> {
    return this.service.kill();
  }
}
