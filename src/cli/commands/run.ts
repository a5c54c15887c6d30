/** `lmsp run MODEL PROMPT`: generate and stream the text; Ctrl-C cancels the task. */
import type { Command } from 'commander';
import { TERMINAL_EVENTS } from '../../api/events.js';
import type { CreateResponseBody, ResponseObject, TaskEvent } from '../../api/types.js';
import { isFinal, RESTART_POLICIES, type RestartPolicy } from '../../domain/tasks.js';
import type { LmspClient } from '../../api/client.js';
import { action, CliError, EXIT_INTERRUPTED, EXIT_USAGE, isConnectionFailure, numberOption, operatorClient, printJson, withCommonOptions, type CommonOptions } from '../context.js';
import { connectionLost } from '../follow.js';

interface RunOptions extends CommonOptions {
  background?: boolean;
  seed?: string;
  maxTokens?: string;
  temperature?: string;
  topP?: string;
  instructions?: string;
  onRestart?: string;
  stats?: boolean;
}

function number(name: string, value: string | undefined, integer: boolean): number | undefined {
  return value === undefined ? undefined : numberOption(name, value, { integer });
}

/** How long `run` waits for a cancelled task to record its end before it prints what it has. */
const CANCEL_WAIT_MS = 10_000;

/** The response once its task has finished, or as it is when the wait runs out (or null, when it cannot be read). */
async function finishedResponse(client: LmspClient, responseId: string): Promise<ResponseObject | null> {
  const deadline = Date.now() + CANCEL_WAIT_MS;
  for (;;) {
    const response = await client.getResponse(responseId).catch(() => null);
    if (!response || isFinal(response.task.status) || Date.now() > deadline) return response;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/**
 * The prompt: its words, or all of standard input when they are `-` or left out and input is
 * piped (`lmsp run MODEL < question.txt`, `echo hi | lmsp run MODEL`), as `ollama run` takes it.
 */
async function promptOf(words: string[]): Promise<string> {
  // Blank words are no part of the question; only blank words is a blank question, refused as an
  // empty standard input is (a slip, never what was meant).
  const given = words.filter((word) => word.trim() !== '');
  if (words.length > 0 && given.length === 0) throw new CliError('the prompt is empty', EXIT_USAGE);
  const fromStdin = given.length === 0 || (given.length === 1 && given[0] === '-');
  if (!fromStdin) return given.join(' ');
  if (words.length === 0 && process.stdin.isTTY) throw new CliError('missing the prompt: give it as words, or on standard input', EXIT_USAGE);
  let text = '';
  for await (const chunk of process.stdin.setEncoding('utf8')) text += chunk as string;
  if (text.trim() === '') throw new CliError('the prompt on standard input is empty', EXIT_USAGE);
  // The line end a file or `echo` leaves is no part of the question.
  return text.trimEnd();
}

export function registerRun(program: Command): void {
  withCommonOptions(program.command('run <model> [prompt...]').description("generate a response and stream its text (the prompt: its words, or standard input when they are '-' or left out)")
    .option('--background', 'only create the task and print the response id')
    .option('--seed <n>', 'fix the sampling seed')
    .option('--max-tokens <n>', 'max_output_tokens')
    .option('--temperature <t>', '0 to 2; 0 is greedy')
    .option('--top-p <p>', '0 to 1')
    .option('--instructions <text>', 'system instructions')
    .option('--on-restart <policy>', `what a restart does to the task: ${RESTART_POLICIES.join(', ')}`)
    .option('--no-stats', 'do not print token counts and speed (printed on stderr when it is a terminal)'))
    .action(action(async (model: string, promptWords: string[], options: RunOptions) => {
      const input = await promptOf(promptWords);
      if (options.onRestart && !(RESTART_POLICIES as readonly string[]).includes(options.onRestart)) {
        throw new CliError(`--on-restart: expected one of ${RESTART_POLICIES.join(', ')}`, EXIT_USAGE);
      }
      const client = await operatorClient(options);
      const body: CreateResponseBody = {
        model,
        input,
        ...(options.seed !== undefined ? { seed: number('--seed', options.seed, true)! } : {}),
        ...(options.maxTokens !== undefined ? { max_output_tokens: number('--max-tokens', options.maxTokens, true)! } : {}),
        ...(options.temperature !== undefined ? { temperature: number('--temperature', options.temperature, false)! } : {}),
        ...(options.topP !== undefined ? { top_p: number('--top-p', options.topP, false)! } : {}),
        ...(options.instructions ? { instructions: options.instructions } : {}),
        ...(options.onRestart ? { on_restart: options.onRestart as RestartPolicy } : {}),
      };
      if (options.background) {
        const created = await client.createResponse({ ...body, background: true });
        if (options.json) printJson(created.body);
        else process.stdout.write(`${created.body.id}\n`);
        return;
      }
      const controller = new AbortController();
      let responseId: string | null = null;
      let cancelling = false;
      process.once('SIGINT', () => {
        cancelling = true;
        process.stderr.write('\ncancelling…\n');
        const cancel = responseId ? client.cancelResponse(responseId).catch(() => undefined) : Promise.resolve();
        void cancel.finally(() => controller.abort());
      });
      const showStats = options.stats !== false && !options.json && process.stderr.isTTY;
      let firstTokenAt = 0;
      let final: ResponseObject | null = null;
      // The loading status is erased from the terminal's line before anything else is written there.
      let statusShown = false;
      const clearStatus = () => {
        if (statusShown) process.stderr.write('\r\x1b[2K');
        statusShown = false;
      };
      try {
        for await (const event of client.streamResponse(body, { signal: controller.signal }) as AsyncGenerator<TaskEvent>) {
          if (event.type === 'response.created') responseId = (event.response as ResponseObject).id;
          if (event.type === 'response.loading' && showStats) {
            process.stderr.write(`loading ${model}…`);
            statusShown = true;
          } else clearStatus();
          if (event.type === 'response.output_text.delta') {
            if (!firstTokenAt) firstTokenAt = performance.now();
            if (!options.json) process.stdout.write(String(event.delta));
          } else if (event.response && TERMINAL_EVENTS.has(event.type)) {
            final = event.response as ResponseObject;
          }
        }
      } catch (error) {
        clearStatus();
        // The service went away mid-stream (stopped, or killed): say which response, which its
        // restart policy now decides about (LMSP 7.5), rather than a bare network error.
        if (!cancelling && responseId && isConnectionFailure(error)) throw connectionLost(responseId, 'the response');
        if (!cancelling) throw error;
      }
      // LMSP 12: --json is one JSON document: the response as it ended. After Ctrl-C the worker
      // records the cancel within a second (LMSP 7.4): read the response again once it has.
      if (options.json) {
        if (!final && responseId) final = await finishedResponse(client, responseId);
        if (final) printJson(final);
      } else process.stdout.write('\n');
      if (final && showStats) {
        const seconds = firstTokenAt ? (performance.now() - firstTokenAt) / 1000 : 0;
        const tokens = final.usage?.output_tokens ?? 0;
        const rate = seconds > 0 ? ` at ${(Math.max(0, tokens - 1) / seconds).toFixed(1)} tokens/s` : '';
        process.stderr.write(`[${final.status}: ${final.usage?.input_tokens ?? 0} tokens in, ${tokens} out${rate}]\n`);
      }
      if (final?.status === 'failed') {
        throw new CliError(`the response failed: ${final.error?.code}: ${final.error?.message}`, 1, final.error?.code ?? 'task_failed');
      }
      if (cancelling) process.exitCode = EXIT_INTERRUPTED;
      // Cancelled by someone else (`lmsp tasks cancel`, the dashboard): the text is not whole.
      else if (final?.status === 'cancelled') throw new CliError(`the response ${final.id} was cancelled before it finished`, 1, 'task_cancelled');
    }));
}
