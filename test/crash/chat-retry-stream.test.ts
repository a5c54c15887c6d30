/**
 * A streamed chat completion under `on_restart: retry` (LMSP 7.5, 13): a Chat Completions
 * client has no event that tells it to drop text, so the chunks a stream sends must add up to
 * the completion. A stream that has sent chunks of an attempt that a retry drops (its runner was
 * killed) ends with the `task_restarted` error frame instead of going on into a second text; a
 * stream or replay that starts after the retry sends the new attempt's chunks alone.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { ChatCompletionChunk, ChatCompletionObject } from '../../src/api/chat-completions.js';
import type { TaskObject } from '../../src/api/types.js';
import { api, childPids, waitFor, withService, type TestService } from '../helpers/service.js';
import { collectSse, readSse, type SseFrame } from '../helpers/sse.js';

const BODY = {
  model: 'lmsp-tiny',
  messages: [{ role: 'user', content: 'Tell me a long story about a lighthouse.' }],
  max_completion_tokens: 80,
  seed: 77,
  stream: true,
  store: true,
  on_restart: 'retry',
};

function post(service: TestService, key: string, body: object = BODY): Promise<Response> {
  return api(service, '/v1/chat/completions', { method: 'POST', json: body, headers: { 'idempotency-key': key } });
}

async function task(service: TestService, taskId: string): Promise<TaskObject> {
  return (await (await api(service, `/v1/tasks/${taskId}`)).json()) as TaskObject;
}

async function completed(service: TestService, taskId: string): Promise<TaskObject> {
  return waitFor(async () => {
    const current = await task(service, taskId);
    return current.status === 'completed' ? current : null;
  }, { timeoutMs: 90_000, what: 'the retried task to complete' });
}

/** What a client builds from a stream's chunks: its role chunks and its content. */
function built(frames: readonly SseFrame[]): { roles: number; content: string; done: boolean } {
  const chunks = frames.filter((frame) => frame.data !== '[DONE]').map((frame) => JSON.parse(frame.data) as Partial<ChatCompletionChunk>)
    .filter((chunk): chunk is ChatCompletionChunk => Array.isArray(chunk.choices));
  return {
    roles: chunks.filter((chunk) => chunk.choices[0]?.delta.role !== undefined).length,
    content: chunks.map((chunk) => chunk.choices[0]?.delta.content ?? '').join(''),
    done: frames.at(-1)?.data === '[DONE]',
  };
}

async function storedContent(service: TestService, completionId: string): Promise<string> {
  return ((await (await api(service, `/v1/chat/completions/${completionId}`)).json()) as ChatCompletionObject).choices[0]!.message.content!;
}

describe('a streamed chat completion whose attempt a retry drops (LMSP 7.5, 13)', () => {
  test('a live stream ends with task_restarted; once finished, its key replays the new attempt alone', { timeout: 180_000 }, () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '30' } }, async (service) => {
      const response = await post(service, 'retried-live');
      assert.equal(response.status, 200);
      const taskId = response.headers.get('lmsp-task-id')!;
      const frames: SseFrame[] = [];
      let killed = false;
      for await (const frame of readSse(response)) {
        frames.push(frame);
        const content = built(frames).content;
        if (!killed && content.length >= 10) {
          killed = true;
          for (const pid of childPids(service.pid)) process.kill(pid, 'SIGKILL');
        }
      }
      assert.ok(killed, 'the runner was killed under the stream');
      const last = JSON.parse(frames.at(-1)!.data) as { error?: { code: string; type: string } };
      assert.equal(last.error?.code, 'task_restarted', 'the stream ends with the error frame');
      assert.equal(last.error?.type, 'server_error');
      assert.equal(built(frames.slice(0, -1)).roles, 1, 'no second message began in this stream');

      const finished = await completed(service, taskId);
      assert.equal(finished.attempt, 2, 'the task went on under retry');
      const completionId = (JSON.parse(frames[0]!.data) as ChatCompletionChunk).id;
      const replay = await post(service, 'retried-live');
      assert.equal(replay.headers.get('idempotent-replayed'), 'true');
      const replayed = built(await collectSse(replay));
      assert.equal(replayed.roles, 1, 'one message, the new attempt\'s');
      assert.ok(replayed.done);
      assert.equal(replayed.content, await storedContent(service, completionId), 'the replayed chunks add up to the completion');
    }));

  test('after a SIGKILL of the service, the same key replays the new attempt alone', { timeout: 180_000 }, () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '30' } }, async (first) => {
      const response = await post(first, 'retried-crash');
      const taskId = response.headers.get('lmsp-task-id')!;
      let completionId = '';
      let content = '';
      try {
        for await (const frame of readSse(response)) {
          const chunk = JSON.parse(frame.data) as ChatCompletionChunk;
          completionId = chunk.id;
          content += chunk.choices[0]?.delta.content ?? '';
          if (content.length >= 10) await first.kill();
        }
      } catch {
        // The connection dies with the process.
      }
      assert.ok(content.length >= 10, 'attempt 1 streamed text before the kill');
      const service = await first.restart();
      await completed(service, taskId);
      const replay = await post(service, 'retried-crash');
      assert.equal(replay.status, 200);
      assert.equal(replay.headers.get('idempotent-replayed'), 'true');
      const replayed = built(await collectSse(replay));
      assert.equal(replayed.roles, 1, 'one message, the new attempt\'s');
      assert.ok(replayed.done);
      assert.equal(replayed.content, await storedContent(service, completionId), 'the replayed chunks add up to the completion');
    }));
});
