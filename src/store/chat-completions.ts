/** The `chat_completions` table (LMSP 13): what was asked, and the message once the task finished. */
import type {
  ChatCompletionHeader, ChatCompletionMessage, ChatCompletionRequest, ChatToolCall, StoredChatCompletion,
} from '../domain/chat-completions.js';
import type { Sqlite } from './db.js';

export interface DbChatCompletion {
  seq: number;
  id: string;
  client_id: string;
  model: string;
  created_at: number;
  stream: number;
  store: number;
  include_usage: number;
  system_fingerprint: string;
  metadata: string;
  request: string;
  messages: string;
  output_text: string | null;
  tool_calls: string | null;
}

type DbChatCompletionHeader = Omit<DbChatCompletion, 'messages' | 'output_text' | 'tool_calls'>;

const HEADER_COLUMNS = ['seq', 'id', 'client_id', 'model', 'created_at', 'stream', 'store', 'include_usage', 'system_fingerprint',
  'metadata', 'request'] as const;

function toHeader(row: DbChatCompletionHeader): ChatCompletionHeader {
  return {
    id: row.id,
    clientId: row.client_id,
    model: row.model,
    createdAt: row.created_at,
    stream: row.stream === 1,
    store: row.store === 1,
    includeUsage: row.include_usage === 1,
    systemFingerprint: row.system_fingerprint,
    metadata: JSON.parse(row.metadata) as Record<string, string>,
    request: JSON.parse(row.request) as ChatCompletionRequest,
  };
}

function toStored(row: DbChatCompletion): StoredChatCompletion {
  return {
    ...toHeader(row),
    messages: JSON.parse(row.messages) as ChatCompletionMessage[],
    outputText: row.output_text,
    toolCalls: row.tool_calls === null ? null : JSON.parse(row.tool_calls) as ChatToolCall[],
  };
}

export interface ChatCompletionListQuery {
  /** Only this client's completions; null for all (admin). */
  clientId: string | null;
  model: string | null;
  /** Every pair must be in the completion's metadata. */
  metadata: Record<string, string>;
  /** Cursor: completions after this one in the list's order. */
  afterSeq: number | null;
  limit: number;
  order: 'asc' | 'desc';
}

export class ChatCompletionTable {
  private readonly insertStatement;
  private readonly getStatement;
  private readonly getHeaderStatement;
  private readonly seqStatement;
  private readonly setOutputStatement;
  private readonly setMetadataStatement;
  private readonly deleteStatement;
  private readonly listAscStatement;
  private readonly listDescStatement;

  constructor(db: Sqlite) {
    this.insertStatement = db.prepare(`
      INSERT INTO chat_completions (id, client_id, model, created_at, stream, store, include_usage, system_fingerprint, metadata,
        request, messages, output_text, tool_calls)
      VALUES (@id, @client_id, @model, @created_at, @stream, @store, @include_usage, @system_fingerprint, @metadata,
        @request, @messages, NULL, NULL)`);
    this.getStatement = db.prepare<[string], DbChatCompletion>('SELECT * FROM chat_completions WHERE id = ?');
    this.getHeaderStatement = db.prepare<[string], DbChatCompletionHeader>(
      `SELECT ${HEADER_COLUMNS.join(', ')} FROM chat_completions WHERE id = ?`);
    this.seqStatement = db.prepare<[string], number>('SELECT seq FROM chat_completions WHERE id = ?').pluck();
    this.setOutputStatement = db.prepare('UPDATE chat_completions SET output_text = ?, tool_calls = ? WHERE id = ?');
    this.setMetadataStatement = db.prepare('UPDATE chat_completions SET metadata = ? WHERE id = ?');
    this.deleteStatement = db.prepare('DELETE FROM chat_completions WHERE id = ?');
    const where = `store = 1 AND (@client_id IS NULL OR client_id = @client_id) AND (@model IS NULL OR model = @model)
      AND NOT EXISTS (SELECT 1 FROM json_each(@metadata) f
        WHERE (SELECT m.value FROM json_each(chat_completions.metadata) m WHERE m.key = f.key) IS NOT f.value)`;
    this.listAscStatement = db.prepare<object, DbChatCompletion>(
      `SELECT * FROM chat_completions WHERE ${where} AND seq > @after ORDER BY seq ASC LIMIT @limit`);
    this.listDescStatement = db.prepare<object, DbChatCompletion>(
      `SELECT * FROM chat_completions WHERE ${where} AND seq < @after ORDER BY seq DESC LIMIT @limit`);
  }

  insert(completion: StoredChatCompletion): void {
    this.insertStatement.run({
      id: completion.id,
      client_id: completion.clientId,
      model: completion.model,
      created_at: completion.createdAt,
      stream: completion.stream ? 1 : 0,
      store: completion.store ? 1 : 0,
      include_usage: completion.includeUsage ? 1 : 0,
      system_fingerprint: completion.systemFingerprint,
      metadata: JSON.stringify(completion.metadata),
      request: JSON.stringify(completion.request),
      messages: JSON.stringify(completion.messages),
    });
  }

  get(id: string): StoredChatCompletion | null {
    const row = this.getStatement.get(id);
    return row ? toStored(row) : null;
  }

  /** Without the conversation and the output. */
  getHeader(id: string): ChatCompletionHeader | null {
    const row = this.getHeaderStatement.get(id);
    return row ? toHeader(row) : null;
  }

  /** The completion's position in creation order (a list cursor). */
  seqOf(id: string): number | null {
    return this.seqStatement.get(id) ?? null;
  }

  /** The final message, once the task has finished. */
  setOutput(id: string, text: string, toolCalls: readonly ChatToolCall[]): void {
    this.setOutputStatement.run(text, toolCalls.length > 0 ? JSON.stringify(toolCalls) : null, id);
  }

  setMetadata(id: string, metadata: Record<string, string>): void {
    this.setMetadataStatement.run(JSON.stringify(metadata), id);
  }

  delete(id: string): void {
    this.deleteStatement.run(id);
  }

  /** Stored completions (`store: true`), a page at a time. */
  list(query: ChatCompletionListQuery): { completions: StoredChatCompletion[]; hasMore: boolean } {
    const statement = query.order === 'asc' ? this.listAscStatement : this.listDescStatement;
    const rows = statement.all({
      client_id: query.clientId,
      model: query.model,
      metadata: JSON.stringify(query.metadata),
      after: query.afterSeq ?? (query.order === 'asc' ? 0 : Number.MAX_SAFE_INTEGER),
      limit: query.limit + 1,
    });
    return { completions: rows.slice(0, query.limit).map(toStored), hasMore: rows.length > query.limit };
  }
}
