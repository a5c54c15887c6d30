/**
 * A strict, incremental HTTP/1.1 response parser (RFC 9112) for the model downloader.
 *
 * Why not node:http or undici: the downloader reads its socket into one reused buffer (the
 * `onread` option of net and tls), while they hand each read over in a fresh buffer through
 * streams, which costs about twice the CPU of the rest of a download. So this parser copies no
 * body byte: it hands out views of the caller's buffer and keeps no reference to it after `feed`
 * returns (only an unfinished head or chunk-size line is copied, within its limit).
 *
 * Servers are untrusted: anything outside the grammar is an HttpParseError, memory is bounded by
 * the head limit, and every step of the loop consumes input, so no input makes it spin.
 */

import { quoteShort } from '../text.js';

export type HttpParseReason =
  | 'invalid_status_line' | 'invalid_header' | 'head_too_large' | 'invalid_content_length'
  | 'unsupported_transfer_coding' | 'conflicting_framing' | 'invalid_chunk' | 'excess_data'
  | 'incomplete' | 'switching_protocols';

/** Lower-cased field names; a repeated field's values joined with ', ' (RFC 9110 5.3). */
export type ResponseHeaders = Record<string, string>;

export interface ResponseHead {
  status: number;          // 200..599 (1xx interim answers are skipped)
  statusMessage: string;   // reason phrase, may be ''
  headers: ResponseHeaders;
}

export class HttpParseError extends Error {
  constructor(readonly reason: HttpParseReason, message: string) {
    super(message);
    this.name = 'HttpParseError';
  }
}

export interface ResponseHandlers {
  /** The final (non-1xx) head; called once. May throw: the error propagates out of feed(). */
  onHead(head: ResponseHead): void;
  /** Body bytes buffer[start, end): a view valid only during the call (the buffer is reused). May throw. */
  onBody(buffer: Buffer, start: number, end: number): void;
  /** The body is complete (called once, after the last onBody). May throw. */
  onEnd(): void;
}

export interface ResponseParserOptions {
  /** The most bytes of a head (status line + fields + blank line), summed over interim heads too; default 64 KiB. */
  maxHeadBytes?: number;
}

export type BodyFraming = 'length' | 'chunked' | 'close' | 'none';

const DEFAULT_MAX_HEAD_BYTES = 64 * 1024;
/** A chunk-size line with its extensions; real ones are a few bytes. */
const MAX_CHUNK_LINE_BYTES = 4 * 1024;
/** Bounds the parse of a chunk size; the value must be a safe integer as well. */
const MAX_CHUNK_SIZE_DIGITS = 15;
const CR = 13, LF = 10;

// States: the first four read whole lines, the others take bytes as they come. CHUNK_DATA_END
// expects the CR (or a bare LF) after chunk data, CHUNK_DATA_LF the LF of that CRLF.
const STATUS_LINE = 0, FIELD_LINE = 1, CHUNK_SIZE_LINE = 2, TRAILER_LINE = 3, LENGTH_BODY = 4;
const CLOSE_BODY = 5, CHUNK_DATA = 6, CHUNK_DATA_END = 7, CHUNK_DATA_LF = 8, DONE = 9;

// RFC 9112 4: status-line = HTTP-version SP status-code SP [ reason-phrase ]; the SP before an
// empty reason is optional here, as servers often omit it. RFC 9110 15: codes are 100..599.
const STATUS_LINE_GRAMMAR = /^HTTP\/1\.([01]) ([1-5]\d\d)(?: ([\t\x20-\x7e\x80-\xff]*))?$/;
// RFC 9110 5.6.2: token = 1*tchar.
const TOKEN_GRAMMAR = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
// RFC 9110 5.5: field-value characters are VCHAR, obs-text, SP and HTAB; no other control.
const NOT_FIELD_VALUE_CHAR = /[^\t\x20-\x7e\x80-\xff]/;
// RFC 9112 7.1.1: chunk-size [ chunk-ext ], chunk-ext = *( BWS ";" BWS name [ BWS "=" BWS value ] ),
// value = token / quoted-string (RFC 9110 5.6.4). Each repetition starts with ";", so the
// pattern cannot backtrack more than linearly.
const TCHARS = "[!#$%&'*+.^_`|~0-9A-Za-z-]+";
const QUOTED = '"(?:[\\t\\x20\\x21\\x23-\\x5b\\x5d-\\x7e\\x80-\\xff]|\\\\[\\t\\x20-\\x7e\\x80-\\xff])*"';
const CHUNK_LINE_GRAMMAR = new RegExp(
  `^([0-9A-Fa-f]+)(?:[ \\t]*;[ \\t]*${TCHARS}(?:[ \\t]*=[ \\t]*(?:${TCHARS}|${QUOTED}))?)*$`);

