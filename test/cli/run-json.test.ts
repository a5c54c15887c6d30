import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { describe, test } from 'node:test';
import type { ResponseObject } from '../../src/api/types.js';
import { runCli } from '../helpers/cli.js';
import { api, LMSP_BIN, waitFor, withService } from '../helpers/service.js';

describe('lmsp run --json (LMSP section 12: one JSON document on stdout)', () => {
  test('prints the finished response object alone, the one the service keeps', { timeout: 90_000 }, () =>
    withService({}, async (service) => {
      const ran = await runCli(['run', 'lmsp-tiny', 'say', 'something', '--seed', '2', '--max-tokens', '7', '--json', '--data-dir', service.dataDir]);
      assert.equal(ran.code, 0, ran.stderr);
      const printed = JSON.parse(ran.stdout) as ResponseObject;
      assert.equal(printed.object, 'response');
      assert.equal(printed.status, 'incomplete');
      assert.equal(printed.usage?.output_tokens, 7);
      const kept = (await service.client.getResponse(printed.id));
      assert.deepEqual(printed.output, kept.output);
    }));

  test('after Ctrl-C, prints the response as it ended, cancelled, once the worker has recorded the cancel', { timeout: 90_000 }, () =>
    // The worker takes 1.5 s to act on a cancel (LMSP 12's debug delay), as a slow model would.
    withService({ env: { LMSP_DEBUG_TOKEN_DELAY_MS: '15', LMSP_DEBUG_CANCEL_DELAY_MS: '1500' } }, async (service) => {
      const child = spawn(process.execPath, [LMSP_BIN, 'run', 'lmsp-tiny', 'go', '--max-tokens', '5000', '--json', '--data-dir', service.dataDir],
        { stdio: ['ignore', 'pipe', 'pipe'] });
      let output = '';
      child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
      await waitFor(async () => ((await service.client.listTasks({ status: ['running'] })).data[0]?.last_sequence_number ?? 0) > 8, { what: 'the generation to run' });
      child.kill('SIGINT');
      const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
      assert.equal(code, 130);
      const printed = JSON.parse(output) as ResponseObject;
      assert.equal(printed.status, 'cancelled', `printed ${printed.status} (task ${printed.task.status})`);
      assert.equal(printed.task.status, 'cancelled');
      assert.ok((printed.usage?.output_tokens ?? 0) > 0, 'with the text generated before the cancel');
    }));
});

describe('lmsp run with the prompt on standard input', () => {
  test('without prompt words, or with -, the prompt is standard input; words win over it; an empty one is refused', { timeout: 90_000 }, () =>
    withService({}, async (service) => {
      const inputOf = async (args: string[], input: string) => {
        const ran = await runCli(['run', 'lmsp-tiny', ...args, '--background', '--max-tokens', '1', '--data-dir', service.dataDir], { input });
        assert.equal(ran.code, 0, ran.stderr);
        const items = await (await api(service, `/v1/responses/${ran.stdout.trim()}/input_items`)).json() as { data: Array<{ content: Array<{ text: string }> }> };
        return items.data[0]!.content[0]!.text;
      };
      assert.equal(await inputOf([], 'What is a river?\nAnswer briefly.\n'), 'What is a river?\nAnswer briefly.');
      assert.equal(await inputOf(['-'], 'from a pipe\n'), 'from a pipe');
      assert.equal(await inputOf(['the', 'words'], 'ignored'), 'the words');
      assert.equal(await inputOf(['', '-'], 'a blank word beside -\n'), 'a blank word beside -');
      const empty = await runCli(['run', 'lmsp-tiny', '--data-dir', service.dataDir], { input: ' \n' });
      assert.equal(empty.code, 2);
      assert.match(empty.stderr, /the prompt on standard input is empty/);
      for (const words of [[''], [' ', '']]) {
        const blank = await runCli(['run', 'lmsp-tiny', ...words, '--data-dir', service.dataDir], { input: 'not read' });
        assert.equal(blank.code, 2, JSON.stringify(words));
        assert.match(blank.stderr, /the prompt is empty/);
      }
    }));
});
