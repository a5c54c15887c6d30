/** `lmsp top` (LMSP 15): the service's throughput, queue and tasks in a terminal, from /metrics and /v1/tasks. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { TopFrame } from '../../src/cli/commands/top.js';
import { runCli } from '../helpers/cli.js';
import { waitFor, withService } from '../helpers/service.js';

describe('lmsp top', () => {
  test('one frame: tokens per second, the queue and the unfinished tasks; --json for scripts', () =>
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '20' } }, async (service) => {
      const running = (await service.client.createResponse({ model: 'lmsp-tiny', input: 'a', max_output_tokens: 3000, background: true })).body;
      const queued = (await service.client.createResponse({ model: 'lmsp-tiny', input: 'b', max_output_tokens: 3, background: true })).body;
      await waitFor(async () => ((await service.client.getResponse(running.id)).usage?.output_tokens ?? 0) > 0, { what: 'output' });

      const text = await runCli(['top', '--once', '--interval', '500ms', '--data-dir', service.dataDir]);
      assert.equal(text.code, 0, text.stderr);
      assert.match(text.stdout, /tokens\/s \d+\.\d/);
      assert.match(text.stdout, /queued 1 {3}running 1/);
      const runningLine = text.stdout.split('\n').find((line) => line.startsWith(running.task.id));
      assert.ok(runningLine?.includes('running'), text.stdout);
      assert.ok(text.stdout.split('\n').some((line) => line.startsWith(queued.task.id) && line.includes('queued')), text.stdout);

      const json = await runCli(['top', '--json', '--interval', '500ms', '--data-dir', service.dataDir]);
      assert.equal(json.code, 0, json.stderr);
      const frame = JSON.parse(json.stdout) as Omit<TopFrame, 'figures'> & { figures: Record<string, unknown> & { tasks: Record<string, number> } };
      assert.ok(frame.tokens_per_second! > 0, `tokens per second: ${frame.tokens_per_second}`);
      assert.equal(frame.figures.tasks.queued, 1);
      assert.ok((frame.figures.tokens_total as number) > 0 && typeof frame.figures.open_streams === 'number', json.stdout);
      assert.deepEqual(Object.keys(frame.figures).filter((key) => /[A-Z]/.test(key)), [], 'snake_case names, as in the API');
      assert.deepEqual(frame.unfinished.map((task) => task.id), [running.task.id, queued.task.id]);
      assert.equal(frame.service.id, (await service.client.service()).id);

      const bad = await runCli(['top', '--once', '--interval', 'soon', '--data-dir', service.dataDir]);
      assert.equal(bad.code, 2);
      assert.match(bad.stderr, /--interval/);
    }));
});
