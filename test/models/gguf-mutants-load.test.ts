/**
 * LMSP 5, "no file can crash the service": files the validator accepts are not necessarily
 * models llama.cpp can run. A handful of accepted mutants of lmsp-tiny (metadata that lies about
 * the shapes, a vocabulary that does not fit, corrupted weights, random header flips the
 * validator lets through) are registered and used, so a runner process loads each as it would a
 * real model. Whatever a runner does (load, refuse, crash), the service process answers every
 * request, records a finished task, and still serves lmsp-tiny afterwards. What happened to each
 * mutant is printed as a diagnostic.
 */
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import type { TaskObject } from '../../src/api/types.js';
import type { GgufTensor, GgufValue } from '../../src/engine/gguf-writer.js';
import { buildSyntheticModel, LMSP_TINY } from '../../src/engine/synthetic-model.js';
import { validateGgufFile } from '../../src/models/gguf-validator.js';
import { makeDataDir } from '../helpers/data-dir.js';
import { ggufBytes, mapHeader, tinyBytes, writeModel } from '../helpers/gguf.js';
import { applyMutations, mutationArbitrary, type Mutation } from '../helpers/gguf-mutations.js';
import { api, waitFor, withService } from '../helpers/service.js';

const FINISHED = new Set(['completed', 'incomplete', 'failed', 'cancelled']);

function tinyWith(key: string, value: GgufValue | null, tensors?: (list: GgufTensor[]) => GgufTensor[]): Buffer {
  const file = buildSyntheticModel(LMSP_TINY);
  const metadata = file.metadata.filter(([name]) => name !== key);
  if (value) metadata.push([key, value]);
  return ggufBytes({ metadata, tensors: tensors ? tensors([...file.tensors]) : file.tensors });
}

/** Mutants the validator has to accept: each is structurally sound GGUF that lies about the model. */
function semanticMutants(): Array<[string, Buffer]> {
  return [
    ['more layers than tensors', tinyWith('llama.block_count', { type: 'u32', value: 1000 })],
    ['an embedding length that fits no tensor', tinyWith('llama.embedding_length', { type: 'u32', value: 65 })],
    ['zero attention heads', tinyWith('llama.attention.head_count', { type: 'u32', value: 0 })],
    ['a beginning-of-sequence token outside the vocabulary', tinyWith('tokenizer.ggml.bos_token_id', { type: 'u32', value: 1_000_000 })],
    ['no vocabulary', tinyWith('tokenizer.ggml.tokens', null)],
    ['weights that are all NaN', tinyWith('', null, (list) => list.map((tensor) => ({ ...tensor, values: () => new Float32Array(tensor.dims.reduce((a, b) => a * b, 1)).fill(Number.NaN) })))],
  ];
}

/** The first few random mutants, from a fixed seed, that the validator accepts and that change the header. */
async function acceptedRandomMutants(dir: string, wanted: number): Promise<Array<[string, Buffer]>> {
  const original = tinyBytes();
  const map = mapHeader(original);
  const headerOnly = mutationArbitrary(original.length, map).filter((mutation) => mutation.kind !== 'truncate' && mutation.kind !== 'insert');
  const samples = fc.sample(fc.array(headerOnly, { minLength: 1, maxLength: 3 }), { seed: 0x6d757461, numRuns: 2000 });
  const found: Array<[string, Buffer]> = [];
  for (const mutations of samples) {
    const bytes = applyMutations(original, mutations);
    if (bytes.subarray(0, map.headerEnd).equals(original.subarray(0, map.headerEnd))) continue;
    const ok = await validateGgufFile(writeModel(dir, 'probe.gguf', bytes)).then(() => true, () => false);
    if (ok) found.push([`random header mutation ${summarize(mutations)}`, bytes]);
    if (found.length === wanted) break;
  }
  return found;
}

function summarize(mutations: readonly Mutation[]): string {
  return mutations.map((mutation) => JSON.stringify(mutation, (_, value: unknown) => (typeof value === 'bigint' ? String(value) : value))).join(' ');
}

