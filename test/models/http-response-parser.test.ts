/**
 * The strict HTTP/1.1 response parser of the downloader (RFC 9112). Property tests generate
 * responses (interim heads, random fields, a body framed by length, chunks or close, trailers,
 * CRLF or bare LF line ends), cut them into feeds from one reused buffer that is scribbled over
 * between feeds, and check what the parser reports; then the same responses with a byte too many
 * or cut short. Example tests cover each error reason, named after the rule it comes from.
 *
 * LMSP_FUZZ_RUNS raises the number of cases per property; the default runs use a fixed seed.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import {
  HttpParseError, ResponseParser, type HttpParseReason, type ResponseHead, type ResponseParserOptions,
} from '../../src/models/http-response-parser.js';

const RUNS = Math.max(1, Number(process.env.LMSP_FUZZ_RUNS ?? 300));
const SEED = process.env.LMSP_FUZZ_SEED !== undefined ? Number(process.env.LMSP_FUZZ_SEED)
  : process.env.LMSP_FUZZ_RUNS === undefined ? 0x68747470 : Math.floor(Math.random() * 2 ** 31);

/** What a parser reported; body pieces are copied, as the view is valid only during the call. */
interface Outcome {
  parser: ResponseParser;
  heads: ResponseHead[];
  body: Buffer[];
  ends: number;
  /** onBody calls made after onEnd (must stay 0). */
  lateBodies: number;
  /** onBody calls whose buffer was not the one fed (a copy; must stay 0). */
  foreignBuffers: number;
}

function newParser(options?: ResponseParserOptions): Outcome {
  const outcome: Outcome = { parser: undefined as unknown as ResponseParser, heads: [], body: [], ends: 0, lateBodies: 0, foreignBuffers: 0 };
  outcome.parser = new ResponseParser({
    onHead: (head) => { outcome.heads.push(head); },
    onBody: (buffer, start, end) => {
      if (outcome.ends > 0) outcome.lateBodies++;
      if (buffer !== scratch && buffer !== direct) outcome.foreignBuffers++;
      outcome.body.push(Buffer.from(buffer.subarray(start, end)));
    },
    onEnd: () => { outcome.ends++; },
  }, options);
  return outcome;
}

/** The one buffer every split feed goes through, overwritten between feeds like a socket's. */
let scratch: Buffer = Buffer.alloc(1 << 16);
/** The buffer of the last `feedWhole` call. */
let direct: Buffer = Buffer.alloc(0);

/** Feeds `bytes` in pieces cut at `cuts`, each piece copied into the scratch buffer at an offset. */
function feedPieces(parser: ResponseParser, bytes: Buffer, cuts: number[], offset = 3): void {
  const points = [...new Set(cuts.map((cut) => cut % (bytes.length + 1)))].sort((a, b) => a - b);
  let from = 0;
  for (const point of [...points, bytes.length]) {
    if (point <= from && point !== bytes.length) continue;
    const length = point - from;
    if (scratch.length < offset + length) scratch = Buffer.alloc(offset + length);
    bytes.copy(scratch, offset, from, point);
    try {
      parser.feed(scratch, offset, offset + length);
    } finally {
      scratch.fill(0xa5); // whatever the parser kept a reference to is now garbage
    }
    from = point;
  }
}

function feedWhole(parser: ResponseParser, text: string | Buffer): void {
  direct = typeof text === 'string' ? Buffer.from(text, 'latin1') : text;
  parser.feed(direct);
}

function failsWith(run: () => unknown, reason: HttpParseReason): HttpParseError {
  let caught: unknown;
  assert.throws(run, (error: unknown) => {
    caught = error;
    return error instanceof HttpParseError;
  });
  assert.equal((caught as HttpParseError).reason, reason, (caught as Error).message);
  return caught as HttpParseError;
}

/** Parses `text` fed whole and expects `reason`. */
function refuses(text: string, reason: HttpParseReason, options?: ResponseParserOptions): HttpParseError {
  const { parser } = newParser(options);
  return failsWith(() => feedWhole(parser, text), reason);
}

// ---- the generated responses -------------------------------------------------------------

interface Field { name: string; value: string }

