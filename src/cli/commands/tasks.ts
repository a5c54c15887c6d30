/** `lmsp tasks ls|show|events|cancel` (LMSP 7). */
import type { Command } from 'commander';
import { followTask } from '../follow.js';
import type { LmspClient } from '../../api/client.js';
import type { ResponseObject, TaskEvent, TaskObject } from '../../api/types.js';
import { TASK_STATUSES, type TaskStatus } from '../../domain/tasks.js';
import {
  action, beginJsonDocument, CliError, describeFailure, EXIT_INTERRUPTED, EXIT_USAGE, formatTime, numberOption, operatorClient, printJson, table, withCommonOptions,
  type CliFailure, type CommonOptions,
} from '../context.js';

/** One line per event, for people. */
export function describeEvent(event: TaskEvent): string {
  const head = `${String(event.sequence_number).padStart(5)}  ${event.type}`;
  if (event.type === 'response.output_text.delta') return `${head}  ${JSON.stringify(event.delta)}`;
  const response = event.response as ResponseObject | undefined;
  if (response) {
    const error = response.error ? `  ${response.error.code}: ${response.error.message}` : '';
    return `${head}  status=${response.status} attempt=${response.task.attempt}${error}`;
  }
  return head;
}

/** `--status a,b`: known statuses only, a usage error otherwise (LMSP 12), before the service is asked. */
function parseStatuses(text: string | undefined): TaskStatus[] | undefined {
  if (text === undefined) return undefined;
  const statuses = text.split(',').map((status) => status.trim()).filter(Boolean);
  const unknown = statuses.filter((status) => !(TASK_STATUSES as readonly string[]).includes(status));
  if (unknown.length > 0 || statuses.length === 0) {
    throw new CliError(`--status: unknown status ${unknown.join(', ') || '(none)'}; statuses are ${TASK_STATUSES.join(', ')}`, EXIT_USAGE);
  }
  return statuses as TaskStatus[];
}

function taskRows(tasks: TaskObject[]) {
  return tasks.map((task) => ({
    id: task.id,
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
 * The task a command names: a task id, or a response id (what `lmsp run --background` prints),
 * taken to its task.
 */
async function taskIdOf(client: LmspClient, id: string): Promise<string> {
  return id.startsWith('resp_') ? (await client.getResponse(id)).task.id : id;
}

export function registerTasks(program: Command): void {
  // The options every command takes parse here too, so `lmsp tasks --data-dir D` without a
  // subcommand is told what it lacks, not that --data-dir is unknown.
  const tasks = withCommonOptions(program.command('tasks').description('tasks and their event logs'));

  withCommonOptions(tasks.command('ls').description('list tasks, newest first')
    .option('--status <list>', 'comma-separated statuses, e.g. queued,running')
    .option('--limit <n>', 'how many', '20'))
    .action(action(async (options: CommonOptions & { status?: string; limit: string }) => {
      const limit = numberOption('--limit', options.limit, { integer: true, min: 1 });
      const status = parseStatuses(options.status);
      const list = await (await operatorClient(options)).listTasks({ status, limit });
      if (options.json) return printJson({ object: 'list', ...list });
      process.stdout.write(`${table(taskRows(list.data), ['id', 'status', 'model', 'attempt', 'policy', 'events', 'created', 'error'])}\n`);
    }));

  withCommonOptions(tasks.command('show <id>').description('a task and its response (a task id, or a response id)'))
    .action(action(async (given: string, options: CommonOptions) => {
      const client = await operatorClient(options);
      const task = await client.getTask(await taskIdOf(client, given));
      const response = task.response_id ? await client.getResponse(task.response_id) : null;
      if (options.json) return printJson({ task, response });
      process.stdout.write([
        `task      ${task.id} (${task.kind})`,
        ...(task.response_id ? [`response  ${task.response_id}`] : []),
        ...(task.completion_id ? [`completion ${task.completion_id}`] : []),
        `status    ${task.status}${response ? ` (response ${response.status})` : ''}`,
        `model     ${task.model}`,
        `policy    on_restart=${task.on_restart}, attempt ${task.attempt}`,
        `created   ${formatTime(task.created_at)}; started ${formatTime(task.started_at)}; finished ${formatTime(task.finished_at)}`,
        `events    ${task.last_sequence_number}`,
        ...(response ? [`usage     ${response.usage ? `${response.usage.input_tokens} in, ${response.usage.output_tokens} out` : '-'}`] : []),
        ...(task.error ? [`error     ${task.error.code}: ${task.error.message}`] : []),
        ...(response ? ['', response.output.find((item) => item.type === 'message')?.content[0]?.text ?? ''] : []), // calls first with tools
        '',
      ].join('\n'));
    }));

  withCommonOptions(tasks.command('events <id>').description("a task's events (a task id, or a response id)")
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

  withCommonOptions(tasks.command('cancel <id>').description('cancel a task (a task id, or a response id)'))
    .action(action(async (given: string, options: CommonOptions) => {
      const client = await operatorClient(options);
      const answer = await client.cancelTask(await taskIdOf(client, given));
      if (options.json) return printJson(answer.body);
      process.stdout.write(`${answer.body.id}: ${answer.body.status}${answer.status === 202 ? ' (the worker is stopping)' : ''}\n`);
    }));
}
