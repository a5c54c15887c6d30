/**
 * The download engine of model pulls (LMSP 5.1). `downloadModel` fetches a source into
 * `<modelsDir>/<id>.gguf.partial`, then, once the file is whole, hashed and validated, moves it
 * to `<modelsDir>/<id>.gguf` and answers its size and `sha256:<hex>` digest. It knows nothing of
 * tasks: the `model_pull` task calls it, records what it reports, and decides what a failure
 * means for the task.
 *
 * - Sources: see pull-source.ts. `HF_TOKEN` is sent to the endpoint's origin only, and never
 *   again once a redirect has left it (Hugging Face redirects resolve/ URLs to a CDN).
 * - Resume: the partial file is the state. When it holds bytes, the request carries
 *   `Range: bytes=<size>-` (and `If-Range` with the ETag, or a strong Last-Modified, recorded
 *   before); a 206 from that offset is appended, a 200 starts the file over from byte 0, and a
 *   416 naming exactly the partial's size means the file is already whole. A range answer that
 *   cannot be used (another offset, another ETag or size) starts over with a plain GET. Node's
 *   Hash cannot be saved, so a resume first re-hashes the partial file (at the speed of SHA-256
 *   over the page cache; bench/pull.ts measures it), overlapped with opening the request.
 * - Resume state: `onResumeState` receives the URL, validator and total size of every answer
 *   before its first byte is written, and the download waits for it, so a caller that commits
 *   it to its database never holds bytes on disk that its record does not describe. The caller
 *   passes it back as `resume`. A database row rather than a sidecar file: one durable record
 *   per task, nothing else to clean up next to the partial file.
 * - Integrity: the first four bytes must be the GGUF magic (checked as they arrive; the
 *   connection is dropped at once otherwise). A body longer than declared, a Content-Length
 *   that disagrees with Content-Range, or a final size other than the declared total fails
 *   with `length_mismatch`; then the expected digest, if given, and the caller's `validate`
 *   hook run on the whole file before it is moved into place.
 * - Failures are `DownloadError`s (download-errors.ts): `resumable` ones (connection lost or
 *   refused, idle timeout, 408/429/5xx) keep the partial file for a later attempt; final ones
 *   remove it. An abort through `signal` stops within a second, keeps the partial file and
 *   rejects with `DownloadAbortedError`; the caller removes the file on a cancel.
 * - Progress: `onProgress` at most once per `progressIntervalMs` (default 1000), and only when
 *   bytes arrived since the last call, with the bytes of the file so far, the total when known,
 *   and the rate over that interval; bytes not reported yet are reported when the interval is
 *   up, even if no more arrive, and before a failure or an abort is thrown.
 * - Durability: the partial file is flushed in the background every 32 MiB, fsynced before it
 *   is moved, and the folder fsynced after; the move is a hard link then an unlink, so a
 *   target that already exists is never overwritten (`target_exists`). Two downloads of the
 *   same id at once are the caller's to prevent.
 *
 * Written on its own HTTP/1.1 client (download-http.ts says why not node:http) rather than
 * node-llama-cpp's downloader (`createModelDownloader`, on `ipull`): ipull writes to a `.ipull`
 * file of its own naming with its progress stored inside it, fetches a file in three parallel
 * ranges by default (so it cannot be hashed as it arrives, and a resume would re-read it
 * anyway), renames it into place before the caller could verify it, leaves the token to fetch's
 * own redirect handling, and has no If-Range, no early magic check and no way to tell a dropped
 * connection from a final failure.
 */
import { createHash } from 'node:crypto';
import { lstat, mkdir, statfs } from 'node:fs/promises';
import { join } from 'node:path';
import { ServiceError } from '../domain/errors.js';
import { MODEL_ID_PATTERN } from '../domain/models.js';
import { GGUF_MAGIC, ProgressReporter, fileFailure, receiveBody, type DownloadProgress, type FileState } from './download-body.js';
import { DownloadAbortedError, DownloadError, describeUrl } from './download-errors.js';
import { openDownload, type BearerToken, type OpenedResponse } from './download-http.js';
import { ifRangeOf, planBody, resumeStateOf, type BodyPlan, type ResumeState } from './download-plan.js';
import { hashPrefix, openPartialFile, partialSize, publishPartial, removePartial, type OpenPartialSink } from './partial-file.js';
import { DEFAULT_PULL_IDLE_TIMEOUT_MS, hfEndpointOrigin, type PullSettings, type PullSource } from './pull-source.js';

