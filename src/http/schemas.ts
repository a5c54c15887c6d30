/**
 * JSON Schemas of requests. They validate every request (a wrong type or range is a 400 naming the
 * field, LMSP section 2) and describe the API in /v1/openapi.json, so the two cannot drift.
 * Unknown fields are ignored, as LMSP section 2 asks.
 */
import { RESTART_POLICIES, TASK_KINDS, TASK_STATUSES } from '../domain/tasks.js';
import { CLIENT_NAME_PATTERN, MAX_CLIENT_NAME_LENGTH, MAX_PAIRING_TTL_SECONDS, SCOPES } from '../domain/clients.js';

/** OpenAI's seed is a 64-bit integer (Python clients draw them with getrandbits(63)); beyond 2^53 JSON gives the nearest double. */
export const seedSchema = { type: ['integer', 'null'], minimum: -(2 ** 63), maximum: 2 ** 63 } as const;

/** OpenAI's `include` values for a response (`ResponseIncludable`). */
const RESPONSE_INCLUDABLES = [
  'file_search_call.results', 'web_search_call.results', 'web_search_call.action.sources', 'message.input_image.image_url',
  'computer_call_output.output.image_url', 'code_interpreter_call.outputs', 'reasoning.encrypted_content', 'message.output_text.logprobs',
];

const TEXT_PART_TYPES = ['input_text', 'output_text'];

/**
 * An input item's own id and status, as OpenAI's types have them: null is absent (a new id, and
 * `completed`), and an id is not empty (`input_items` pages by it).
 */
const itemId = { type: ['string', 'null'], minLength: 1, maxLength: 256 } as const;
const itemStatus = { type: ['string', 'null'], enum: ['in_progress', 'completed', 'incomplete', null] } as const;

/** A part of another type (input_image, ...) is named by its type, not by the text it lacks. */
const contentPart = {
  type: 'object',
  if: { required: ['type'], properties: { type: { enum: TEXT_PART_TYPES } } },
  then: { required: ['text'], properties: { text: { type: 'string' } } },
  else: { required: ['type'], properties: { type: { type: 'string', enum: TEXT_PART_TYPES } } },
} as const;

const message = {
  type: 'object',
  required: ['role', 'content'],
  properties: {
    type: { type: 'string', enum: ['message'] },
    role: { type: 'string', enum: ['user', 'assistant', 'system', 'developer'] },
    content: { anyOf: [{ type: 'string' }, { type: 'array', items: contentPart }] },
    id: itemId,
    status: itemStatus,
  },
} as const;

/** LMSP 6.1 `text.format`; the schema itself is checked by the grammar's translation (400 unsupported_schema). */
const textFormat = {
  type: ['object', 'null'],
  required: ['type'],
  properties: {
    type: { type: 'string', enum: ['text', 'json_object', 'json_schema'] },
    name: { type: 'string', minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_-]+$' },
    schema: { type: 'object' },
    strict: { type: ['boolean', 'null'] },
    description: { type: ['string', 'null'] },
  },
} as const;

/** LMSP 6.2 `tools`: functions only. */
const functionTool = {
  type: 'object',
  required: ['type', 'name'],
  properties: {
    type: { type: 'string', enum: ['function'] },
    name: { type: 'string', minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_-]+$' },
    description: { type: ['string', 'null'] },
    parameters: { type: ['object', 'null'] },
    strict: { type: ['boolean', 'null'] },
  },
} as const;

/** A function choice is told apart by being an object, so that an error names the field at fault. */
const toolChoice = {
  if: { type: 'object' },
  then: {
    // A choice of another type (web_search_preview, ...) is named by its type, not by the name it lacks.
    if: { required: ['type'], properties: { type: { const: 'function' } } },
    then: { required: ['name'], properties: { name: { type: 'string', minLength: 1 } } },
    else: { required: ['type'], properties: { type: { type: 'string', enum: ['function'] } } },
  },
  else: { type: ['string', 'null'], enum: ['auto', 'none', 'required', null] },
} as const;

/** LMSP 6.2: a call the model made, given back as input. */
const functionCallItem = {
  type: 'object',
  required: ['type', 'call_id', 'name', 'arguments'],
  properties: {
    type: { type: 'string', enum: ['function_call'] },
    call_id: { type: 'string', minLength: 1, maxLength: 256 },
    name: { type: 'string', minLength: 1, maxLength: 64 },
    arguments: { type: 'string' },
    id: itemId,
    status: itemStatus,
  },
} as const;