const EMPTY = Buffer.alloc(0);

export class ResponseParser {
  private readonly maxHeadBytes: number;
  private state = STATUS_LINE;
  /** What feed or finish threw; the parser is dead once it is set. */
  private failure: { error: unknown } | null = null;
  /** Bytes left of a Content-Length body or of the current chunk. */
  private remaining = 0;
  /** Bytes of the line (for heads: of the head) read so far, and the most allowed. */
  private lineBytesUsed = 0;
  private lineBytesMax: number;
  /** The start of an unfinished line, copied because the caller's buffer is reused. */
  private kept = EMPTY;
  private keptBytes = 0;
  private status = 0;
  private statusMessage = '';
  private http10 = false;
  private headers: ResponseHeaders = Object.create(null) as ResponseHeaders;
  private framingValue: BodyFraming | null = null;
  private endedValue = false;
  private bodyBytesValue = 0;

  constructor(private readonly handlers: ResponseHandlers, options: ResponseParserOptions = {}) {
    this.maxHeadBytes = options.maxHeadBytes ?? DEFAULT_MAX_HEAD_BYTES;
    if (!Number.isSafeInteger(this.maxHeadBytes) || this.maxHeadBytes < 1) throw new RangeError('maxHeadBytes must be a positive integer');
    this.lineBytesMax = this.maxHeadBytes;
  }

  /** How the body is delimited, once the head is parsed; null before. */
  get framing(): BodyFraming | null { return this.framingValue; }
  /** True once onEnd has been called. */
  get ended(): boolean { return this.endedValue; }
  /** Body bytes handed to onBody so far (decoded, i.e. without chunk framing). */
  get bodyBytes(): number { return this.bodyBytesValue; }

  /** Parses buffer[start, end). Throws HttpParseError; rethrows handler errors unchanged. */
  feed(buffer: Buffer, start = 0, end = buffer.length): void {
    if (this.failure !== null) throw this.failure.error;
    if (!(start >= 0 && start <= end && end <= buffer.length)) throw new RangeError(`feed range [${start}, ${end}) is outside the buffer`);
    try {
      this.parse(buffer, start, end);
    } catch (error) {
      this.failure = { error };
      throw error;
    }
  }

  /**
   * The connection closed: ends a close-delimited body (RFC 9112 6.3 rule 8); anything else not
   * ended yet is incomplete. A no-op once the message has ended.
   */
  finish(): void {
    if (this.failure !== null) throw this.failure.error;
    if (this.endedValue) return;
    try {
      if (this.state !== CLOSE_BODY) throw new HttpParseError('incomplete', this.describeIncomplete());
      this.end();
    } catch (error) {
      this.failure = { error };
      throw error;
    }
  }

  private parse(buffer: Buffer, pos: number, end: number): void {
    while (pos < end) {
      switch (this.state) {
        case LENGTH_BODY: // the hot path, as is CLOSE_BODY
        case CHUNK_DATA: {
          const from = pos;
          pos += Math.min(end - pos, this.remaining);
          this.remaining -= pos - from;
          this.bodyBytesValue += pos - from;
          this.handlers.onBody(buffer, from, pos);
          if (this.remaining === 0) {
            if (this.state === LENGTH_BODY) this.end();
            else this.state = CHUNK_DATA_END;
          }
          break;
        }
        case CLOSE_BODY:
          this.bodyBytesValue += end - pos;
          this.handlers.onBody(buffer, pos, end);
          return;
        case CHUNK_DATA_END:
        case CHUNK_DATA_LF: {
          // RFC 9112 7.1: chunk-data is followed by CRLF exactly (2.2: a bare LF is accepted).
          const byte = buffer[pos++];
          if (byte === CR && this.state === CHUNK_DATA_END) this.state = CHUNK_DATA_LF;
          else if (byte === LF) this.startLine(CHUNK_SIZE_LINE, MAX_CHUNK_LINE_BYTES);
          else throw new HttpParseError('invalid_chunk', 'chunk data is not followed by CRLF (RFC 9112 7.1)');
          break;
        }
        case DONE:
          throw new HttpParseError('excess_data', `${end - pos} bytes arrived after the end of the response`);
        default: {
          const next = this.takeLine(buffer, pos, end);
          if (next < 0) return;
          pos = next;
        }
      }
    }
  }

