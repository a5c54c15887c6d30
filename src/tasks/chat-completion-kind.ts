/** Tasks of kind `chat_completion` (LMSP 13): their events carry the chunks as they are streamed. */
import { CHAT_CHUNK_EVENT, CHAT_TEXT_DELTA, chatCompletionEvents } from '../api/chat-completion-events.js';
import type { ChatCompletionChunk } from '../api/chat-completions.js';
import type { ChatCompletionHeader, ChatCompletionMessage, ChatToolCall, StoredChatCompletion } from '../domain/chat-completions.js';
import type { Task } from '../domain/tasks.js';
import type { EngineMessage } from '../engine/engine.js';
import type { Store } from '../store/index.js';
import { withOutput, type GenerationPlan, type TaskKindHandler } from './task-machine.js';

/** The chat completion of a `chat_completion` task; throws for another kind, which is a bug. */
export function completionIdOf(task: Pick<Task, 'id' | 'kind' | 'completionId'>): string {
  if (task.completionId === null) throw new Error(`task ${task.id} of kind ${task.kind} has no chat completion`);
  return task.completionId;
}

/** Events read at a time when a task's chunks are read back. */
const PAGE = 500;

/** Calls each chunk of the task's current attempt, in order. */
function forEachChunk(store: Store, task: Task, visit: (chunk: ChatCompletionChunk) => void): void {
  let after = task.outputStartSeq;
  for (;;) {
    const events = store.events.after(task.id, after, PAGE);
    for (const event of events) {
      if (event.type === CHAT_CHUNK_EVENT) visit((JSON.parse(event.data) as { chunk: ChatCompletionChunk }).chunk);
    }
    if (events.length < PAGE) return;
    after = events.at(-1)!.sequenceNumber;
  }
}

/** The tool calls of the task's current attempt so far by index, from its chunks (their deltas add up to them). */
function toolCallsByIndex(store: Store, task: Task): Map<number, ChatToolCall> {
  const calls = new Map<number, ChatToolCall>();
  if (task.outputTokens === 0) return calls;
  forEachChunk(store, task, (chunk) => {
    for (const delta of chunk.choices[0]?.delta.tool_calls ?? []) {
      let call = calls.get(delta.index);
      if (!call) calls.set(delta.index, call = { id: '', name: '', arguments: '' });
      if (delta.id) call.id = delta.id;
      if (delta.function.name) call.name = delta.function.name;
      call.arguments += delta.function.arguments;
    }
  });
  return calls;
}

/** The tool calls of the task's current attempt so far, in order. */
export function toolCallsSoFar(store: Store, task: Task): ChatToolCall[] {
  return [...toolCallsByIndex(store, task).entries()].sort(([a], [b]) => a - b).map(([, call]) => call);
}

function toEngineMessage(message: ChatCompletionMessage): EngineMessage {
  switch (message.role) {
    case 'assistant':
      return { role: 'assistant', content: message.content ?? '', ...(message.toolCalls?.length ? { toolCalls: message.toolCalls } : {}) };
    case 'tool':
      return { role: 'tool', toolCallId: message.toolCallId, content: message.content };
    default:
      return { role: message.role, content: message.content };
  }
}

/** What the engine is asked for a stored completion (LMSP 13, 6.1, 6.2). */
export function generationOf(completion: StoredChatCompletion): GenerationPlan {
  const { request } = completion;
  const plan: GenerationPlan = {
    messages: completion.messages.map(toEngineMessage),
    sampling: {
      temperature: request.temperature, topP: request.topP, seed: request.seed, maxOutputTokens: request.maxCompletionTokens,
      frequencyPenalty: request.frequencyPenalty ?? 0, presencePenalty: request.presencePenalty ?? 0,
      ...(request.logitBias && request.logitBias.length > 0 ? { logitBias: request.logitBias } : {}),
    },
  };
  if (request.stop.length > 0) plan.stop = request.stop;
  if (request.responseFormat.type === 'json_object') plan.format = { type: 'json_object' };
  if (request.responseFormat.type === 'json_schema') plan.format = { type: 'json_schema', schema: request.responseFormat.schema };
  if (request.tools.length > 0) {
    plan.tools = request.tools;
    plan.toolChoice = request.toolChoice ?? 'auto';
    plan.parallelToolCalls = request.parallelToolCalls;
  }
  return plan;
}

export function chatCompletionKind(store: Store): TaskKindHandler<ChatCompletionHeader> {
  /**
   * The tool calls already named in each running task's chunks, valid while the task's log ends
   * at `lastSeq`; otherwise (a restart, a write that did not commit) read again from the log.
   */
  const announced = new Map<string, { start: number; lastSeq: number; indexes: Set<number> }>();
  const announcedFor = (task: Task): { lastSeq: number; indexes: Set<number> } => {
    const known = announced.get(task.id);
    if (known && known.start === task.outputStartSeq && known.lastSeq === task.lastSequenceNumber) return known;
    const indexes = new Set(toolCallsByIndex(store, task).keys());
    const fresh = { start: task.outputStartSeq, lastSeq: task.lastSequenceNumber, indexes };
    announced.set(task.id, fresh);
    return fresh;
  };

  const load = (task: Task): ChatCompletionHeader => {
    const header = store.chatCompletions.getHeader(completionIdOf(task));
    if (!header) throw new Error(`chat completion ${completionIdOf(task)} of task ${task.id} is missing`);
    return header;
  };

  return {
    kind: 'chat_completion',
    load,
    outputText(task: Task): string {
      return task.outputTokens === 0 ? '' : store.events.outputText(task.id, task.outputStartSeq, CHAT_TEXT_DELTA);
    },
    outputTexts: (tasks) => store.events.outputTexts(withOutput(tasks), CHAT_TEXT_DELTA),
    generation(task: Task) {
      const completion = store.chatCompletions.get(completionIdOf(task));
      if (!completion) throw new Error(`chat completion ${completionIdOf(task)} of task ${task.id} is missing`);
      return generationOf(completion);
    },
    finalized(header, task, text) {
      announced.delete(task.id);
      // The final message is kept on the completion; while the task ran it lived in its chunks.
      const toolCalls = header.request.tools.length > 0 ? toolCallsSoFar(store, task) : [];
      store.chatCompletions.setOutput(header.id, text, toolCalls);
    },
    events: {
      created: (header) => chatCompletionEvents.created(header),
      loading: (header) => chatCompletionEvents.loading(header),
      running: (header) => chatCompletionEvents.running(header),
      output: (header, text, tokens, units, task) => {
        const state = announcedFor(task);
        const drafts = chatCompletionEvents.output(header, text, tokens, units, task.attempt, state.indexes);
        state.lastSeq = task.lastSequenceNumber + drafts.length;
        return drafts;
      },
      finished: (header, text, finishReason, toolCalls) => chatCompletionEvents.finished(header, text, finishReason, toolCalls),
      failed: (header, text) => chatCompletionEvents.failed(header, text),
      cancelling: (header, text) => chatCompletionEvents.cancelling(header, text),
      cancelled: (header, text) => chatCompletionEvents.cancelled(header, text),
      requeued: (header, text) => chatCompletionEvents.requeued(header, text),
      resumed: (header, text) => chatCompletionEvents.resumed(header, text),
    },
  };
}