/** LMSP 6.2: the output of a call. */
const functionCallOutputItem = {
  type: 'object',
  required: ['type', 'call_id', 'output'],
  properties: {
    type: { type: 'string', enum: ['function_call_output'] },
    call_id: { type: 'string', minLength: 1, maxLength: 256 },
    // As OpenAI: a string, or text parts (images and files are not served).
    output: {
      anyOf: [{ type: 'string' }, {
        type: 'array',
        items: {
          type: 'object',
          if: { required: ['type'], properties: { type: { const: 'input_text' } } },
          then: { required: ['text'], properties: { text: { type: 'string' } } },
          else: { required: ['type'], properties: { type: { enum: ['input_text'] } } },
        },
      }],
    },
    id: itemId,
    status: itemStatus,
  },
} as const;

/** OpenAI's `item_reference`: an output item of a stored response, named by its id instead of sent again. */
const itemReference = {
  type: 'object',
  required: ['id'],
  properties: {
    type: { type: ['string', 'null'], enum: ['item_reference', null] },
    id: { type: 'string', minLength: 1, maxLength: 256 },
  },
} as const;

/** An input item, told apart by its `type`, so that an error names the field at fault. */
const inputItem = {
  if: { type: 'object', required: ['type'], properties: { type: { const: 'function_call' } } },
  then: functionCallItem,
  else: {
    if: { type: 'object', required: ['type'], properties: { type: { const: 'function_call_output' } } },
    then: functionCallOutputItem,
    else: {
      // Typed so, or as the `openai` package allows: an id, and neither a role nor a type.
      if: {
        type: 'object',
        anyOf: [
          { required: ['type'], properties: { type: { const: 'item_reference' } } },
          { required: ['id'], not: { required: ['role'] }, properties: { type: { const: null } } },
        ],
      },
      then: itemReference,
      // An item of another type (reasoning, ...) is named by its type, not by the role it lacks.
      else: {
        if: { type: 'object', required: ['type'], not: { properties: { type: { const: 'message' } } } },
        then: { properties: { type: { type: 'string', enum: ['message', 'function_call', 'function_call_output', 'item_reference'] } } },
        else: message,
      },
    },
  },
} as const;

export const createResponseBody = {
  type: 'object',
  required: ['model', 'input'],
  properties: {
    model: { type: 'string', minLength: 1, description: 'A registered model id.' },
    input: {
      description: 'A string, or an array of messages (and, with tools, function_call and function_call_output items; item_reference items name output items of stored responses).',
      // anyOf rather than if/else: a value of neither type is told both alternatives, and a bad
      // item is still named (the deepest error wins).
      anyOf: [{ type: 'string' }, { type: 'array', minItems: 1, items: inputItem }],
    },
    instructions: { type: ['string', 'null'], description: 'System text, placed before the conversation.' },
    previous_response_id: { type: ['string', 'null'], minLength: 1, description: 'Continue from a stored response.' },
    max_output_tokens: { type: ['integer', 'null'], minimum: 1, description: "1 to the model's context length; default 1024." },
    temperature: { type: ['number', 'null'], minimum: 0, maximum: 2, description: '0 is greedy; default 1.' },
    top_p: { type: ['number', 'null'], minimum: 0, maximum: 1, description: 'Default 1.' },
    seed: { ...seedSchema, description: 'LMSP: fixes the sampling; chosen and recorded when absent.' },
    stream: { type: ['boolean', 'null'], description: 'Answer with server-sent events.' },
    background: { type: ['boolean', 'null'], description: 'Answer 202 once the task is on disk.' },
    store: { type: ['boolean', 'null'], description: 'false: delete the response as soon as it finishes.' },
    metadata: {
      type: ['object', 'null'],
      maxProperties: 16,
      propertyNames: { maxLength: 64 },
      additionalProperties: { type: 'string', maxLength: 512 },
    },
    on_restart: {
      type: ['string', 'null'],
      enum: [...RESTART_POLICIES, null],
      description: 'LMSP: what a restart does to the unfinished task; default resume for background, fail otherwise.',
    },
    text: {
      type: ['object', 'null'],
      properties: { format: textFormat },
      description: 'LMSP 6.1: text, json_object or json_schema, enforced by constrained decoding.',
    },
    tools: {
      type: ['array', 'null'],
      maxItems: 128,
      // A tool of another type (web_search, ...) is named by its type, not by the fields a function lacks.
      items: { if: { type: 'object', required: ['type'], properties: { type: { const: 'function' } } }, then: functionTool, else: { type: 'object', required: ['type'], properties: { type: { enum: ['function'] } } } },
      description: 'LMSP 6.2: functions the model may call.',
    },
    tool_choice: { ...toolChoice, description: 'auto (default), none, required, or {type: "function", name}.' },
    parallel_tool_calls: { type: ['boolean', 'null'], description: 'Default true: one turn may hold several calls.' },
    include: {
      type: ['array', 'null'],
      items: { type: 'string', enum: RESPONSE_INCLUDABLES },
      description: "OpenAI's extra output: accepted for the tools and reasoning lmsp has none of; message.output_text.logprobs is 400 (unsupported).",
    },
    top_logprobs: { type: ['integer', 'null'], minimum: 0, maximum: 20, description: 'Only 0: logprobs are not supported.' },
    truncation: { enum: ['disabled', 'auto', null], description: 'disabled (default): an input that does not fit is refused; auto: the oldest messages are left out until it fits.' },
  },
} as const;

