/**
 * LMSP 6.1 and 6.2 for `POST /v1/responses`: `text.format`, `tools`, `tool_choice` and
 * `parallel_tool_calls` checked against what constrained decoding can enforce, and turned into
 * what the response keeps and what the engine is asked for.
 */
import type { CreateResponseBody } from '../api/types.js';
import { ServiceError, invalidRequest } from '../domain/errors.js';
import type { FunctionTool, ResponseToolChoice, StoredResponse, TextFormat } from '../domain/responses.js';
import { checkSchemaSupported, checkToolsSupported, formatBesideCalls } from '../engine/grammar/constraint.js';
import type { OutputFormat, ToolChoice, ToolDefinition } from '../engine/types.js';
import type { GenerationPlan } from './task-machine.js';

/** LMSP 6.1: 400 unsupported_schema naming the keyword and where it is, for Responses and Chat Completions alike. */
export function unsupportedSchema(param: string, support: { keyword: string; pointer: string; message: string }): ServiceError {
  const where = support.pointer ? ` at ${support.pointer}` : '';
  return new ServiceError('unsupported_schema', `Unsupported JSON Schema keyword '${support.keyword}'${where}: ${support.message}`, { param });
}

/** The request's `text.format`, checked (LMSP 6.1): a schema the grammar cannot enforce is a 400. */
export function textFormatOf(body: CreateResponseBody): TextFormat | undefined {
  const format = body.text?.format;
  if (!format || format.type === 'text') return format ? { type: 'text' } : undefined;
  if (format.type === 'json_object') return { type: 'json_object' };
  if (typeof format.name !== 'string') throw invalidRequest('text.format.name', "Missing required parameter: 'text.format.name'.");
  if (format.schema === undefined || format.schema === null) throw invalidRequest('text.format.schema', "Missing required parameter: 'text.format.schema'.");
  const support = checkSchemaSupported(format.schema);
  if (!support.ok) throw unsupportedSchema('text.format.schema', support);
  return {
    type: 'json_schema', name: format.name, schema: format.schema, strict: format.strict ?? null,
    ...(format.description === undefined || format.description === null ? {} : { description: format.description }),
  };
}

export interface ResponseTooling {
  tools?: FunctionTool[];
  toolChoice?: ResponseToolChoice;
  parallelToolCalls?: boolean;
}

/**
 * The request's tools, checked (LMSP 6.2): names unique, parameters enforceable, a named choice
 * among them. `strict` is shown back as OpenAI's Responses API does, true unless sent false; every
 * tool's arguments are enforced alike either way.
 */
export function toolingOf(body: CreateResponseBody, format?: TextFormat): ResponseTooling {
  const tools: FunctionTool[] = (body.tools ?? []).map((tool) => ({
    type: 'function', name: tool.name, description: tool.description ?? null, parameters: tool.parameters ?? null, strict: tool.strict ?? true,
  }));
  const support = checkToolsSupported(tools.map(toToolDefinition), formatBesideCalls(body.tool_choice, format));
  if (!support.ok) {
    const index = support.toolIndex ?? 0;
    if (support.keyword === 'name') throw invalidRequest(`tools[${index}].name`, support.message);
    throw unsupportedSchema(`tools[${index}].parameters`, support);
  }
  const choice = body.tool_choice ?? undefined;
  if (typeof choice === 'object' && !tools.some((tool) => tool.name === choice.name)) {
    throw invalidRequest('tool_choice', `tool_choice names the function '${choice.name}', which is not among the tools.`);
  }
  if ((choice === 'required' || typeof choice === 'object') && tools.length === 0) {
    throw invalidRequest('tool_choice', 'tool_choice requires tools.');
  }
  const tooling: ResponseTooling = {};
  if (tools.length > 0) tooling.tools = tools;
  if (choice !== undefined) tooling.toolChoice = typeof choice === 'object' ? { type: 'function', name: choice.name } : choice;
  if (body.parallel_tool_calls === false) tooling.parallelToolCalls = false;
  return tooling;
}

export function toToolDefinition(tool: FunctionTool): ToolDefinition {
  return {
    name: tool.name,
    ...(tool.description === null ? {} : { description: tool.description }),
    ...(tool.parameters === null ? {} : { parameters: tool.parameters }),
  };
}

function engineFormat(format: TextFormat | undefined): OutputFormat | undefined {
  if (!format || format.type === 'text') return undefined;
  return format.type === 'json_object' ? { type: 'json_object' } : { type: 'json_schema', schema: format.schema };
}

function engineToolChoice(choice: ResponseToolChoice | undefined): ToolChoice {
  if (choice === undefined) return 'auto';
  return typeof choice === 'object' ? { name: choice.name } : choice;
}

/** What a response asks of its output, as the engine takes it (LMSP 6.1, 6.2). */
export function outputConstraintOf(response: Pick<StoredResponse, 'textFormat' | 'tools' | 'toolChoice' | 'parallelToolCalls'>):
  Pick<GenerationPlan, 'format' | 'tools' | 'toolChoice' | 'parallelToolCalls'> {
  const plan: Pick<GenerationPlan, 'format' | 'tools' | 'toolChoice' | 'parallelToolCalls'> = {};
  const format = engineFormat(response.textFormat);
  if (format) plan.format = format;
  if (response.tools?.length) {
    plan.tools = response.tools.map(toToolDefinition);
    plan.toolChoice = engineToolChoice(response.toolChoice);
    plan.parallelToolCalls = response.parallelToolCalls ?? true;
  }
  return plan;
}
