/** The `responses` table: what was asked (request fields, input, context) and the final text. */
import type {
  ChatMessage, FunctionCallOutput, FunctionTool, ResponseHeader, ResponseInputItem, ResponseToolChoice, StoredResponse, TextFormat,
} from '../domain/responses.js';
import type { Sqlite } from './db.js';

export interface DbResponse {
  id: string;
  client_id: string;
  model: string;
  created_at: number;
  background: number;
  stream: number;
  store: number;
  instructions: string | null;
  previous_response_id: string | null;
  max_output_tokens: number;
  temperature: number;
  top_p: number;
  seed: number;
  metadata: string;
  input_items: string;
  context: string;
  output_item_id: string;
  output_text: string | null;
  text_format: string | null;
  tools: string | null;
  tool_choice: string | null;
  parallel_tool_calls: number;
  truncation: 'disabled' | 'auto';
  output_calls: string | null;
}

export type DbResponseHeader = Omit<DbResponse, 'input_items' | 'context' | 'output_text' | 'output_calls'>;

/** The columns of a response's header: everything but the input, the context and the final text. */
export const RESPONSE_HEADER_COLUMNS = ['id', 'client_id', 'model', 'created_at', 'background', 'stream', 'store', 'instructions',
  'previous_response_id', 'max_output_tokens', 'temperature', 'top_p', 'seed', 'metadata', 'output_item_id',
  'text_format', 'tools', 'tool_choice', 'parallel_tool_calls', 'truncation'] as const;

export function toResponseHeader(row: DbResponseHeader): ResponseHeader {
  return {
    id: row.id,
    clientId: row.client_id,
    model: row.model,
    createdAt: row.created_at,
    background: row.background === 1,
    stream: row.stream === 1,
    store: row.store === 1,
    instructions: row.instructions,
    previousResponseId: row.previous_response_id,
    maxOutputTokens: row.max_output_tokens,
    temperature: row.temperature,
    topP: row.top_p,
    seed: row.seed,
    metadata: JSON.parse(row.metadata) as Record<string, string>,
    outputItemId: row.output_item_id,
    ...(row.text_format === null ? {} : { textFormat: JSON.parse(row.text_format) as TextFormat }),
    ...(row.tools === null ? {} : { tools: JSON.parse(row.tools) as FunctionTool[] }),
    ...(row.tool_choice === null ? {} : { toolChoice: JSON.parse(row.tool_choice) as ResponseToolChoice }),
    parallelToolCalls: row.parallel_tool_calls === 1,
    truncation: row.truncation,
  };
}

export function toStoredResponse(row: DbResponse): StoredResponse {
  return {
    ...toResponseHeader(row),
    inputItems: JSON.parse(row.input_items) as ResponseInputItem[],
    context: JSON.parse(row.context) as ChatMessage[],
    outputText: row.output_text,
    outputCalls: row.output_calls === null ? null : JSON.parse(row.output_calls) as FunctionCallOutput[],
  };
}

export class ResponseTable {
  private readonly insertStatement;
  private readonly getStatement;
  private readonly getHeaderStatement;
  private readonly setOutputTextStatement;
  private readonly outputTextStatement;
  private readonly deleteStatement;
  private readonly setOutputCallsStatement;
  private readonly outputCallsStatement;
  private readonly recentWithItemStatement;

