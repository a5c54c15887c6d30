/**
 * A typed client of an LMSP service, used by the CLI (Ollama's lesson: the CLI is a client like
 * any other) and by the tests.
 */
import { EventSourceParserStream } from 'eventsource-parser/stream';
import type { ChatCompletionObject } from './chat-completions.js';
import type {
  ClientObject, CreateResponseBody, InputItemList, ListObject, ModelObject, PairingCodeObject, ResponseObject, ServiceObject, TaskEvent, TaskObject,
} from './types.js';

export class LmspApiError extends Error {
  override name = 'LmspApiError';
  constructor(readonly status: number, readonly code: string, message: string, readonly param: string | null) {
    super(message);
  }
}

export interface RequestOptions {
  idempotencyKey?: string;
  signal?: AbortSignal;
  headers?: Record<string, string>;
}

export interface ApiAnswer<T> {
  status: number;
  headers: Headers;
  body: T;
}

export interface TaskListQuery {
  status?: string[];
  kind?: string[];
  limit?: number;
  after?: string;
  order?: 'asc' | 'desc';
}

export class LmspClient {
  readonly baseUrl: string;
  private readonly token: string | null;

  constructor(options: { baseUrl: string; token?: string | null }) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.token = options.token ?? null;
  }

  private headers(options: RequestOptions, json: boolean): Record<string, string> {
    return {
      ...(this.token ? { authorization: `Bearer ${this.token}` } : {}),
      ...(json ? { 'content-type': 'application/json' } : {}),
      ...(options.idempotencyKey ? { 'idempotency-key': options.idempotencyKey } : {}),
      ...options.headers,
    };
  }

  async request<T>(method: string, path: string, body?: unknown, options: RequestOptions = {}): Promise<ApiAnswer<T>> {
    const response = await fetch(this.baseUrl + path, {
      method,
      headers: this.headers(options, body !== undefined),
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      ...(options.signal ? { signal: options.signal } : {}),
    });
    const text = await response.text();
    const parsed = text ? (JSON.parse(text) as unknown) : null;
    if (!response.ok) {
      const error = (parsed as { error?: { code?: string; message?: string; param?: string | null } } | null)?.error;
      throw new LmspApiError(response.status, error?.code ?? 'unknown', error?.message ?? response.statusText, error?.param ?? null);
    }
    return { status: response.status, headers: response.headers, body: parsed as T };
  }

  /** Opens a server-sent event stream and yields its events until the server ends it. */
  async *events(method: string, path: string, body?: unknown, options: RequestOptions = {}): AsyncGenerator<TaskEvent> {
    const response = await fetch(this.baseUrl + path, {
      method,
      headers: { ...this.headers(options, body !== undefined), accept: 'text/event-stream' },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      ...(options.signal ? { signal: options.signal } : {}),
    });
    if (!response.ok || !response.body) {
      const text = await response.text();
      const error = (text ? (JSON.parse(text) as { error?: { code?: string; message?: string; param?: string | null } }) : {}).error;
      throw new LmspApiError(response.status, error?.code ?? 'unknown', error?.message ?? response.statusText, error?.param ?? null);
    }
    const stream = response.body.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream());
    for await (const message of stream) yield JSON.parse(message.data) as TaskEvent;
  }

  /** The Prometheus text of GET /metrics (LMSP 15; scope `metrics` or `admin`). */
  async metricsText(): Promise<string> {
    const response = await fetch(`${this.baseUrl}/metrics`, { headers: this.headers({}, false) });
    const text = await response.text();
    if (!response.ok) {
      const error = (JSON.parse(text) as { error?: { code?: string; message?: string; param?: string | null } }).error;
      throw new LmspApiError(response.status, error?.code ?? 'unknown', error?.message ?? response.statusText, error?.param ?? null);
    }
    return text;
  }

  async service(): Promise<ServiceObject> {
    return (await this.request<ServiceObject>('GET', '/v1/service')).body;
  }

  createResponse(body: CreateResponseBody, options?: RequestOptions): Promise<ApiAnswer<ResponseObject>> {
    return this.request('POST', '/v1/responses', body, options);
  }

  streamResponse(body: CreateResponseBody, options?: RequestOptions): AsyncGenerator<TaskEvent> {
    return this.events('POST', '/v1/responses', { ...body, stream: true }, options);
  }

  async getResponse(id: string): Promise<ResponseObject> {
    return (await this.request<ResponseObject>('GET', `/v1/responses/${encodeURIComponent(id)}`)).body;
  }

  followResponse(id: string, startingAfter = 0, options?: RequestOptions): AsyncGenerator<TaskEvent> {
    return this.events('GET', `/v1/responses/${encodeURIComponent(id)}?stream=true&starting_after=${startingAfter}`, undefined, options);
  }

  cancelResponse(id: string, options?: RequestOptions): Promise<ApiAnswer<ResponseObject>> {
    return this.request('POST', `/v1/responses/${encodeURIComponent(id)}/cancel`, undefined, options);
  }

  /** A stored chat completion (LMSP 13). */
  async getChatCompletion(id: string): Promise<ChatCompletionObject> {
    return (await this.request<ChatCompletionObject>('GET', `/v1/chat/completions/${encodeURIComponent(id)}`)).body;
  }

  async deleteResponse(id: string): Promise<{ id: string; deleted: boolean }> {
    return (await this.request<{ id: string; deleted: boolean }>('DELETE', `/v1/responses/${encodeURIComponent(id)}`)).body;
  }

  async inputItems(id: string): Promise<InputItemList> {
    return (await this.request<InputItemList>('GET', `/v1/responses/${encodeURIComponent(id)}/input_items?order=asc&limit=100`)).body;
  }

  async listTasks(query: TaskListQuery = {}): Promise<{ data: TaskObject[]; has_more: boolean; last_id: string | null }> {
    const params = new URLSearchParams();
    if (query.status?.length) params.set('status', query.status.join(','));
    if (query.kind?.length) params.set('kind', query.kind.join(','));
    if (query.limit) params.set('limit', String(query.limit));
    if (query.after) params.set('after', query.after);
    if (query.order) params.set('order', query.order);
    const suffix = params.size > 0 ? `?${params}` : '';
    return (await this.request<{ data: TaskObject[]; has_more: boolean; last_id: string | null }>('GET', `/v1/tasks${suffix}`)).body;
  }

  async getTask(id: string): Promise<TaskObject> {
    return (await this.request<TaskObject>('GET', `/v1/tasks/${encodeURIComponent(id)}`)).body;
  }

  async taskEvents(id: string, startingAfter = 0, limit = 100): Promise<{ data: TaskEvent[]; has_more: boolean }> {
    return (await this.request<{ data: TaskEvent[]; has_more: boolean }>('GET',
      `/v1/tasks/${encodeURIComponent(id)}/events?starting_after=${startingAfter}&limit=${limit}`)).body;
  }

  followTaskEvents(id: string, startingAfter = 0, options?: RequestOptions): AsyncGenerator<TaskEvent> {
    return this.events('GET', `/v1/tasks/${encodeURIComponent(id)}/events?stream=true&starting_after=${startingAfter}`, undefined, options);
  }

  cancelTask(id: string, options?: RequestOptions): Promise<ApiAnswer<TaskObject>> {
    return this.request('POST', `/v1/tasks/${encodeURIComponent(id)}/cancel`, undefined, options);
  }

  /** LMSP 5.1: starts a pull; the answer (202) is its `model_pull` task. */
  pullModel(body: { source: string; id?: string; digest?: string }, options?: RequestOptions): Promise<ApiAnswer<TaskObject>> {
    return this.request('POST', '/v1/models/pull', body, options);
  }

  async listModels(): Promise<ModelObject[]> {
    return (await this.request<{ data: ModelObject[] }>('GET', '/v1/models')).body.data;
  }

  async getModel(id: string): Promise<ModelObject> {
    return (await this.request<ModelObject>('GET', `/v1/models/${encodeURIComponent(id)}`)).body;
  }

  async registerModel(path: string, id?: string, options?: RequestOptions): Promise<ModelObject> {
    return (await this.request<ModelObject>('POST', '/v1/models', id ? { path, id } : { path }, options)).body;
  }

  async deleteModel(id: string): Promise<void> {
    await this.request('DELETE', `/v1/models/${encodeURIComponent(id)}`);
  }

  async verifyModel(id: string): Promise<ModelObject> {
    return (await this.request<ModelObject>('POST', `/v1/models/${encodeURIComponent(id)}/verify`)).body;
  }

  async me(): Promise<ClientObject> {
    return (await this.request<ClientObject>('GET', '/v1/clients/me')).body;
  }

  /** Every client, oldest first, through as many pages as there are. */
  async listClients(): Promise<ClientObject[]> {
    const clients: ClientObject[] = [];
    let after: string | null = null;
    for (;;) {
      const query: string = `?order=asc&limit=1000${after ? `&after=${encodeURIComponent(after)}` : ''}`;
      const page = (await this.request<ListObject<ClientObject> & { last_id: string | null }>('GET', `/v1/clients${query}`)).body;
      clients.push(...page.data);
      if (!page.has_more || !page.last_id) return clients;
      after = page.last_id;
    }
  }

  async revokeClient(id: string): Promise<ClientObject> {
    return (await this.request<ClientObject>('DELETE', `/v1/clients/${encodeURIComponent(id)}`)).body;
  }

  async createPairingCode(options: { name?: string; scopes?: string[]; ttl_seconds?: number } = {}): Promise<PairingCodeObject> {
    return (await this.request<PairingCodeObject>('POST', '/v1/pairing-codes', options)).body;
  }

  async pair(code: string, clientName: string, options?: RequestOptions): Promise<ClientObject & { token: string }> {
    return (await this.request<ClientObject & { token: string }>('POST', '/v1/pair', { code, client_name: clientName }, options)).body;
  }
}