  /**
   * Reads the line that starts at `pos` and handles it; returns the index after its LF, or -1
   * when the line goes on past `end` (its bytes are kept). Bytes count against the line limit as
   * they arrive, and the scan stops at the limit, so a line that never ends costs no more.
   */
  private takeLine(buffer: Buffer, pos: number, end: number): number {
    const limit = Math.min(end, pos + this.lineBytesMax - this.lineBytesUsed);
    const lf = buffer.subarray(pos, limit).indexOf(LF);
    if (lf < 0) {
      if (limit < end) throw this.lineTooLong();
      this.keep(buffer, pos, end);
      this.lineBytesUsed += end - pos;
      return -1;
    }
    this.lineBytesUsed += lf + 1;
    let line: string;
    if (this.keptBytes === 0) {
      line = buffer.toString('latin1', pos, pos + lf);
    } else {
      this.keep(buffer, pos, pos + lf);
      line = this.kept.toString('latin1', 0, this.keptBytes);
      this.keptBytes = 0;
    }
    // RFC 9112 2.2: CRLF, or a bare LF; a CR anywhere else fails the grammar checks below.
    if (line.charCodeAt(line.length - 1) === CR) line = line.slice(0, -1);
    this.handleLine(line);
    return pos + lf + 1;
  }

  private keep(buffer: Buffer, from: number, to: number): void {
    // Sized for the longest line allowed when a line first spans two reads; the limit only
    // changes between lines, so a line that is being kept never outgrows it.
    if (this.kept.length < this.lineBytesMax) this.kept = Buffer.allocUnsafe(this.lineBytesMax);
    this.keptBytes += buffer.copy(this.kept, this.keptBytes, from, to);
  }

  private lineTooLong(): HttpParseError {
    if (this.state === CHUNK_SIZE_LINE) return new HttpParseError('invalid_chunk', `a chunk-size line is longer than ${this.lineBytesMax} bytes`);
    const what = this.state === TRAILER_LINE ? 'the trailer section' : 'the response head';
    return new HttpParseError('head_too_large', `${what} is larger than ${this.lineBytesMax} bytes`);
  }

  private startLine(state: number, maxBytes: number): void {
    this.state = state;
    this.lineBytesUsed = 0;
    this.lineBytesMax = maxBytes;
  }

  private handleLine(line: string): void {
    switch (this.state) {
      case STATUS_LINE: return this.statusLine(line);
      case FIELD_LINE: return line === '' ? this.headEnded() : this.fieldLine(line, this.headers);
      case CHUNK_SIZE_LINE: return this.chunkSizeLine(line);
      case TRAILER_LINE: return line === '' ? this.end() : this.fieldLine(line, null); // RFC 9112 7.1.2: discarded
    }
  }

  private statusLine(line: string): void {
    const match = STATUS_LINE_GRAMMAR.exec(line);
    if (match === null) throw new HttpParseError('invalid_status_line', `not an HTTP/1.0 or HTTP/1.1 status line: ${quoteShort(line)}`);
    this.status = Number(match[2]);
    if (this.status === 101) throw new HttpParseError('switching_protocols', 'the server switched protocols (101), which a download cannot follow');
    this.statusMessage = match[3] ?? '';
    this.http10 = match[1] === '0';
    this.headers = Object.create(null) as ResponseHeaders;
    this.state = FIELD_LINE;
  }

  /** RFC 9112 5: field-line = field-name ":" OWS field-value OWS. `headers` null: check only. */
  private fieldLine(line: string, headers: ResponseHeaders | null): void {
    const first = line.charCodeAt(0);
    if (first === 0x20 || first === 0x09) throw new HttpParseError('invalid_header', 'obsolete line folding (RFC 9112 5.2)');
    const colon = line.indexOf(':');
    // RFC 9112 5.1: no whitespace between the name and the colon.
    if (colon < 1 || !TOKEN_GRAMMAR.test(line.slice(0, colon))) throw new HttpParseError('invalid_header', 'a field line without a valid name and colon (RFC 9112 5)');
    const value = trimWhitespace(line.slice(colon + 1));
    const name = line.slice(0, colon).toLowerCase();
    if (NOT_FIELD_VALUE_CHAR.test(value)) throw new HttpParseError('invalid_header', `a control character in the value of ${name} (RFC 9110 5.5)`);
    if (headers === null) return;
    const before = headers[name];
    headers[name] = before === undefined ? value : `${before}, ${value}`;
  }

