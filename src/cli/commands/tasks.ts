/** `lmsp tasks ls|show|events|cancel` (LMSP 7). */
import type { Command } from 'commander';
import { followTask } from '../follow.js';
import type { LmspClient } from '../../api/client.js';
import type { ChatCompletionChunk, ChatCompletionObject } from '../../api/chat-completions.js';
import type { ResponseObject, TaskEvent, TaskObject } from '../../api/types.js';
import { TASK_KINDS, TASK_STATUSES, type TaskKind, type TaskStatus } from '../../domain/tasks.js';
import {
  action, beginJsonDocument, CliError, describeFailure, EXIT_INTERRUPTED, EXIT_USAGE, formatTime, numberOption, operatorClient, printJson, table, withCommonOptions,
  type CliFailure, type CommonOptions,
} from '../context.js';

/** One line per event, for people. */
export function describeEvent(event: TaskEvent): string {
  const head = `${String(event.sequence_number).padStart(5)}  ${event.type}`;
  const detail = eventDetail(event);
  return detail ? `${head}  ${detail}` : head;
}

/** What an event adds, for each kind of task: the text, the call, the bytes, the status. */
function eventDetail(event: TaskEvent): string {
  if (event.type === 'response.output_text.delta') return JSON.stringify(event.delta);
  if (event.type === 'chat.completion.chunk') return chunkDetail(event.chunk as ChatCompletionChunk);
  if (event.type === 'model.pull.progress') return `${String(event.downloaded_bytes)} of ${String(event.total_bytes ?? '?')} bytes`;
  const error = event.error as TaskObject['error'] | undefined;
  const errorText = (failure: TaskObject['error'] | undefined) => (failure ? `  ${failure.code}: ${failure.message}` : '');
  const response = event.response as ResponseObject | undefined;
  if (response) return `status=${response.status} attempt=${response.task.attempt}${errorText(response.error)}`;
  const task = event.task as TaskObject | undefined;
  if (task) return `status=${task.status} attempt=${task.attempt}${errorText(task.error ?? error)}`;
  const completion = event.completion as ChatCompletionObject | undefined;
  const finish = completion?.choices[0]?.finish_reason;
  return `${finish ? `finish_reason=${finish}` : ''}${errorText(error)}`.trim();
}

function chunkDetail(chunk: ChatCompletionChunk): string {
  const choice = chunk.choices[0];
  if (!choice) return chunk.usage ? `usage ${chunk.usage.prompt_tokens} in, ${chunk.usage.completion_tokens} out` : '';
  const calls = (choice.delta.tool_calls ?? []).map((call) => `call ${call.index}${call.function.name ? ` ${call.function.name}` : ''} ${JSON.stringify(call.function.arguments)}`);
  const parts = [
    ...(choice.delta.content ? [JSON.stringify(choice.delta.content)] : []),
    ...calls,
    ...(choice.finish_reason ? [`finish_reason=${choice.finish_reason}`] : []),
  ];
  return parts.join('  ');
}

/** `--status a,b` or `--kind a,b`: known values only, a usage error otherwise (LMSP 12), before the service is asked. */
function parseList<T extends string>(flag: string, [what, whats]: [string, string], known: readonly T[], text: string | undefined): T[] | undefined {
  if (text === undefined) return undefined;
  const values = text.split(',').map((value) => value.trim()).filter(Boolean);
  const unknown = values.filter((value) => !(known as readonly string[]).includes(value));
  if (unknown.length > 0 || values.length === 0) {
    throw new CliError(`${flag}: unknown ${what} ${unknown.join(', ') || '(none)'}; ${whats} are ${known.join(', ')}`, EXIT_USAGE);
  }
  return values as T[];
}

function taskRows(tasks: TaskObject[]) {
  return tasks.map((task) => ({
    id: task.id,
    kind: task.kind,
    status: task.status,
    model: task.model,
    attempt: task.attempt,
    policy: task.on_restart,
    events: task.last_sequence_number,
    created: formatTime(task.created_at),
    error: task.error?.code ?? '-',
  }));
}

/**
 * The task a command names: a task id, a response id (what `lmsp run --background` prints) or a
 * chat completion id, taken to its task.
 */
async function taskIdOf(client: LmspClient, id: string): Promise<string> {
  if (id.startsWith('resp_')) return (await client.getResponse(id)).task.id;
  if (!id.startsWith('chatcmpl-')) return id;
  // A chat completion names no task: its task names it, among the client's chat completion tasks.
  for (let after: string | undefined; ;) {
    const page = await client.listTasks({ kind: ['chat_completion'], limit: 100, ...(after ? { after } : {}) });
    const task = page.data.find((candidate) => candidate.completion_id === id);
    if (task) return task.id;
    if (!page.has_more || !page.last_id) throw new CliError(`no task of the chat completion ${id} (its task is deleted once it finishes unless it was stored)`, 1, 'not_found');
    after = page.last_id;
  }
}