describe('accepted mutants loaded by a runner (LMSP 5: no file can crash the service)', () => {
  test('a runner may refuse or crash on an accepted mutant; the service answers, records the task and serves on', (t) => withService({}, async (service) => {
    const probes = makeDataDir('gguf-mutants');
    const mutants = [...semanticMutants(), ...(await acceptedRandomMutants(probes, 2))];
    rmSync(probes, { recursive: true, force: true });
    assert.ok(mutants.length >= 8, 'enough accepted mutants to load');
    const outcomes: string[] = [];
    for (const [index, [what, bytes]] of mutants.entries()) {
      const id = `mutant-${index}`;
      writeModel(join(service.dataDir, 'models'), `${id}.gguf`, bytes);
      const created = await api(service, '/v1/models', { method: 'POST', json: { path: `${id}.gguf`, id } });
      assert.equal(created.status, 201, `${what} is accepted: ${await created.clone().text()}`);
      const started = await service.client.createResponse({ model: id, input: 'hi', max_output_tokens: 3, background: true });
      assert.equal(started.status, 202);
      const task = await waitFor(async () => {
        const current: TaskObject = await service.client.getTask(started.body.task.id);
        return FINISHED.has(current.status) ? current : null;
      }, { timeoutMs: 120_000, what: `the task on ${what} to finish` });
      outcomes.push(`${what}: ${task.status}${task.error ? ` (${task.error.code}: ${task.error.message.slice(0, 160)})` : ''}`);
      const health = await fetch(`${service.url}/healthz`);
      assert.equal(health.status, 200, `the service answers after ${what}`);
      assert.equal(service.child.exitCode, null);
    }
    for (const outcome of outcomes) t.diagnostic(outcome);
    const tiny = await service.client.createResponse({ model: 'lmsp-tiny', input: 'hi', max_output_tokens: 3 });
    assert.equal(tiny.body.status, 'incomplete', 'lmsp-tiny still serves');
  }));
});

describe('what a runner prints about a model file stays inside the service log (LMSP 5)', () => {
  test('a file whose strings hold log lines or terminal escapes of their own cannot add lines to the JSON log or reach a terminal: every line is the service\'s, the runner\'s text a field, its control characters written out', () =>
    withService({}, async (service) => {
      const forged = '{"level":60,"time":1,"pid":1,"msg":"FORGED by model file"}';
      writeModel(join(service.dataDir, 'models'), 'forger.gguf', tinyWith('tokenizer.ggml.model', { type: 'string', value: `zz\u001b[2J\u001b[31m\n${forged}\n` }));
      assert.equal((await api(service, '/v1/models', { method: 'POST', json: { path: 'forger.gguf', id: 'forger' } })).status, 201);
      const started = await service.client.createResponse({ model: 'forger', input: 'hi', max_output_tokens: 3, background: true });
      const task = await waitFor(async () => {
        const current: TaskObject = await service.client.getTask(started.body.task.id);
        return FINISHED.has(current.status) ? current : null;
      }, { timeoutMs: 120_000, what: 'the task on the forging model to finish' });
      assert.equal(task.status, 'failed');
      // llama.cpp quotes the tokenizer's name as it refuses it: seen in the log, as a field of a line.
      const lines = await waitFor(() => {
        const output = service.output().split('\n').filter((line) => line !== '');
        return output.some((line) => line.includes('FORGED')) ? output : null;
      }, { what: 'the runner to say what it refused' });
      for (const line of lines) {
        const entry = JSON.parse(line) as { level: number; msg: string; pid: number };
        assert.equal(entry.pid, service.pid, `a line of the service: ${line}`);
        assert.notEqual(entry.msg, 'FORGED by model file', 'no line forged by the file');
        assert.ok(!/[^\P{Cc}\t]/u.test(entry.msg), `no control character reaches a terminal: ${JSON.stringify(entry.msg)}`);
      }
      assert.ok(lines.some((line) => (JSON.parse(line) as { msg: string; output?: string }).output === 'stderr'), 'the runner\'s output logged as its own lines');
    }));
});