interface Model {
  interims: { status: number; fields: Field[] }[];
  version: '1.0' | '1.1';
  status: number;
  reason: string;
  fields: Field[];
  framing: 'length' | 'chunked' | 'close' | 'none';
  body: Buffer;
  /** For chunked: the sizes of the chunks, their size-line forms and extensions. */
  chunks: { size: number; extension: string; upper: boolean; zeros: number }[];
  trailers: Field[];
  eol: string[];
}

const tchar = fc.constantFrom(...'!#$%&\'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ');
const token = fc.string({ unit: tchar, minLength: 1, maxLength: 12 });
const valueChar = fc.oneof(
  fc.integer({ min: 0x20, max: 0x7e }), fc.integer({ min: 0x80, max: 0xff }), fc.constant(0x09),
).map((code) => String.fromCharCode(code));
const fieldValue = fc.string({ unit: valueChar, maxLength: 30 });
const FRAMING_NAMES = new Set(['content-length', 'transfer-encoding']);
const field: fc.Arbitrary<Field> = fc.record({ name: token, value: fieldValue })
  .filter(({ name }) => !FRAMING_NAMES.has(name.toLowerCase()));
const reasonPhrase = fc.string({ unit: valueChar, maxLength: 20 });
const quoted = fc.string({ unit: fc.constantFrom('a', ' ', '\t', '\\"', '\\\\', '=', ';', '\xe9'), maxLength: 8 }).map((text) => `"${text}"`);
const bws = fc.constantFrom('', ' ', '\t ');
const extension = fc.array(fc.tuple(bws, bws, token, fc.option(fc.tuple(bws, bws, fc.oneof(token, quoted)), { nil: null })), { maxLength: 3 })
  .map((items) => items.map(([a, b, name, value]) => `${a};${b}${name}${value === null ? '' : `${value[0]}=${value[1]}${value[2]}`}`).join(''));

const model: fc.Arbitrary<Model> = fc.record({
  interims: fc.array(fc.record({
    status: fc.integer({ min: 100, max: 199 }).filter((status) => status !== 101),
    fields: fc.array(field, { maxLength: 3 }),
  }), { maxLength: 2 }),
  version: fc.constantFrom('1.0', '1.1'),
  status: fc.oneof({ arbitrary: fc.integer({ min: 200, max: 599 }), weight: 5 }, { arbitrary: fc.constantFrom(204, 304), weight: 1 }),
  reason: reasonPhrase,
  fields: fc.array(field, { maxLength: 8 }),
  framing: fc.constantFrom('length', 'chunked', 'close'),
  body: fc.uint8Array({ maxLength: 600 }).map((bytes) => Buffer.from(bytes)),
  cuts: fc.array(fc.nat(), { maxLength: 6 }),
  extensions: fc.array(fc.record({ extension, upper: fc.boolean(), zeros: fc.integer({ min: 0, max: 2 }) }), { minLength: 8, maxLength: 8 }),
  trailers: fc.array(field, { maxLength: 3 }),
  eol: fc.array(fc.constantFrom('\r\n', '\r\n', '\n'), { minLength: 64, maxLength: 64 }),
}).map(({ cuts, extensions, ...rest }): Model => {
  const framing = rest.status === 204 || rest.status === 304 ? 'none' : rest.framing;
  const version = framing === 'chunked' ? '1.1' : rest.version; // RFC 9112 6.1: no chunked in HTTP/1.0
  const body = framing === 'none' ? Buffer.alloc(0) : rest.body;
  const points = [...new Set(cuts.map((cut) => cut % (body.length + 1)))].sort((a, b) => a - b);
  const sizes: number[] = [];
  let from = 0;
  for (const point of [...points, body.length]) {
    if (point > from) sizes.push(point - from);
    from = Math.max(from, point);
  }
  sizes.push(0);
  const chunks = sizes.map((size, index) => ({ size, ...extensions[index % extensions.length]! }));
  return { ...rest, version, framing, body, chunks, trailers: framing === 'chunked' ? rest.trailers : [] };
});

/** The fields the model's head carries, its framing field included, in order. */
function headFields(m: Model): Field[] {
  const fields = [...m.fields];
  if (m.framing === 'length') fields.splice(fields.length >> 1, 0, { name: 'Content-Length', value: String(m.body.length) });
  if (m.framing === 'chunked') fields.push({ name: 'transfer-Encoding', value: ' Chunked\t' });
  if (m.status === 304) fields.push({ name: 'Content-Length', value: '12345' }); // ignored (RFC 9112 6.3 rule 1)
  return fields;
}