export function registerTasks(program: Command): void {
  // The options every command takes parse here too, so `lmsp tasks --data-dir D` without a
  // subcommand is told what it lacks, not that --data-dir is unknown.
  const tasks = withCommonOptions(program.command('tasks').description('tasks and their event logs'));

  withCommonOptions(tasks.command('ls').description('list tasks, newest first')
    .option('--status <list>', 'comma-separated statuses, e.g. queued,running')
    .option('--kind <list>', `comma-separated kinds: ${TASK_KINDS.join(', ')}`)
    .option('--limit <n>', 'how many', '20'))
    .action(action(async (options: CommonOptions & { status?: string; kind?: string; limit: string }) => {
      const limit = numberOption('--limit', options.limit, { integer: true, min: 1 });
      const status = parseList<TaskStatus>('--status', ['status', 'statuses'], TASK_STATUSES, options.status);
      const kind = parseList<TaskKind>('--kind', ['kind', 'kinds'], TASK_KINDS, options.kind);
      const list = await (await operatorClient(options)).listTasks({ status, kind, limit });
      if (options.json) return printJson({ object: 'list', ...list });
      process.stdout.write(`${table(taskRows(list.data), ['id', 'kind', 'status', 'model', 'attempt', 'policy', 'events', 'created', 'error'])}\n`);
    }));

  withCommonOptions(tasks.command('show <id>').description('a task and its response or chat completion (a task id, a response id or a chat completion id)'))
    .action(action(async (given: string, options: CommonOptions) => {
      const client = await operatorClient(options);
      const task = await client.getTask(await taskIdOf(client, given));
      const response = task.response_id ? await client.getResponse(task.response_id) : null;
      // A stored chat completion; one not stored has no page of its own (LMSP 13).
      const completion = task.completion_id ? await client.getChatCompletion(task.completion_id).catch(() => null) : null;
      if (options.json) return printJson({ task, response, ...(task.kind === 'chat_completion' ? { completion } : {}) });
      const usage = response?.usage ? `${response.usage.input_tokens} in, ${response.usage.output_tokens} out`
        : completion ? `${completion.usage.prompt_tokens} in, ${completion.usage.completion_tokens} out` : '-';
      const message = completion?.choices[0]?.message;
      const calls = (message?.tool_calls ?? []).map((call) => `${call.function.name}(${call.function.arguments})`);
      process.stdout.write([
        `task      ${task.id} (${task.kind})`,
        ...(task.response_id ? [`response  ${task.response_id}`] : []),
        ...(task.completion_id ? [`completion ${task.completion_id}`] : []),
        `status    ${task.status}${response ? ` (response ${response.status})` : ''}`,
        `model     ${task.model}`,
        `policy    on_restart=${task.on_restart}, attempt ${task.attempt}`,
        `created   ${formatTime(task.created_at)}; started ${formatTime(task.started_at)}; finished ${formatTime(task.finished_at)}`,
        `events    ${task.last_sequence_number}`,
        ...(response || completion ? [`usage     ${usage}`] : []),
        ...(task.error ? [`error     ${task.error.code}: ${task.error.message}`] : []),
        ...(response ? ['', response.output.find((item) => item.type === 'message')?.content[0]?.text ?? ''] : []), // calls first with tools
        ...(message ? ['', ...calls, message.content ?? ''] : []),
        '',
      ].join('\n'));
    }));

  withCommonOptions(tasks.command('events <id>').description("a task's events (a task id, a response id or a chat completion id)")
    .option('--after <n>', 'only events after this sequence number', '0')
    .option('--follow', 'keep following until the task finishes, reconnecting if the connection drops'))
    .action(action(async (given: string, options: CommonOptions & { after: string; follow?: boolean }) => {
      let last = numberOption('--after', options.after, { integer: true, min: 0 });
      const client = await operatorClient(options);
      const id = await taskIdOf(client, given);
      // LMSP 12: --json is one JSON document, the list of events, written as they come (one
      // event a line inside it), so that --follow still shows them live.
      let printed = 0;
      const print = (event: TaskEvent) => {
        if (!options.json) return void process.stdout.write(`${describeEvent(event)}\n`);
        beginJsonDocument();
        process.stdout.write(`${printed === 0 ? '{"object":"list","data":[\n' : ',\n'}${JSON.stringify(event)}`);
        printed += 1;
      };
      // A list cut short says so: `has_more` true, and with the failure that cut it, its `error`.
      const closing = (cut?: { error: CliFailure | null }) => `${printed === 0 ? '{"object":"list","data":[' : '\n'}],"has_more":${cut ? 'true' : 'false'}`
        + `${cut?.error ? `,"error":${JSON.stringify(cut.error)}` : ''}}\n`;
      // Ctrl-C, a kill or a closed terminal while following ends the list too: stdout stays one
      // JSON document (exit 128 + the signal's number, as a shell reports a command it stopped).
      if (options.json && options.follow) {
        for (const [signal, code] of [['SIGINT', EXIT_INTERRUPTED], ['SIGTERM', 143], ['SIGHUP', 129]] as const) {
          process.once(signal, () => process.stdout.write(closing({ error: null }), () => process.exit(code)));
        }
      }
      // A failure after the list began closes it first, so that stdout stays one JSON document.
      try {
        if (!options.follow) {
          for (;;) {
            const page = await client.taskEvents(id, last, 1000);
            page.data.forEach(print);
            if (!page.has_more || page.data.length === 0) break;
            last = page.data.at(-1)!.sequence_number;
          }
        } else {
          // Follow, and after a dropped connection (the service restarted, say) reconnect, wherever
          // the service now listens, and resume after the last event seen (LMSP 7.3).
          await followTask(client, options, id, {
            after: last,
            onEvent: print,
            onReconnect: (reason, after) => process.stderr.write(`lmsp: ${reason}; reconnecting after event ${after}\n`),
          });
        }
      } catch (error) {
        if (options.json && printed > 0) process.stdout.write(closing({ error: describeFailure(error)?.failure ?? { code: 'command_failed', message: String(error) } }));
        throw error;
      }
      if (options.json) process.stdout.write(closing());
    }));

  withCommonOptions(tasks.command('cancel <id>').description('cancel a task (a task id, a response id or a chat completion id)'))
    .action(action(async (given: string, options: CommonOptions) => {
      const client = await operatorClient(options);
      const answer = await client.cancelTask(await taskIdOf(client, given));
      if (options.json) return printJson(answer.body);
      process.stdout.write(`${answer.body.id}: ${answer.body.status}${answer.status === 202 ? ' (the worker is stopping)' : ''}\n`);
    }));
}