export type { DownloadProgress } from './download-body.js';
export type { ResumeState } from './download-plan.js';

export interface DownloadOptions {
  source: PullSource;
  settings: PullSettings;
  modelsDir: string;
  id: string;
  /** `sha256:<hex>`; a different digest fails with `model_digest_mismatch`. */
  expectedDigest?: string | null;
  /** What an earlier attempt reported through `onResumeState`. */
  resume?: ResumeState | null;
  onResumeState?: (state: ResumeState) => void | Promise<void>;
  onProgress?: (progress: DownloadProgress) => void;
  progressIntervalMs?: number;
  /** Checks the whole file before it is moved into place; throwing fails with `invalid_model_file`. */
  validate?: (path: string) => Promise<void>;
  /**
   * Receives the whole file's digest and size just before it is moved into place, and the move
   * waits for it: a caller that commits them can tell its own file from another after a crash
   * between the move and its own record of the model.
   */
  beforePublish?: (file: { digest: string; sizeBytes: number }) => void | Promise<void>;
  signal?: AbortSignal;
  /** The connection is dropped (resumable) after this long without a byte; default the settings' (30 s). */
  idleTimeoutMs?: number;
  /** Certificates trusted for https instead of the system's; tests serve https with their own. */
  trustedCertificates?: string | Buffer;
  /** Where bytes are written; tests pass one that fails like a full disk. */
  openPartial?: OpenPartialSink;
  /** The free bytes of the models directory's disk (null: unknown); tests pass a small disk. */
  diskFree?: (modelsDir: string) => Promise<number | null>;
}

async function statfsFree(modelsDir: string): Promise<number | null> {
  const disk = await statfs(modelsDir).catch(() => null);
  return disk ? disk.bavail * disk.bsize : null;
}

export interface DownloadResult {
  path: string;
  sizeBytes: number;
  digest: string;
  /** Bytes that were already on disk when this call started and were kept. */
  resumedFromBytes: number;
  /** Body bytes received over the network by this call. */
  transferredBytes: number;
}

/** Answers that cannot continue a range are followed by a plain GET; this many at most. */
const MAX_RESTARTS = 3;
/** What a pull leaves free on the models directory's disk: room for the database, its WAL and the logs. */
export const DISK_RESERVE_BYTES = 256 * 1024 * 1024;

export function partialPathOf(modelsDir: string, id: string): string {
  return join(modelsDir, `${id}.gguf.partial`);
}

export function modelPathOf(modelsDir: string, id: string): string {
  return join(modelsDir, `${id}.gguf`);
}

class Download {
  private readonly partial: string;
  private readonly target: string;
  private readonly signal: AbortSignal;
  private readonly bearer: BearerToken | null;
  private readonly openPartial: OpenPartialSink;
  private readonly progress: ProgressReporter;
  private recorded: ResumeState | null;
  private transferred = 0;

  constructor(private readonly options: DownloadOptions) {
    this.partial = partialPathOf(options.modelsDir, options.id);
    this.target = modelPathOf(options.modelsDir, options.id);
    this.signal = options.signal ?? new AbortController().signal;
    const token = options.settings.hfToken;
    this.bearer = token ? { origin: hfEndpointOrigin(options.settings), token } : null;
    this.openPartial = options.openPartial ?? openPartialFile;
    this.recorded = options.resume ?? null;
    this.progress = new ProgressReporter(options.onProgress, options.progressIntervalMs ?? 1000);
  }

  async run(): Promise<DownloadResult> {
    try {
      await mkdir(this.options.modelsDir, { recursive: true });
      // lstat: a link there, even one that leads nowhere, is not replaced either.
      if (await lstat(this.target).then(() => true, () => false)) {
        throw new DownloadError('target_exists', `a file named ${this.options.id}.gguf already exists in the models directory`);
      }
      // A record of another URL describes other bytes: start over.
      if (this.recorded && this.recorded.url !== this.options.source.url) this.recorded = null;
      let onDisk = this.options.resume && !this.recorded ? 0 : await partialSize(this.partial);
      // More bytes than the file has are no prefix of it (something else wrote them): start over.
      if (this.recorded?.totalBytes != null && onDisk > this.recorded.totalBytes) onDisk = 0;
      const file = await this.fetchFile(onDisk);
      this.progress.finish(file.state.size, file.totalBytes);
      return await this.finish(file.state, file.totalBytes, Math.min(onDisk, file.keptBytes));
    } catch (error) {
      this.progress.end();
      throw await this.settleFailure(error);
    }
  }