/** The serialised response, and where its head ends. */
function serialise(m: Model): { bytes: Buffer; headLength: number } {
  let line = 0;
  const eol = () => m.eol[line++ % m.eol.length]!;
  const head: string[] = [];
  const addFields = (fields: Field[]) => { for (const f of fields) head.push(`${f.name}:${f.value}${eol()}`); };
  for (const interim of m.interims) {
    head.push(`HTTP/1.1 ${interim.status} Interim${eol()}`);
    addFields(interim.fields);
    head.push(eol());
  }
  head.push(`HTTP/${m.version} ${m.status}${m.reason === '' && line % 2 === 0 ? '' : ` ${m.reason}`}${eol()}`);
  addFields(headFields(m));
  head.push(eol());
  const headBytes = Buffer.from(head.join(''), 'latin1');
  if (m.framing !== 'chunked') return { bytes: Buffer.concat([headBytes, m.body]), headLength: headBytes.length };
  const parts: Buffer[] = [headBytes];
  let at = 0;
  for (const chunk of m.chunks) {
    const hex = '0'.repeat(chunk.zeros) + chunk.size.toString(16);
    parts.push(Buffer.from(`${chunk.upper ? hex.toUpperCase() : hex}${chunk.extension}${eol()}`, 'latin1'));
    if (chunk.size > 0) {
      parts.push(m.body.subarray(at, at + chunk.size), Buffer.from(eol(), 'latin1'));
      at += chunk.size;
    }
  }
  const trailer: string[] = [];
  for (const f of m.trailers) trailer.push(`${f.name}: ${f.value}${eol()}`);
  parts.push(Buffer.from(trailer.join('') + eol(), 'latin1'));
  return { bytes: Buffer.concat(parts), headLength: headBytes.length };
}

/** RFC 9110 5.3 and 5.5: lower-cased names, values without surrounding SP/HTAB, joined. */
function expectedHeaders(fields: Field[]): Record<string, string> {
  const headers = Object.create(null) as Record<string, string>;
  for (const { name, value } of fields) {
    const key = name.toLowerCase();
    const trimmed = value.replace(/^[ \t]+|[ \t]+$/g, '');
    headers[key] = Object.hasOwn(headers, key) ? `${headers[key]}, ${trimmed}` : trimmed;
  }
  return { ...headers };
}

function checkComplete(outcome: Outcome, m: Model): void {
  assert.equal(outcome.heads.length, 1);
  const head = outcome.heads[0]!;
  assert.equal(head.status, m.status);
  assert.equal(head.statusMessage, m.reason);
  assert.deepEqual({ ...head.headers }, expectedHeaders(headFields(m)));
  assert.equal(outcome.parser.framing, m.framing);
  assert.deepEqual(Buffer.concat(outcome.body), m.body);
  assert.equal(outcome.parser.bodyBytes, m.body.length);
  assert.equal(outcome.ends, 1);
  assert.equal(outcome.parser.ended, true);
  assert.equal(outcome.lateBodies, 0);
  assert.equal(outcome.foreignBuffers, 0, 'body bytes are handed out as views of the buffer fed');
}

const cutsArbitrary = fc.array(fc.nat(), { maxLength: 12 });

describe('HTTP/1.1 responses, generated (RFC 9112)', () => {
  test('any valid response, fed in any pieces from a reused buffer, gives its head, body and one end', () => {
    fc.assert(fc.property(model, cutsArbitrary, (m, cuts) => {
      const { bytes } = serialise(m);
      const outcome = newParser();
      feedPieces(outcome.parser, bytes, cuts);
      if (m.framing === 'close') {
        assert.equal(outcome.ends, 0, 'a close-delimited body ends only at close');
        outcome.parser.finish();
      }
      checkComplete(outcome, m);
      outcome.parser.finish(); // a no-op once ended
      assert.equal(outcome.ends, 1);
    }), { numRuns: RUNS, seed: SEED });
  });

  test('a byte after a complete response is excess_data (RFC 9112 6.3)', () => {
    fc.assert(fc.property(model.filter((m) => m.framing !== 'close'), cutsArbitrary, fc.integer({ min: 0, max: 255 }), (m, cuts, extra) => {
      const { bytes } = serialise(m);
      const outcome = newParser();
      failsWith(() => feedPieces(outcome.parser, Buffer.concat([bytes, Buffer.of(extra)]), cuts), 'excess_data');
      checkComplete(outcome, m);
    }), { numRuns: RUNS, seed: SEED });
  });

  test('a response cut short, then closed, is incomplete, unless its body ends at close (RFC 9112 8)', () => {
    fc.assert(fc.property(model, cutsArbitrary, fc.nat(), (m, cuts, at) => {
      const { bytes, headLength } = serialise(m);
      if (bytes.length === 0) return;
      const length = at % bytes.length;
      const outcome = newParser();
      feedPieces(outcome.parser, bytes.subarray(0, length), cuts);
      assert.equal(outcome.ends, 0);
      if (m.framing === 'close' && length >= headLength) {
        outcome.parser.finish();
        assert.deepEqual(Buffer.concat(outcome.body), m.body.subarray(0, length - headLength));
        assert.equal(outcome.ends, 1);
      } else {
        const error = failsWith(() => outcome.parser.finish(), 'incomplete');
        assert.equal(failsWith(() => outcome.parser.finish(), 'incomplete'), error, 'a dead parser throws the same error');
      }
    }), { numRuns: RUNS, seed: SEED });
  });
});