  constructor(db: Sqlite) {
    this.insertStatement = db.prepare(`
      INSERT INTO responses (id, client_id, model, created_at, background, stream, store, instructions,
        previous_response_id, max_output_tokens, temperature, top_p, seed, metadata, input_items, context,
        output_item_id, output_text, text_format, tools, tool_choice, parallel_tool_calls, truncation)
      VALUES (@id, @client_id, @model, @created_at, @background, @stream, @store, @instructions,
        @previous_response_id, @max_output_tokens, @temperature, @top_p, @seed, @metadata, @input_items, @context,
        @output_item_id, @output_text, @text_format, @tools, @tool_choice, @parallel_tool_calls, @truncation)`);
    this.getStatement = db.prepare<[string], DbResponse>('SELECT * FROM responses WHERE id = ?');
    this.getHeaderStatement = db.prepare<[string], DbResponseHeader>(
      `SELECT ${RESPONSE_HEADER_COLUMNS.join(', ')} FROM responses WHERE id = ?`);
    this.setOutputTextStatement = db.prepare('UPDATE responses SET output_text = ? WHERE id = ?');
    this.outputTextStatement = db.prepare<[string], { output_text: string | null }>('SELECT output_text FROM responses WHERE id = ?');
    this.deleteStatement = db.prepare('DELETE FROM responses WHERE id = ?');
    this.setOutputCallsStatement = db.prepare('UPDATE responses SET output_calls = ? WHERE id = ?');
    this.outputCallsStatement = db.prepare<[string], { output_calls: string | null }>('SELECT output_calls FROM responses WHERE id = ?');
    // Among the newest rows only: a bounded read, for ids no key leads to.
    this.recentWithItemStatement = db.prepare<[number, string, string], { id: string }>(`
      SELECT id FROM (SELECT id, output_item_id, output_calls FROM responses ORDER BY rowid DESC LIMIT ?)
      WHERE output_item_id = ? OR instr(output_calls, ?) > 0 LIMIT 8`);
  }

  insert(response: StoredResponse): void {
    this.insertStatement.run({
      id: response.id,
      client_id: response.clientId,
      model: response.model,
      created_at: response.createdAt,
      background: response.background ? 1 : 0,
      stream: response.stream ? 1 : 0,
      store: response.store ? 1 : 0,
      instructions: response.instructions,
      previous_response_id: response.previousResponseId,
      max_output_tokens: response.maxOutputTokens,
      temperature: response.temperature,
      top_p: response.topP,
      seed: response.seed,
      metadata: JSON.stringify(response.metadata),
      input_items: JSON.stringify(response.inputItems),
      context: JSON.stringify(response.context),
      output_item_id: response.outputItemId,
      output_text: response.outputText,
      text_format: response.textFormat ? JSON.stringify(response.textFormat) : null,
      tools: response.tools?.length ? JSON.stringify(response.tools) : null,
      tool_choice: response.toolChoice ? JSON.stringify(response.toolChoice) : null,
      parallel_tool_calls: response.parallelToolCalls === false ? 0 : 1,
      truncation: response.truncation ?? 'disabled',
    });
  }

  /**
   * Responses among the newest `recent` whose output message or one of whose function calls may
   * have this item id (a call's is found in its JSON: the caller checks), newest first.
   */
  recentWithItem(itemId: string, recent: number): string[] {
    return this.recentWithItemStatement.all(recent, itemId, JSON.stringify(itemId)).map((row) => row.id);
  }

  get(id: string): StoredResponse | null {
    const row = this.getStatement.get(id);
    return row ? toStoredResponse(row) : null;
  }

  /** The unchanging fields only, without the (possibly long) input and context. */
  getHeader(id: string): ResponseHeader | null {
    const row = this.getHeaderStatement.get(id);
    return row ? toResponseHeader(row) : null;
  }

  /** The final text, once the task has finished. */
  outputText(id: string): string | null {
    return this.outputTextStatement.get(id)?.output_text ?? null;
  }

  setOutputText(id: string, text: string | null): void {
    this.setOutputTextStatement.run(text, id);
  }

  /** LMSP 6.2: the function calls of the finished response. */
  setOutputCalls(id: string, calls: readonly FunctionCallOutput[]): void {
    this.setOutputCallsStatement.run(JSON.stringify(calls), id);
  }

  /** The function calls, once the task has finished (null before, or without tools). */
  outputCalls(id: string): FunctionCallOutput[] | null {
    const text = this.outputCallsStatement.get(id)?.output_calls ?? null;
    return text === null ? null : JSON.parse(text) as FunctionCallOutput[];
  }

  delete(id: string): void {
    this.deleteStatement.run(id);
  }
}
