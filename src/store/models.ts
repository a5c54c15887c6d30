/** The `models` table: metadata and digests only; the files stay on disk (LMSP 11.1). */
import type { Model, ModelStatus } from '../domain/models.js';
import type { Sqlite } from './db.js';
import { ReadCache } from './read-cache.js';

export interface DbModel {
  id: string;
  path: string;
  digest: string;
  size_bytes: number;
  mtime_ms: number;
  file_identity: string | null;
  architecture: string | null;
  context_length: number | null;
  parameters: number | null;
  quantization: string | null;
  tokenizer: string | null;
  status: ModelStatus;
  builtin: number;
  created_at: number;
  verified_at: number | null;
}

export function toModel(row: DbModel): Model {
  return {
    id: row.id,
    path: row.path,
    digest: row.digest,
    sizeBytes: row.size_bytes,
    mtimeMs: row.mtime_ms,
    fileIdentity: row.file_identity,
    architecture: row.architecture,
    contextLength: row.context_length,
    parameters: row.parameters,
    quantization: row.quantization,
    tokenizer: row.tokenizer,
    status: row.status,
    builtin: row.builtin === 1,
    createdAt: row.created_at,
    verifiedAt: row.verified_at,
  };
}

export class ModelTable {
  private readonly insertStatement;
  private readonly getStatement;
  private readonly listStatement;
  private readonly deleteStatement;
  private readonly updateFileStatement;
  private readonly setStatusStatement;
  /** Every create looks its model up: cached, dropped on any change (read-cache.ts). */
  private readonly cache: ReadCache<string, Model>;

  constructor(db: Sqlite) {
    this.cache = new ReadCache(db);
    this.insertStatement = db.prepare(`
      INSERT INTO models (id, path, digest, size_bytes, mtime_ms, file_identity, architecture, context_length, parameters,
        quantization, tokenizer, status, builtin, created_at, verified_at)
      VALUES (@id, @path, @digest, @size_bytes, @mtime_ms, @file_identity, @architecture, @context_length, @parameters,
        @quantization, @tokenizer, @status, @builtin, @created_at, @verified_at)`);
    this.getStatement = db.prepare<[string], DbModel>('SELECT * FROM models WHERE id = ?');
    this.listStatement = db.prepare<[], DbModel>('SELECT * FROM models ORDER BY created_at, id');
    this.deleteStatement = db.prepare('DELETE FROM models WHERE id = ?');
    this.updateFileStatement = db.prepare(`
      UPDATE models SET path = @path, digest = @digest, size_bytes = @size_bytes, mtime_ms = @mtime_ms,
        file_identity = @file_identity,        architecture = @architecture, context_length = @context_length, parameters = @parameters,
        quantization = @quantization, tokenizer = @tokenizer, status = @status, verified_at = @verified_at
      WHERE id = @id`);
    this.setStatusStatement = db.prepare('UPDATE models SET status = ?, verified_at = coalesce(?, verified_at) WHERE id = ?');
  }

  private params(model: Model) {
    return {
      id: model.id,
      path: model.path,
      digest: model.digest,
      size_bytes: model.sizeBytes,
      mtime_ms: model.mtimeMs,
      file_identity: model.fileIdentity,
      architecture: model.architecture,
      context_length: model.contextLength,
      parameters: model.parameters,
      quantization: model.quantization,
      tokenizer: model.tokenizer,
      status: model.status,
      builtin: model.builtin ? 1 : 0,
      created_at: model.createdAt,
      verified_at: model.verifiedAt,
    };
  }

  insert(model: Model): void {
    this.cache.clear();
    this.insertStatement.run(this.params(model));
  }

  get(id: string): Model | null {
    return this.cache.get(id, () => {
      const row = this.getStatement.get(id);
      return row ? toModel(row) : null;
    });
  }

  list(): Model[] {
    return this.listStatement.all().map(toModel);
  }

  delete(id: string): boolean {
    this.cache.clear();
    return this.deleteStatement.run(id).changes > 0;
  }

  /** Records what the file is now: path, digest, size, mtime, identity, GGUF facts and status. */
  updateFile(model: Model): void {
    this.cache.clear();
    const { created_at: _created, builtin: _builtin, ...params } = this.params(model);
    this.updateFileStatement.run(params);
  }

  setStatus(id: string, status: ModelStatus, verifiedAt: number | null = null): void {
    this.cache.clear();
    this.setStatusStatement.run(status, verifiedAt, id);
  }
}