  private headEnded(): void {
    // RFC 9110 15.2: an interim (1xx) answer is followed by another head; it counts to the limit.
    if (this.status < 200) {
      this.state = STATUS_LINE;
      return;
    }
    const framing = this.framingValue = this.framingOfHead();
    this.kept = EMPTY; // chunk-size lines need far less than a head did
    this.handlers.onHead({ status: this.status, statusMessage: this.statusMessage, headers: this.headers });
    if (framing === 'none' || (framing === 'length' && this.remaining === 0)) this.end();
    else if (framing === 'length') this.state = LENGTH_BODY;
    else if (framing === 'chunked') this.startLine(CHUNK_SIZE_LINE, MAX_CHUNK_LINE_BYTES);
    else this.state = CLOSE_BODY;
  }

  /** RFC 9112 6.3: how the body's length is determined. */
  private framingOfHead(): BodyFraming {
    // Rule 1: 204 and 304 end at the head, whatever their fields say (304 may carry a length).
    if (this.status === 204 || this.status === 304) return 'none';
    const { 'transfer-encoding': transferEncoding, 'content-length': contentLength } = this.headers;
    if (transferEncoding !== undefined) {
      // Rule 3: both framings at once is how requests get smuggled; refuse rather than choose.
      if (contentLength !== undefined) throw new HttpParseError('conflicting_framing', 'both Transfer-Encoding and Content-Length (RFC 9112 6.3)');
      // RFC 9112 6.1: Transfer-Encoding in an HTTP/1.0 message means faulty framing.
      if (this.http10) throw new HttpParseError('unsupported_transfer_coding', 'Transfer-Encoding in an HTTP/1.0 response (RFC 9112 6.1)');
      if (transferEncoding.toLowerCase() !== 'chunked') throw new HttpParseError('unsupported_transfer_coding', `unsupported Transfer-Encoding ${quoteShort(transferEncoding)}; only chunked is accepted`);
      return 'chunked';
    }
    if (contentLength === undefined) return 'close'; // rule 8
    this.remaining = parseContentLength(contentLength);
    // The one length a repeated field (`42, 42`) means, so that readers of the head agree with the framing.
    this.headers['content-length'] = String(this.remaining);
    return 'length';
  }

  private chunkSizeLine(line: string): void {
    const match = CHUNK_LINE_GRAMMAR.exec(line);
    if (match === null) throw new HttpParseError('invalid_chunk', `not a chunk-size line: ${quoteShort(line)} (RFC 9112 7.1)`);
    const digits = match[1]!;
    const size = digits.length <= MAX_CHUNK_SIZE_DIGITS ? parseInt(digits, 16) : Infinity;
    if (size > Number.MAX_SAFE_INTEGER) throw new HttpParseError('invalid_chunk', `chunk size ${quoteShort(digits)} is too large`);
    this.remaining = size;
    if (size > 0) this.state = CHUNK_DATA;
    else this.startLine(TRAILER_LINE, this.maxHeadBytes); // RFC 9112 7.1.2: the last chunk, then trailers bounded like a head
  }

  private end(): void {
    this.state = DONE;
    this.endedValue = true;
    this.kept = EMPTY;
    this.handlers.onEnd();
  }

  private describeIncomplete(): string {
    if (this.state <= FIELD_LINE) return 'the connection closed before the response head was complete';
    if (this.state === LENGTH_BODY) return `the connection closed after ${this.bodyBytesValue} of ${this.bodyBytesValue + this.remaining} body bytes`;
    return `the connection closed inside a chunked body, after ${this.bodyBytesValue} body bytes`;
  }
}

/** RFC 9110 5.5: OWS is SP and HTAB only (String.trim would also take NBSP, 0xA0 in latin1). */
function trimWhitespace(text: string): string {
  let from = 0;
  let to = text.length;
  while (from < to && (text.charCodeAt(from) === 0x20 || text.charCodeAt(from) === 0x09)) from++;
  while (to > from && (text.charCodeAt(to - 1) === 0x20 || text.charCodeAt(to - 1) === 0x09)) to--;
  return text.slice(from, to);
}

/** RFC 9110 8.6: 1*DIGIT; a list of one value repeated (`42, 42`) is that value. */
function parseContentLength(field: string): number {
  let length = -1;
  for (const item of field.split(',')) {
    const digits = trimWhitespace(item);
    const value = /^\d+$/.test(digits) ? Number(digits) : NaN;
    if (!Number.isSafeInteger(value)) throw new HttpParseError('invalid_content_length', `Content-Length ${quoteShort(field)} is not a length`);
    if (length >= 0 && value !== length) throw new HttpParseError('invalid_content_length', `Content-Length ${quoteShort(field)} holds different lengths`);
    length = value;
  }
  return length;
}

