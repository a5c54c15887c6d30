/**
 * JSON Schemas of the Chat Completions requests (LMSP 13): a wrong type or range is a 400 naming
 * the field; what depends on a message's role or on other fields is checked by the use case
 * (tasks/prepare-chat-completion.ts). Unknown fields are ignored (LMSP 2).
 */
import { RESTART_POLICIES } from '../domain/tasks.js';
import { seedSchema } from './schemas.js';


const contentPart = {
  type: 'object',
  required: ['type'],
  properties: { type: { type: 'string' }, text: { type: 'string' }, refusal: { type: 'string' } },
} as const;

const toolCall = {
  type: 'object',
  required: ['id', 'type', 'function'],
  properties: {
    id: { type: 'string', minLength: 1 },
    type: { type: 'string', enum: ['function'] },
    function: {
      type: 'object',
      required: ['name', 'arguments'],
      properties: { name: { type: 'string', minLength: 1 }, arguments: { type: 'string' } },
    },
  },
} as const;

/**
 * Items that must be of type `function`: one of another type is refused naming its `type`
 * (OpenAI knows `custom` tools and calls, which lmsp does not serve), not the `function` field it
 * has no reason to carry.
 */
function byFunctionType<T extends object>(schema: T) {
  return {
    if: { type: 'object', required: ['type'], properties: { type: { const: 'function' } } },
    then: schema,
    else: { type: 'object', required: ['type'], properties: { type: { enum: ['function'] } } },
  } as const;
}

/** LMSP 6.2 `tools` of Chat Completions: functions only. */
const functionTool = {
  type: 'object',
  required: ['type', 'function'],
  properties: {
    type: { type: 'string', enum: ['function'] },
    function: {
      type: 'object',
      required: ['name'],
      properties: {
        name: { type: 'string' },
        // null counts as absent, as in the Responses API's tools.
        description: { type: ['string', 'null'] },
        parameters: { type: ['object', 'null'] },
        strict: { type: ['boolean', 'null'] },
      },
    },
  },
} as const;

const message = {
  type: 'object',
  required: ['role'],
  properties: {
    role: { type: 'string', enum: ['system', 'developer', 'user', 'assistant', 'tool'] },
    // As OpenAI answers them: an empty array of parts or of calls is 400 (`empty_array` there).
    content: { anyOf: [{ type: 'string' }, { type: 'null' }, { type: 'array', minItems: 1, items: contentPart }] },
    // null counts as absent (an assistant message echoed back as a client received it).
    name: { type: ['string', 'null'] },
    // A call of another type (custom, ...) is named by its type, not by the `function` it lacks, as tools are.
    tool_calls: { type: ['array', 'null'], minItems: 1, items: byFunctionType(toolCall) },
    tool_call_id: { type: ['string', 'null'], minLength: 1 },
  },
} as const;

export const metadataSchema = {
  type: ['object', 'null'],
  maxProperties: 16,
  propertyNames: { maxLength: 64 },
  additionalProperties: { type: 'string', maxLength: 512 },
} as const;

export const createChatCompletionBody = {
  type: 'object',
  required: ['model', 'messages'],
  properties: {
    model: { type: 'string', minLength: 1, description: 'A registered model id.' },
    messages: { type: 'array', minItems: 1, items: message },
    max_completion_tokens: { type: ['integer', 'null'], minimum: 1, description: "1 to the model's context length; default 1024." },
    max_tokens: { type: ['integer', 'null'], minimum: 1, description: 'The older name of max_completion_tokens.' },
    temperature: { type: ['number', 'null'], minimum: 0, maximum: 2 },
    top_p: { type: ['number', 'null'], minimum: 0, maximum: 1 },
    frequency_penalty: { type: ['number', 'null'], minimum: -2, maximum: 2, description: 'Lowers a token by this times its count in the output so far.' },
    presence_penalty: { type: ['number', 'null'], minimum: -2, maximum: 2, description: 'Lowers a token by this once it is in the output.' },
    logit_bias: {
      type: ['object', 'null'], additionalProperties: { type: 'number' },
      description: "Token id (a decimal string) to a bias from -100 to 100 added to the token's logit; -100 bans it. At most 1024 tokens.",
    },
    seed: seedSchema,
    n: { type: ['integer', 'null'], minimum: 1, description: 'Only 1.' },
    stop: { anyOf: [{ type: 'string' }, { type: 'array', items: { type: 'string' } }, { type: 'null' }], description: 'A string or up to 4.' },
    stream: { type: ['boolean', 'null'] },
    stream_options: { type: ['object', 'null'], properties: { include_usage: { type: ['boolean', 'null'] } } },
    response_format: {
      type: ['object', 'null'],
      required: ['type'],
      properties: {
        type: { type: 'string', enum: ['text', 'json_object', 'json_schema'] },
        json_schema: {
          type: 'object',
          required: ['name'],
          properties: {
            name: { type: 'string', pattern: '^[A-Za-z0-9_-]{1,64}$' },
            description: { type: ['string', 'null'] },
            schema: { type: 'object' },
            strict: { type: ['boolean', 'null'] },
          },
        },
      },
    },
    // As OpenAI answers Chat Completions (its Responses API accepts `tools: []`): no tools is said
    // by leaving the field out; at most 128, as OpenAI and the Responses schema allow.
    tools: {
      type: ['array', 'null'],
      minItems: 1,
      maxItems: 128,
      items: byFunctionType(functionTool),
    },
    // Told apart by being an object, so that an error names the field at fault (a Responses-style
    // {type, name} lacks `function`), as the Responses schema does.
    tool_choice: {
      if: { type: 'object' },
      then: {
        if: { required: ['type'], properties: { type: { const: 'function' } } },
        then: { required: ['function'], properties: { function: { type: 'object', required: ['name'], properties: { name: { type: 'string' } } } } },
        else: { required: ['type'], properties: { type: { type: 'string', enum: ['function'] } } },
      },
      else: { type: ['string', 'null'], enum: ['none', 'auto', 'required', null] },
    },
    parallel_tool_calls: { type: ['boolean', 'null'] },
    logprobs: { type: ['boolean', 'null'] },
    top_logprobs: { type: ['integer', 'null'], minimum: 0, maximum: 20 },
    store: { type: ['boolean', 'null'], description: 'true keeps the completion (GET /v1/chat/completions); default false.' },
    metadata: metadataSchema,
    on_restart: { type: ['string', 'null'], enum: [...RESTART_POLICIES, null], description: 'LMSP: default fail.' },
  },
} as const;

export const updateChatCompletionBody = {
  type: 'object',
  required: ['metadata'],
  properties: { metadata: metadataSchema },
} as const;

export const completionIdParams = {
  type: 'object',
  required: ['completion_id'],
  properties: { completion_id: { type: 'string' } },
} as const;

export const listChatCompletionsQuery = {
  type: 'object',
  properties: {
    limit: { type: 'integer', minimum: 1, maximum: 100, default: 20 },
    after: { type: 'string' },
    order: { type: 'string', enum: ['asc', 'desc'], default: 'asc' },
    model: { type: 'string' },
  },
} as const;

export const chatMessagesQuery = {
  type: 'object',
  properties: {
    limit: { type: 'integer', minimum: 1, maximum: 100, default: 20 },
    after: { type: 'string' },
    order: { type: 'string', enum: ['asc', 'desc'], default: 'asc' },
  },
} as const;
