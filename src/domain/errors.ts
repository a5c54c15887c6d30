/**
 * Every error code of the service (LMSP section 9), with its HTTP status, its OpenAI-style
 * error type and a default message. `docs/errors.md` documents each one; a test checks that the
 * two agree.
 */

export interface ErrorDefinition {
  status: number;
  type: string;
  message: string;
  /** 409s that a retry cannot fix carry `x-should-retry: false` (LMSP section 2). */
  retryable?: boolean;
}

export const ERROR_CODES = {
  invalid_request: { status: 400, type: 'invalid_request_error', message: 'The request is not valid.' },
  invalid_json: { status: 400, type: 'invalid_request_error', message: 'The request body is not valid JSON.' },
  invalid_idempotency_key: {
    status: 400,
    type: 'invalid_request_error',
    message: 'Idempotency-Key must be 1 to 255 visible ASCII characters.',
  },
  invalid_model_file: { status: 400, type: 'invalid_request_error', message: 'The file is not a usable GGUF model.' },
  context_length_exceeded: {
    status: 400,
    type: 'invalid_request_error',
    message: 'The input and max_output_tokens do not fit in the model context.',
  },
  unsupported_schema: {
    status: 400,
    type: 'invalid_request_error',
    message: 'The JSON Schema uses a keyword the service cannot enforce.',
  },
  invalid_token: { status: 401, type: 'authentication_error', message: 'Missing, unknown or revoked token.' },
  invalid_pairing_code: {
    status: 401,
    type: 'authentication_error',
    message: 'The pairing code is wrong, already used or expired.',
  },
  insufficient_scope: { status: 403, type: 'permission_error', message: 'The token lacks the scope this needs.' },
  origin_not_allowed: {
    status: 403,
    type: 'permission_error',
    message: "Requests from this Origin are not allowed: only the service's own pages and --allowed-origins may call it.",
  },
  not_found: { status: 404, type: 'not_found_error', message: 'Not found.' },
  model_not_found: { status: 404, type: 'not_found_error', message: 'The model is not registered.' },
  task_not_cancellable: {
    status: 409,
    type: 'conflict_error',
    message: 'The task has already finished and cannot be cancelled.',
    retryable: false,
  },
  response_not_finished: {
    status: 409,
    type: 'conflict_error',
    message: 'The response has not finished yet.',
    retryable: false,
  },
  model_in_use: {
    status: 409,
    type: 'conflict_error',
    message: 'An unfinished task uses this model.',
    retryable: false,
  },
  model_exists: {
    status: 409,
    type: 'conflict_error',
    message: 'A model with this id is already registered.',
    retryable: false,
  },
  // A model that a direct answer (an embedding, a chat completion) cannot use: the file is at
  // fault, not the service (LMSP 2, 5), and no retry gets past it until the operator acts.
  model_digest_mismatch: {
    status: 409,
    type: 'conflict_error',
    message: "The model's file changed since it was registered; verify it or register it again.",
    retryable: false,
  },
  idempotency_key_in_flight: {
    status: 409,
    type: 'conflict_error',
    message: 'A request with this Idempotency-Key is still being processed.',
  },
  // LMSP 13: a chat completion answers its task's end in the HTTP status, as OpenAI's API does.
  task_cancelled: {
    status: 409,
    type: 'conflict_error',
    message: 'The task of this request was cancelled before it finished.',
    retryable: false,
  },
  request_timeout: { status: 408, type: 'invalid_request_error', message: 'The request was not received in time.' },
  request_too_large: { status: 413, type: 'invalid_request_error', message: 'The request body is too large.' },
  misdirected_request: {
    status: 421,
    type: 'invalid_request_error',
    message: 'This Host is not served here: use localhost, 127.0.0.1, [::1], the address the service listens on or a name in --allowed-hosts.',
  },
  unsupported_media_type: {
    status: 415,
    type: 'invalid_request_error',
    message: 'Request bodies must be application/json.',
  },
  idempotency_key_reused: {
    status: 422,
    type: 'unprocessable_entity_error',
    message: 'This Idempotency-Key was used with a different request.',
  },
  model_load_failed: {
    status: 422,
    type: 'unprocessable_entity_error',
    message: 'The model cannot be loaded.',
    retryable: false,
  },
  request_header_too_large: { status: 431, type: 'invalid_request_error', message: 'The request headers are too large.' },
  rate_limited: { status: 429, type: 'rate_limit_error', message: 'Too many attempts; try again later.' },
  too_many_streams: { status: 429, type: 'rate_limit_error', message: 'Too many open event streams; close one and try again.' },
  too_many_tasks: { status: 429, type: 'rate_limit_error', message: 'Too many unfinished tasks; wait for some to finish.' },
  internal_error: { status: 500, type: 'server_error', message: 'The service failed unexpectedly.' },
  task_failed: { status: 500, type: 'server_error', message: 'The task of this request failed.', retryable: false },
  // An embedding (answered directly, not as a task) that the engine could not compute though the
  // model loaded: llama.cpp failed or its runner process died on this file. Not a bug of the
  // service, and a retry would meet the same file.
  engine_error: { status: 500, type: 'server_error', message: 'The engine failed to compute this request.', retryable: false },
  // LMSP 7.5, 13: a Chat Completions stream cannot take back chunks it has sent, so one whose
  // attempt is dropped by `on_restart: retry` ends with this error frame while the task goes on.
  task_restarted: {
    status: 500,
    type: 'server_error',
    message: 'The task of this request starts again from the beginning (on_restart: retry); the chunks sent so far are void.',
  },
  storage_unavailable: {
    status: 503,
    type: 'server_error',
    message: 'The database cannot be written (disk full, read-only or locked); the request did nothing.',
  },
} as const satisfies Record<string, ErrorDefinition>;

