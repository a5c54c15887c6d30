/** The client examples run as their headers say, each against the real service. */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, test } from 'node:test';
import { packagePath } from '../../src/paths.js';
import { schemaViolation } from '../helpers/schema-validator.js';
import { pairClient, withService } from '../helpers/service.js';

function runExample(name: string, url: string, token: string): string {
  const result = spawnSync(process.execPath, [packagePath('examples', name)], {
    env: { ...process.env, LMSP_BASE_URL: `${url}/v1`, LMSP_TOKEN: token },
    encoding: 'utf8',
    timeout: 100_000,
  });
  assert.equal(result.status, 0, `${name}: ${result.stderr}`);
  return result.stdout;
}

const PERSON = {
  type: 'object',
  properties: { name: { type: 'string', maxLength: 20 }, age: { type: 'integer', minimum: 0, maximum: 120 } },
  required: ['name', 'age'],
  additionalProperties: false,
};
const ADD = {
  type: 'object',
  properties: { a: { type: 'integer', minimum: 0, maximum: 9 }, b: { type: 'integer', minimum: 0, maximum: 9 } },
  required: ['a', 'b'],
  additionalProperties: false,
};

/** The line `label: {json}` holds an object valid against the example's schema. */
function assertObjectLine(output: string, label: string): void {
  const line = new RegExp(`^${label}: (.+)$`, 'm').exec(output);
  assert.ok(line, `${label} line in:\n${output}`);
  assert.equal(schemaViolation(PERSON, line[1]!), null, line[1]);
}

function assertToolCallLine(output: string): void {
  const line = /^tool call: add\((.+)\)$/m.exec(output);
  assert.ok(line, `tool call line in:\n${output}`);
  assert.equal(schemaViolation(ADD, line[1]!), null, line[1]);
}

const SCORE = '-?\\d\\.\\d{3}';

describe('client examples', () => {
  test('examples/openai-embeddings.mjs', { timeout: 60_000 }, () => withService({}, async (service) => {
    const { token } = await pairClient(service, ['responses'], 'example');
    const output = runExample('openai-embeddings.mjs', service.url, token);
    assert.match(output, /^float: 3 vectors of 64, \d+ tokens$/m);
    assert.match(output, new RegExp(`^similarity: cat~kitten ${SCORE}, cat~stocks ${SCORE}$`, 'm'));
    assert.match(output, /^base64: the same numbers: true$/m);
    assert.match(output, /^dimensions: 16, norm 1\.000000$/m);
  }));

  test('examples/ai-sdk.mjs', { timeout: 120_000 }, () => withService({}, async (service) => {
    const { token } = await pairClient(service, ['responses'], 'example');
    const output = runExample('ai-sdk.mjs', service.url, token);
    assert.match(output, /^embed: 64 dimensions$/m);
    assert.match(output, /^embedMany: 2 vectors, \d+ tokens$/m);
    assert.match(output, new RegExp(`^similarity to "Stocks fell sharply today.": ${SCORE}$`, 'm'));
    assert.match(output, /^generateText \(length\): .+$/m);
    const generated = /^generateText \(length\): (.+)$/m.exec(output)![1];
    assert.equal(/^streamText: (.+)$/m.exec(output)![1], generated, 'the same seed, the same text');
    assert.match(output, /^streamText usage: 30 tokens$/m);
    assertObjectLine(output, 'generateObject');
    assertToolCallLine(output);
  }));

  test('examples/langchain.mjs', { timeout: 120_000 }, () => withService({}, async (service) => {
    const { token } = await pairClient(service, ['responses'], 'example');
    const output = runExample('langchain.mjs', service.url, token);
    assert.match(output, /^embedQuery: 64 dimensions$/m);
    assert.match(output, new RegExp(`^embedDocuments: "The cat sat on the mat." scores ${SCORE}$`, 'm'));
    assert.match(output, /^invoke \(length\): .+$/m);
    assert.equal(/^stream: (.+)$/m.exec(output)![1], /^invoke \(length\): (.+)$/m.exec(output)![1], 'the same seed, the same text');
    assertObjectLine(output, 'withStructuredOutput');
    assertToolCallLine(output);
  }));
});