describe('status line (RFC 9112 4)', () => {
  test('HTTP/1.1 and HTTP/1.0, with a reason, an empty one, or none', () => {
    for (const [line, status, reason] of [
      ['HTTP/1.1 200 OK', 200, 'OK'], ['HTTP/1.0 404 Not  Found ', 404, 'Not  Found '], ['HTTP/1.1 200', 200, ''],
      ['HTTP/1.1 200 ', 200, ''], ['HTTP/1.1 599 \xe9t\xe9', 599, '\xe9t\xe9'],
    ] as const) {
      const outcome = newParser();
      feedWhole(outcome.parser, `${line}\r\nContent-Length: 0\r\n\r\n`);
      assert.equal(outcome.heads[0]!.status, status, line);
      assert.equal(outcome.heads[0]!.statusMessage, reason, line);
    }
  });

  test('invalid_status_line: other versions, malformed codes, stray characters', () => {
    for (const line of [
      'HTTP/2 200 OK', 'HTTP/2.0 200 OK', 'HTTP/1.2 200 OK', 'http/1.1 200 OK', 'ICY 200 OK', 'HTTP/1.1 2000 OK',
      'HTTP/1.1 20 OK', 'HTTP/1.1  200 OK', 'HTTP/1.1 600 Nope', 'HTTP/1.1 099 Low', 'HTTP/1.1 2x0 OK', ' HTTP/1.1 200 OK',
      'HTTP/1.1 200 O\rK', 'HTTP/1.1 200 O\x00K', 'HTTP/1.1\t200 OK', 'HTTP/1.1 200\tOK', '',
    ]) {
      refuses(`${line}\r\n\r\n`, 'invalid_status_line');
    }
    refuses('HTTP/1.1 200 OK\r\r\n\r\n', 'invalid_status_line'); // a bare CR before the CRLF
  });

  test('1xx interim answers are skipped; 101 is switching_protocols (RFC 9110 15.2)', () => {
    const outcome = newParser();
    feedWhole(outcome.parser, 'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi');
    assert.equal(outcome.heads.length, 1);
    assert.equal(outcome.heads[0]!.status, 200);
    assert.deepEqual({ ...outcome.heads[0]!.headers }, { 'content-length': '2' });
    assert.equal(Buffer.concat(outcome.body).toString(), 'hi');
    refuses('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n', 'switching_protocols');
    refuses('HTTP/1.1 100 Continue\r\nBad Field: x\r\n\r\nHTTP/1.1 200 OK\r\n\r\n', 'invalid_header');
  });
});