export type ErrorCode = keyof typeof ERROR_CODES;

/** Codes a task can fail with (LMSP section 9); they appear in `error.code` of tasks and responses. */
export const TASK_ERROR_CODES = [
  'server_restarted',
  'model_not_found',
  'model_load_failed',
  'model_digest_mismatch',
  'context_length_exceeded',
  'engine_error',
  // LMSP 5.1: a model pull fails with these as well.
  'download_failed',
  'invalid_model_file',
  'model_exists',
] as const;
export type TaskErrorCode = (typeof TASK_ERROR_CODES)[number];

/**
 * The OpenAI-style `type` of a task's error: that of the HTTP error with the same code, and
 * `server_error` for the codes only tasks have (`server_restarted`, `download_failed`).
 */
export function taskErrorType(code: string): string {
  return (ERROR_CODES as Record<string, ErrorDefinition>)[code]?.type ?? 'server_error';
}

export interface ErrorBody {
  error: { type: string; code: string; message: string; param: string | null };
}

/** An error meant for the client: it carries a documented code and becomes an HTTP answer. */
export class ServiceError extends Error {
  readonly code: ErrorCode;
  readonly param: string | null;
  readonly headers: Record<string, string>;

  constructor(code: ErrorCode, message?: string, options: { param?: string | null; headers?: Record<string, string>; cause?: unknown } = {}) {
    super(message ?? ERROR_CODES[code].message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'ServiceError';
    this.code = code;
    this.param = options.param ?? null;
    this.headers = options.headers ?? {};
  }

  get status(): number {
    return ERROR_CODES[this.code].status;
  }

  toBody(): ErrorBody {
    return { error: { type: ERROR_CODES[this.code].type, code: this.code, message: this.message, param: this.param } };
  }
}

/** Task errors that are the model file's fault, not the service's (LMSP 2, 5). */
const MODEL_FAULTS: ReadonlySet<string> = new Set<TaskErrorCode>(['model_not_found', 'model_digest_mismatch', 'model_load_failed']);

/**
 * A request answered directly (an embedding, a chat completion) that failed on its model: the
 * model's fault as a client error naming `model`, never a 5xx; null for any other failure.
 */
export function modelFaultError(code: TaskErrorCode, message: string): ServiceError | null {
  return MODEL_FAULTS.has(code) ? new ServiceError(code as 'model_not_found' | 'model_digest_mismatch' | 'model_load_failed', message, { param: 'model' }) : null;
}

/**
 * How a task's `engine_error` begins when the model's chat template refused the messages (a
 * Jinja `raise_exception`, as Gemma's and Mistral's do for roles that do not alternate): the
 * request's own messages are at fault, not the service.
 */
export const TEMPLATE_REFUSAL = "the model's chat template refused these messages: ";

/** A direct answer's error for a task that failed on its template's refusal: 400 naming the input. */
export function templateRefusalError(code: TaskErrorCode, message: string, param: string): ServiceError | null {
  return code === 'engine_error' && message.startsWith(TEMPLATE_REFUSAL) ? new ServiceError('invalid_request', message, { param }) : null;
}

/** Shorthand for the most common client error: a field with a wrong type or value. */
export function invalidRequest(param: string | null, message: string): ServiceError {
  return new ServiceError('invalid_request', message, { param });
}

/** The database refused a write (LMSP 9: 503 `storage_unavailable`, the request did nothing). */
export function isStorageUnavailable(error: unknown): error is ServiceError {
  return error instanceof ServiceError && error.code === 'storage_unavailable';
}
