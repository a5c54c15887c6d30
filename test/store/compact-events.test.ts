/**
 * Compact storage of delta events (migration 0009): what a client reads is the JSON text of the
 * payload byte for byte, however the row was stored; a database written before 0009 converts
 * with its events, tokens and text unchanged.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import { Database, loadMigrations } from '../../src/store/db.js';
import { EventTable, holeOf, shapeOf } from '../../src/store/events.js';
import { packTokens, unpackTokens } from '../../src/store/token-codec.js';
import { withDataDir } from '../helpers/data-dir.js';

const DELTA = 'response.output_text.delta';
const TEXT = { type: DELTA, path: '$.delta' };

function delta(text: string, itemId = 'msg_1') {
  return { item_id: itemId, output_index: 0, content_index: 0, delta: text, logprobs: [] };
}

function fixedWidth(tokens: number[]): Buffer {
  const buffer = Buffer.alloc(tokens.length * 4);
  tokens.forEach((token, index) => buffer.writeUInt32LE(token, index * 4));
  return buffer;
}

function rawRows(db: Database, taskId: string) {
  return db.sqlite.prepare('SELECT sequence_number, type, shape, data FROM task_log WHERE task_id = ? ORDER BY sequence_number').all(taskId) as
    Array<{ sequence_number: number; type: string | null; shape: number | null; data: string }>;
}

describe('compact task events (migration 0009)', () => {
  test('token ids round-trip as varints, 2 bytes for ids under 16,384', () => {
    const tokens = [0, 1, 127, 128, 16_383, 16_384, 2 ** 31, 2 ** 32 - 1];
    assert.deepEqual(unpackTokens(packTokens(tokens)), tokens);
    assert.equal(packTokens([100, 16_383]).length, 3);
    assert.throws(() => unpackTokens(Buffer.from([0x80])), RangeError);
  });

  test('a shape leaves out the last string and rebuilds the JSON exactly', () => {
    const json = JSON.stringify(delta('hi'));
    const shape = shapeOf(json)!;
    assert.equal(shape.path, '$.delta');
    assert.equal(`${shape.prefix}${JSON.stringify('hi')}${shape.suffix}`, json);
    assert.equal(holeOf(shape, JSON.stringify(delta('a "quoted"\n\u0001 é 😀'))), 'a "quoted"\n\u0001 é 😀');
    assert.equal(holeOf(shape, JSON.stringify(delta('x', 'msg_2'))), null, 'another item id is another shape');
    assert.equal(holeOf(shape, JSON.stringify({ ...delta('x'), logprobs: [1] })), null);
    const chunk = { id: 'chatcmpl_1', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content: 'yo' }, finish_reason: null }] };
    assert.equal(shapeOf(JSON.stringify(chunk))!.path, '$.choices[0].delta.content');
    assert.equal(shapeOf(JSON.stringify({ n: 1 })), null, 'no string, no shape');
  });

  test('deltas are stored compactly and read back as the payload JSON, with text and snapshot', () => withDataDir((dir) => {
    const db = Database.open(dir);
    const events = new EventTable(db.sqlite);
    const texts = ['Once', ' upon', '', ' "a"\n\ttime\u0000', ' é😀'];
    events.append('task_a', 1, 'response.created', 10, { response: { id: 'resp_a', output: [] } });
    texts.forEach((text, index) => events.append('task_a', index + 2, DELTA, 11, delta(text), [index, 300 + index]));
    events.append('task_a', 7, DELTA, 12, delta('!', 'msg_other'), [9]);
    const chunk = (content: string) => ({ id: 'c', choices: [{ index: 0, delta: { content }, finish_reason: null }] });
    events.append('task_a', 8, 'chat.completion.chunk', 12, chunk('ab'), [1]);
    events.append('task_a', 9, 'chat.completion.chunk', 12, chunk('c"d'), [2]);
    events.append('task_a', 10, 'response.output_text.done', 13, { text: 'x' });

    const read = events.after('task_a', 0, 100);
    assert.deepEqual(read.map((event) => event.sequenceNumber), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    assert.deepEqual(read.slice(1, 6).map((event) => event.data), texts.map((text) => JSON.stringify(delta(text))));
    assert.deepEqual(read.slice(1, 6).map((event) => event.type), texts.map(() => DELTA));
    assert.equal(read[6]!.data, JSON.stringify(delta('!', 'msg_other')));
    assert.deepEqual(read.slice(7, 9).map((event) => event.data), [JSON.stringify(chunk('ab')), JSON.stringify(chunk('c"d'))]);
    assert.equal(read[9]!.type, 'response.output_text.done');
    assert.deepEqual(events.after('task_a', 3, 2).map((event) => event.sequenceNumber), [4, 5]);

    const rows = rawRows(db, 'task_a');
    assert.deepEqual(rows.filter((row) => row.shape !== null).map((row) => row.sequence_number), [2, 3, 4, 5, 6, 8, 9]);
    assert.equal(rows[1]!.data, 'Once');
    assert.equal(rows[1]!.type, null);
    assert.equal(rows[6]!.type, DELTA, 'a delta of another shape is stored whole');

    assert.equal(events.outputText('task_a', 0, TEXT), `${texts.join('')}!`);
    assert.equal(events.outputText('task_a', 3, TEXT), `${texts.slice(2).join('')}!`);
    assert.equal(events.outputText('task_a', 0, { type: 'chat.completion.chunk', path: '$.choices[0].delta.content' }), 'abc"d');
    assert.deepEqual(events.snapshotTokens('task_a', 0), [0, 300, 1, 301, 2, 302, 3, 303, 4, 304, 9, 1, 2]);
    assert.deepEqual(events.snapshotTokens('task_a', 5), [4, 304, 9, 1, 2]);

    // The view under the old name reads the same events.
    const view = db.sqlite.prepare("SELECT type, data FROM task_events WHERE task_id = 'task_a' ORDER BY sequence_number").all() as Array<{ type: string; data: string }>;
    assert.deepEqual(view.map((row) => JSON.parse(row.data)), read.map((event) => JSON.parse(event.data)));
    assert.deepEqual(view.map((row) => row.type), read.map((event) => event.type));

    const shapes = () => (db.sqlite.prepare("SELECT count(*) AS n FROM task_event_shapes WHERE task_id = 'task_a'").get() as { n: number }).n;
    assert.equal(shapes(), 2);
    assert.equal(events.deleteSomeForTask('task_a', 4), 4);
    assert.equal(shapes(), 2, 'shapes stay while events use them');
    assert.equal(events.deleteSomeForTask('task_a', 100), 6);
    assert.equal(shapes(), 0);
    events.append('task_b', 1, DELTA, 1, delta('z'), [1]);
    assert.equal(events.deleteForTask('task_b'), 1);
    assert.equal((db.sqlite.prepare('SELECT count(*) AS n FROM task_event_shapes').get() as { n: number }).n, 0);
    db.sqlite.close();
  }));

  test('a database written before 0009 converts with its events, text and tokens unchanged', () => withDataDir((dir) => {
    const old = new BetterSqlite3(join(dir, 'lmsp.db'));
    old.exec('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)');
    for (const migration of loadMigrations().filter((m) => m.version < 9)) {
      old.exec(migration.sql);
      old.prepare('INSERT INTO schema_migrations VALUES (?, ?, 0)').run(migration.version, migration.name);
    }
    const insert = old.prepare('INSERT INTO task_events (task_id, sequence_number, type, created_at, data, tokens) VALUES (?, ?, ?, ?, ?, ?)');
    const written = [
      ['task_a', 1, 'response.created', 5, '{"response":{"id":"resp_a"}}', null],
      ['task_a', 2, DELTA, 6, JSON.stringify(delta('Hello')), fixedWidth([17, 20_000])],
      ['task_a', 3, DELTA, 6, JSON.stringify(delta(', world')), fixedWidth([3])],
      ['task_b', 1, 'response.created', 7, '{}', null],
    ] as const;
    for (const row of written) insert.run(...row);
    old.close();

    const db = Database.open(dir);
    assert.equal(db.schemaVersion, loadMigrations().at(-1)!.version);
    const events = new EventTable(db.sqlite);
    assert.deepEqual(events.after('task_a', 0, 10).map((event) => [event.sequenceNumber, event.type, event.createdAt, event.data]),
      written.filter((row) => row[0] === 'task_a').map((row) => [row[1], row[2], row[3], row[4]]));
    assert.equal(events.outputText('task_a', 0, TEXT), 'Hello, world');
    assert.deepEqual(events.snapshotTokens('task_a', 0), [17, 20_000, 3]);
    assert.equal(events.after('task_b', 0, 10).length, 1);
    // New deltas of a converted task join it compactly, after its old rows.
    events.append('task_a', 4, DELTA, 8, delta('!'), [5]);
    assert.equal(events.outputText('task_a', 0, TEXT), 'Hello, world!');
    assert.equal(events.after('task_a', 3, 10)[0]!.data, JSON.stringify(delta('!')));
    assert.ok(rawRows(db, 'task_a')[3]!.shape !== null);
    db.sqlite.close();
  }));
});