describe('field lines (RFC 9112 5, RFC 9110 5)', () => {
  test('names lower-cased, values trimmed, repeated fields joined with ", "', () => {
    const outcome = newParser();
    feedWhole(outcome.parser, 'HTTP/1.1 200 OK\r\nX-A: one \r\nx-a:\ttwo\r\nEmpty:\r\nX-A:  \r\n__proto__: p\r\nConstructor: c\r\nContent-Length: 0\r\n\r\n');
    assert.deepEqual({ ...outcome.heads[0]!.headers }, {
      'x-a': 'one, two, ', empty: '', ['__proto__']: 'p', constructor: 'c', 'content-length': '0',
    });
    assert.equal(outcome.heads[0]!.headers['__proto__'], 'p', 'a field named like a prototype key is a field');
  });

  test('lines may end with a bare LF (RFC 9112 2.2)', () => {
    const outcome = newParser();
    feedWhole(outcome.parser, 'HTTP/1.1 200 OK\nA: 1\r\nTransfer-Encoding: chunked\n\n3\nabc\n2;x=y\r\nde\r\n0\nT: 1\n\n');
    assert.equal(outcome.heads[0]!.status, 200);
    assert.equal(Buffer.concat(outcome.body).toString(), 'abcde');
    assert.equal(outcome.ends, 1);
  });

  test('invalid_header: bad names, whitespace before the colon, obs-fold, control characters', () => {
    for (const line of [
      'Bad Name: x', 'Name : x', 'Name\t: x', ' Folded: x', '\tfolded', 'NoColon', ': empty name', 'Na(me: x', 'Na\xe9me: x',
      'X: a\x01b', 'X: a\x7fb', 'X: a\rb', 'X: a\x00', 'X: \x1b[31m',
    ]) {
      refuses(`HTTP/1.1 200 OK\r\nA: 1\r\n${line}\r\n\r\n`, 'invalid_header');
    }
    refuses('HTTP/1.1 200 OK\r\nA: 1\r\n continued\r\n\r\n', 'invalid_header'); // obs-fold (RFC 9112 5.2)
  });
});

describe('the head limit', () => {
  test('head_too_large when the head passes maxHeadBytes, counted byte by byte', () => {
    const head = 'HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n';
    const exact = newParser({ maxHeadBytes: head.length });
    feedWhole(exact.parser, head);
    assert.equal(exact.ends, 1, 'a head of exactly the limit passes');
    refuses(head, 'head_too_large', { maxHeadBytes: head.length - 1 });
    // Interim heads count towards the same limit.
    refuses(`HTTP/1.1 100 Continue\r\n\r\n${head}`, 'head_too_large', { maxHeadBytes: head.length + 20 });
    // The blank line counts too.
    refuses('HTTP/1.1 200 OK\r\n\r\n', 'head_too_large', { maxHeadBytes: 18 });
  });

  test('a line that never ends hits head_too_large at the limit, and what is kept stays within it', () => {
    const limit = 1024;
    const { parser } = newParser({ maxHeadBytes: limit });
    const piece = Buffer.from('HTTP/1.1 200 OK\r\nX: ' + 'a'.repeat(limit), 'latin1');
    let fed = 0;
    const error = failsWith(() => {
      for (; fed < piece.length; fed++) parser.feed(piece, fed, fed + 1);
    }, 'head_too_large');
    assert.equal(fed, limit, 'the byte after the limit is the one refused');
    assert.equal(failsWith(() => parser.feed(Buffer.from('\r\n')), 'head_too_large'), error, 'the parser stays dead');

    // One huge read without a line end: refused at once, without copying it.
    const huge = Buffer.alloc(32 * 1024 * 1024, 0x61);
    huge.write('HTTP/1.1 200 OK\r\nX: ');
    const before = process.memoryUsage().arrayBuffers;
    const big = newParser();
    failsWith(() => big.parser.feed(huge), 'head_too_large');
    const growth = process.memoryUsage().arrayBuffers - before;
    assert.ok(growth < 1024 * 1024, `feeding 32 MiB grew buffers by ${growth} bytes`);
  });

  test('a partial line is kept across feeds from a reused buffer', () => {
    const outcome = newParser();
    const text = Buffer.from('HTTP/1.1 200 OK\r\nX-Long: ' + 'v'.repeat(5000) + '\r\nContent-Length: 1\r\n\r\nz', 'latin1');
    feedPieces(outcome.parser, text, Array.from({ length: 40 }, (_, index) => index * 131 + 7));
    assert.equal(outcome.heads[0]!.headers['x-long'], 'v'.repeat(5000));
    assert.equal(Buffer.concat(outcome.body).toString(), 'z');
  });
});