export const idParams = {
  type: 'object',
  required: ['id'],
  properties: { id: { type: 'string' } },
} as const;

/**
 * A sequence-number cursor: decimal digits only, as `Last-Event-ID` (LMSP 2), so `0x10` or `1e1`
 * are refused rather than read as 16 or 10 by type coercion.
 */
const sequenceCursor = { type: 'string', pattern: '^[0-9]+$', description: 'A sequence number: events after it are sent.' } as const;

export const retrieveResponseQuery = {
  type: 'object',
  properties: {
    stream: { type: 'boolean', description: 'Replay the events after starting_after, then follow live.' },
    starting_after: sequenceCursor,
  },
} as const;

export const listTasksQuery = {
  type: 'object',
  properties: {
    status: {
      type: 'string',
      pattern: `^(${TASK_STATUSES.join('|')})(,(${TASK_STATUSES.join('|')}))*$`,
      description: 'Comma-separated statuses.',
    },
    kind: {
      type: 'string',
      pattern: `^(${TASK_KINDS.join('|')})(,(${TASK_KINDS.join('|')}))*$`,
      description: 'Comma-separated kinds (an lmsp extension).',
    },
    limit: { type: 'integer', minimum: 1, maximum: 1000, default: 20 },
    after: { type: 'string', description: 'Cursor: the last id of the previous page.' },
    order: { type: 'string', enum: ['asc', 'desc'], default: 'desc' },
  },
} as const;

export const listClientsQuery = {
  type: 'object',
  properties: {
    limit: { type: 'integer', minimum: 1, maximum: 1000, default: 20 },
    after: { type: 'string', description: 'Cursor: the last id of the previous page.' },
    order: { type: 'string', enum: ['asc', 'desc'], default: 'desc', description: 'By pairing time.' },
  },
} as const;

export const taskEventsQuery = {
  type: 'object',
  properties: {
    starting_after: { ...sequenceCursor, default: '0' },
    limit: { type: 'integer', minimum: 1, maximum: 1000, default: 100 },
    stream: { type: 'boolean' },
  },
} as const;

export const registerModelBody = {
  type: 'object',
  required: ['path'],
  properties: {
    path: { type: 'string', minLength: 1, description: 'A GGUF file inside the models directory (relative paths start there).' },
    // null is absent, as for every optional field of the Responses and Chat Completions bodies.
    id: { type: ['string', 'null'], minLength: 1, maxLength: 128 },
  },
} as const;

/**
 * A client's name, shown to the operator in `lmsp clients ls` and on the dashboard: no control
 * characters (C0, DEL, C1), which would reach the operator's terminal as escape sequences.
 */
const clientName = { maxLength: MAX_CLIENT_NAME_LENGTH, pattern: CLIENT_NAME_PATTERN } as const;

export const pairingCodeBody = {
  type: 'object',
  properties: {
    name: { type: ['string', 'null'], ...clientName },
    // A scope named twice is granted once, as `lmsp pair --scopes` does (handler).
    scopes: { type: ['array', 'null'], items: { type: 'string', enum: [...SCOPES] }, minItems: 1 },
    ttl_seconds: { type: ['integer', 'null'], minimum: 1, maximum: MAX_PAIRING_TTL_SECONDS },
  },
} as const;

export const pairBody = {
  type: 'object',
  required: ['code', 'client_name'],
  properties: {
    code: { type: 'string', minLength: 1, maxLength: 64 },
    client_name: { type: 'string', minLength: 1, ...clientName },
  },
} as const;

/** `POST /v1/models/pull` (LMSP 5.1); the source itself is checked by models/pull-source.ts. */
export const pullModelBody = {
  type: 'object',
  required: ['source'],
  properties: {
    source: { type: 'string', minLength: 1, description: 'hf:OWNER/REPO/FILE.gguf[@REVISION] or an https:// URL of a GGUF file.' },
    id: { type: ['string', 'null'], minLength: 1, maxLength: 128 },
    digest: { type: ['string', 'null'], description: 'sha256:<64 hex digits>; a file with another digest fails the pull.' },
    on_restart: { type: ['string', 'null'], enum: ['fail', 'retry', 'resume', null] },
  },
} as const;