  /** Fetches until the partial file is whole; answers its state and declared size. */
  private async fetchFile(onDisk: number): Promise<{ state: FileState; totalBytes: number | null; keptBytes: number }> {
    let offset = onDisk;
    let keptBytes = onDisk;
    let restarts = 0;
    /** The file as hashed so far, when it is still current (a continued range needs no re-hash). */
    let known: FileState | null = null;
    for (;;) {
      this.signal.throwIfAborted();
      const ifRange = offset > 0 ? ifRangeOf(this.recorded) : null;
      const headers: Record<string, string> = offset > 0 ? { range: `bytes=${offset}-`, ...(ifRange ? { 'if-range': ifRange } : {}) } : {};
      // The re-hash of a resumed file overlaps the round trip of the request.
      const prefix = known?.size === offset ? Promise.resolve(known) : hashPrefix(this.partial, offset, this.signal).then((hashed) => ({ size: offset, ...hashed }));
      const [hashed, opened] = await Promise.allSettled([prefix, this.open(headers)]);
      if (hashed.status === 'rejected' || opened.status === 'rejected') {
        if (opened.status === 'fulfilled') opened.value.discard();
        throw hashed.status === 'rejected' ? hashed.reason : (opened as PromiseRejectedResult).reason;
      }
      const state: FileState = hashed.value;
      const response = opened.value;
      if (offset > 0 && !GGUF_MAGIC.subarray(0, Math.min(4, offset)).equals(state.head)) {
        // Not the start of a GGUF file: whatever wrote it, these bytes cannot be continued.
        response.discard();
        offset = keptBytes = 0;
        continue;
      }
      const plan = planBody({
        requestedFrom: offset, recorded: this.recorded, status: response.status,
        statusMessage: response.statusMessage, headers: response.headers, url: response.url,
      });
      if (plan.kind === 'complete') {
        response.discard();
        return { state, totalBytes: plan.totalBytes, keptBytes };
      }
      if (plan.kind === 'restart') {
        response.discard();
        if (++restarts > MAX_RESTARTS) throw new DownloadError('range_unusable', `${describeUrl(response.url)}: ${plan.why}, again and again`);
        offset = keptBytes = 0;
        continue;
      }
      if (plan.from === 0 && offset > 0) {
        Object.assign(state, { size: 0, hash: createHash('sha256'), head: Buffer.alloc(0) });
        keptBytes = 0;
      }
      await this.recordResumeState(resumeStateOf(this.options.source.url, response.headers, plan.totalBytes));
      await this.writeBody(response, plan, state);
      offset = state.size;
      known = state;
      // A server may answer an open range with less than the rest: ask again from there.
      if (plan.totalBytes !== null && offset < plan.totalBytes) continue;
      return { state, totalBytes: plan.totalBytes, keptBytes };
    }
  }

  private open(headers: Record<string, string>): Promise<OpenedResponse> {
    return openDownload(this.options.source.url, {
      headers, bearer: this.bearer, signal: this.signal,
      idleTimeoutMs: this.options.idleTimeoutMs ?? this.options.settings.idleTimeoutMs ?? DEFAULT_PULL_IDLE_TIMEOUT_MS,
      ca: this.options.trustedCertificates,
    });
  }

  private async recordResumeState(state: ResumeState): Promise<void> {
    this.recorded = state;
    await this.options.onResumeState?.(state);
  }

  private async writeBody(opened: OpenedResponse, plan: Extract<BodyPlan, { kind: 'write' }>, state: FileState): Promise<void> {
    const room = await this.assertRoomFor(plan).catch((error: unknown) => {
      opened.discard();
      throw error;
    });
    const sink = await this.openPartial(this.partial, plan.from === 0 ? 'truncate' : 'append').catch((error: NodeJS.ErrnoException) => {
      opened.discard();
      throw fileFailure(error);
    });
    this.transferred += await receiveBody({ opened, plan, state, sink, progress: this.progress, signal: this.signal, ...(room === null ? {} : { room }) });
  }