describe('body framing (RFC 9112 6.3)', () => {
  test('204 and 304 have no body, whatever their fields; Content-Length 0 ends at the head', () => {
    for (const text of [
      'HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n', 'HTTP/1.1 304 Not Modified\r\nContent-Length: 99\r\n\r\n',
      'HTTP/1.1 204 No Content\r\nTransfer-Encoding: gzip\r\n\r\n', 'HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n',
    ]) {
      const outcome = newParser();
      feedWhole(outcome.parser, text);
      assert.equal(outcome.ends, 1, text);
      assert.equal(outcome.parser.framing, text.includes(' 200 ') ? 'length' : 'none');
      failsWith(() => outcome.parser.feed(Buffer.from('x')), 'excess_data');
    }
  });

  test('without Content-Length or Transfer-Encoding the body runs until close', () => {
    const outcome = newParser();
    feedWhole(outcome.parser, 'HTTP/1.0 200 OK\r\n\r\nsome');
    feedWhole(outcome.parser, ' bytes');
    assert.equal(outcome.parser.framing, 'close');
    assert.equal(outcome.ends, 0);
    outcome.parser.finish();
    assert.equal(Buffer.concat(outcome.body).toString(), 'some bytes');
    assert.equal(outcome.parser.bodyBytes, 10);
    assert.equal(outcome.ends, 1);
  });

  test('a length-delimited body is one view of the buffer fed per feed', () => {
    const calls: [Buffer, number, number][] = [];
    const parser = new ResponseParser({ onHead: () => {}, onBody: (buffer, start, end) => { calls.push([buffer, start, end]); }, onEnd: () => {} });
    const head = Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123');
    parser.feed(head);
    const rest = Buffer.from('xx456789yy');
    parser.feed(rest, 2, 8);
    assert.deepEqual(calls, [[head, head.length - 4, head.length], [rest, 2, 8]]);
    assert.equal(parser.ended, true);
  });

  test('invalid_content_length: not 1*DIGIT, not a safe integer, or different values', () => {
    for (const value of ['abc', '-1', '+5', '1.0', '0x10', '', '1 0', '5, 6', '5,', ',5', '9007199254740992', '1'.repeat(400), '\xb9']) {
      refuses(`HTTP/1.1 200 OK\r\nContent-Length: ${value}\r\n\r\n`, 'invalid_content_length');
    }
    refuses('HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n', 'invalid_content_length');
    for (const text of ['Content-Length: 3, 3', 'Content-Length: 3\r\ncontent-length:3', 'Content-Length: 003']) {
      const outcome = newParser();
      feedWhole(outcome.parser, `HTTP/1.1 200 OK\r\n${text}\r\n\r\nabc`);
      assert.equal(outcome.ends, 1, text);
      assert.equal(outcome.heads[0]!.headers['content-length'], '3', `the head carries the one length it means (${text})`);
    }
  });

  test('unsupported_transfer_coding: anything but chunked, or Transfer-Encoding in HTTP/1.0 (RFC 9112 6.1)', () => {
    for (const value of ['gzip', 'gzip, chunked', 'chunked, chunked', 'identity', 'chunked;q=1', '']) {
      refuses(`HTTP/1.1 200 OK\r\nTransfer-Encoding: ${value}\r\n\r\n`, 'unsupported_transfer_coding');
    }
    refuses('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n', 'unsupported_transfer_coding');
    refuses('HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n', 'unsupported_transfer_coding');
  });

  test('conflicting_framing: Transfer-Encoding with Content-Length (RFC 9112 6.3 rule 3)', () => {
    refuses('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n', 'conflicting_framing');
    refuses('HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: gzip\r\n\r\n', 'conflicting_framing');
  });

  test('excess_data: bytes past Content-Length, in the same feed or a later one', () => {
    refuses('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nabc', 'excess_data');
    const outcome = newParser();
    feedWhole(outcome.parser, 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nab');
    assert.equal(outcome.ends, 1);
    const error = failsWith(() => feedWhole(outcome.parser, '\r\n'), 'excess_data');
    assert.equal(failsWith(() => outcome.parser.feed(Buffer.alloc(0)), 'excess_data'), error, 'even an empty feed rethrows');
  });
});

describe('chunked transfer coding (RFC 9112 7.1)', () => {
  const chunked = (rest: string) => `HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n${rest}`;

  test('several chunks in one feed are several views; extensions and trailers are accepted and dropped', () => {
    const outcome = newParser();
    feedWhole(outcome.parser, chunked('4;name=value;q="a \\"b\\""\r\nWiki\r\n5 ; a ; b = c\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0;last\r\nExpires: never\r\nX:  y \r\n\r\n'));
    assert.equal(Buffer.concat(outcome.body).toString(), 'Wikipedia in\r\n\r\nchunks.');
    assert.equal(outcome.body.length, 3);
    assert.equal(outcome.foreignBuffers, 0, 'each is a view of the buffer fed');
    assert.equal(outcome.parser.bodyBytes, 23);
    assert.equal(outcome.ends, 1);
    assert.deepEqual(Object.keys(outcome.heads[0]!.headers), ['transfer-encoding'], 'trailers are not merged into the head');
  });

  test('invalid_chunk: bad sizes, extensions, and data not followed by CRLF', () => {
    for (const rest of [
      'g\r\n', '\r\n', ' 5\r\n', '5 \r\n', '-5\r\n', '0x5\r\n', '5;\r\n', '5;a=\r\n', '5;a="open\r\n', '5;a b\r\n', '5\x00\r\n',
      '5\rx\r\n', '1'.repeat(16) + '\r\n', 'fffffffffffffff\r\n', '20000000000000\r\n', '5\r\nabcdeX\r\n', '5\r\nabcde\rX',
      '5\r\nabcde\r\r\n', '5\r\nabcdef', `1;a=${'b'.repeat(5000)}\r\n`,
    ]) {
      refuses(chunked(rest), 'invalid_chunk');
    }
    const outcome = newParser();
    feedWhole(outcome.parser, chunked('1fffffffffffff\r\n')); // the largest safe size is accepted
    assert.equal(outcome.parser.framing, 'chunked');
  });

  test('trailers are checked like fields and bounded like a head', () => {
    refuses(chunked('0\r\nBad Trailer: x\r\n\r\n'), 'invalid_header');
    refuses(chunked(`0\r\nX: ${'t'.repeat(300)}\r\n\r\n`), 'head_too_large', { maxHeadBytes: 256 });
  });

  test('a size line never ending is invalid_chunk at 4 KiB, whatever the head limit', () => {
    const { parser } = newParser({ maxHeadBytes: 1 << 20 });
    feedWhole(parser, chunked('1;x='));
    failsWith(() => feedWhole(parser, 'y'.repeat(8192)), 'invalid_chunk');
  });
});

describe('the end of the connection, and a dead parser', () => {
  test('finish: incomplete in the head, a length body, a chunk, the trailers; a no-op once ended', () => {
    for (const text of [
      'HTTP/1.1 200 OK\r\nContent-Le', 'HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nabc',
      'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: 1\r\n',
      '', 'HTTP/1.1 100 Continue\r\n\r\n',
    ]) {
      const { parser } = newParser();
      feedWhole(parser, text);
      failsWith(() => parser.finish(), 'incomplete');
    }
    const outcome = newParser();
    feedWhole(outcome.parser, 'HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx');
    outcome.parser.finish();
    assert.equal(outcome.ends, 1);
  });

  test('once feed has thrown, feed and finish throw the same error; handler errors come out unchanged', () => {
    const { parser } = newParser();
    const error = failsWith(() => feedWhole(parser, 'HTTP/9 200 OK\r\n'), 'invalid_status_line');
    assert.equal(failsWith(() => parser.feed(Buffer.from('HTTP/1.1 200 OK\r\n')), 'invalid_status_line'), error);
    assert.equal(failsWith(() => parser.finish(), 'invalid_status_line'), error);

    for (const where of ['onHead', 'onBody', 'onEnd'] as const) {
      const mine = new Error(`from ${where}`);
      const handlers = { onHead: () => {}, onBody: () => {}, onEnd: () => {} };
      handlers[where] = () => { throw mine; };
      const thrower = new ResponseParser(handlers);
      assert.throws(() => thrower.feed(Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx')), (thrown) => thrown === mine);
      assert.throws(() => thrower.feed(Buffer.from('x')), (thrown) => thrown === mine);
      assert.throws(() => thrower.finish(), (thrown) => thrown === mine);
    }
  });

  test('an onEnd that throws at close is rethrown by finish, and again after', () => {
    const mine = new Error('disk full');
    const parser = new ResponseParser({ onHead: () => {}, onBody: () => {}, onEnd: () => { throw mine; } });
    parser.feed(Buffer.from('HTTP/1.1 200 OK\r\n\r\nbody'));
    assert.throws(() => parser.finish(), (thrown) => thrown === mine);
    assert.throws(() => parser.finish(), (thrown) => thrown === mine);
  });
});