  /**
   * A body whose size is declared must fit the free space of the models directory, less
   * `DISK_RESERVE_BYTES`, before a byte of it is written: a server (or a typo) declaring a file
   * larger than the disk fails at once, instead of filling the disk that the database and
   * everything else share, and a file that would just fit does not leave the database without
   * room for its next commit. Not resumable: the space will not appear by asking again. A body
   * of unknown size (no Content-Length: chunked, or ended by closing) answers the room it may
   * take, the same free space less the reserve, and is stopped past it: a server that sends
   * without end fills neither the disk nor the database's room.
   */
  private async assertRoomFor(plan: Extract<BodyPlan, { kind: 'write' }>): Promise<number | null> {
    const needed = plan.bodyBytes ?? (plan.totalBytes === null ? null : plan.totalBytes - plan.from);
    const diskFree = await (this.options.diskFree ?? statfsFree)(this.options.modelsDir);
    if (diskFree === null) return null; // a file system that cannot say: ENOSPC still stops the download
    // Starting over truncates the partial file, whose bytes count as free.
    const free = diskFree + (plan.from === 0 ? await partialSize(this.partial) : 0);
    if (needed === null) return Math.max(0, free - DISK_RESERVE_BYTES);
    if (needed > free - DISK_RESERVE_BYTES) {
      throw new DownloadError('disk_full', `not enough free disk space in the models directory: the model file needs ${needed} more bytes, ${free} are free and ${DISK_RESERVE_BYTES} stay free for the database`);
    }
    return null;
  }

  private async finish(state: FileState, totalBytes: number | null, resumedFromBytes: number): Promise<DownloadResult> {
    const url = this.options.source.url;
    if (totalBytes !== null && state.size !== totalBytes) {
      throw new DownloadError('length_mismatch', `${describeUrl(url)} declared ${totalBytes} bytes but the file has ${state.size}`);
    }
    if (state.size < GGUF_MAGIC.length) throw new DownloadError('not_gguf', `${describeUrl(url)} is too short to be a GGUF file`);
    // What was hashed must be what is on disk: a lost write is caught here at the latest.
    const onDisk = await partialSize(this.partial);
    if (onDisk !== state.size) throw new DownloadError('file_error', `the model file has ${onDisk} bytes on disk, not the ${state.size} received`);
    const digest = `sha256:${state.hash.digest('hex')}`;
    const expected = this.options.expectedDigest;
    if (expected && digest !== expected) {
      throw new DownloadError('digest_mismatch', `the downloaded file's digest is ${digest}, not the expected ${expected}`);
    }
    if (this.options.validate) {
      try {
        await this.options.validate(this.partial);
      } catch (error) {
        const message = error instanceof Error ? error.message : String(error);
        throw new DownloadError('invalid_model_file', message, { cause: error });
      }
    }
    await this.options.beforePublish?.({ digest, sizeBytes: state.size });
    if ((await publishPartial(this.partial, this.target)) === 'exists') {
      throw new DownloadError('target_exists', `a file named ${this.options.id}.gguf appeared in the models directory; it was not replaced`);
    }
    return { path: this.target, sizeBytes: state.size, digest, resumedFromBytes, transferredBytes: this.transferred };
  }

  /** Turns any failure into what the caller gets, removing the partial file when final. */
  private async settleFailure(error: unknown): Promise<Error> {
    if (this.signal.aborted && !(error instanceof DownloadError && !error.resumable)) {
      return new DownloadAbortedError(await partialSize(this.partial).catch(() => 0), this.signal.reason);
    }
    let failure: DownloadError;
    if (error instanceof DownloadError) failure = error;
    // A system error of the file system (it names its system call); anything else, such as a
    // failure of the caller's onResumeState, is the caller's own and keeps the partial file.
    else if (typeof (error as NodeJS.ErrnoException)?.syscall === 'string') failure = fileFailure(error as NodeJS.ErrnoException);
    else return error instanceof Error ? error : new Error(String(error));
    if (!failure.resumable) await removePartial(this.partial).catch(() => undefined);
    return failure;
  }
}

/** Downloads a model file (see the top of this file); rejects with DownloadError or DownloadAbortedError. */
export async function downloadModel(options: DownloadOptions): Promise<DownloadResult> {
  if (!MODEL_ID_PATTERN.test(options.id)) throw new ServiceError('invalid_request', 'the model id is not valid', { param: 'id' });
  if (options.expectedDigest && !/^sha256:[0-9a-f]{64}$/.test(options.expectedDigest)) {
    throw new ServiceError('invalid_request', "digest must be 'sha256:' followed by 64 lower-case hexadecimal digits", { param: 'digest' });
  }
  return new Download(options).run();
}
