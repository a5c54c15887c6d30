import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import type { OutputUnit } from '../../src/engine/engine.js';
import { OutputShaper, type TokenText } from '../../src/engine/output-shaper.js';
import { OutputSplitter } from '../../src/engine/output-splitter.js';
import { childPids } from '../helpers/service.js';
import { runGeneration, sampling, withEngine } from '../helpers/engine.js';

/** Feeds groups (one token each, ids from 1) and returns every unit, as the runner would emit them. */
function shape(groups: readonly string[], stops: readonly string[], replayed = 0): { units: OutputUnit[]; stopped: boolean } {
  const shaper = new OutputShaper(new OutputSplitter('content', null, [], stops));
  const tokenTexts: TokenText[] = groups.map((text, index) => ({ text, tokens: [index + 1] }));
  const units: OutputUnit[] = [];
  if (replayed > 0) shaper.replay(tokenTexts.slice(0, replayed));
  if (shaper.stopped) return { units, stopped: true };
  for (const group of tokenTexts.slice(replayed)) {
    const unit = shaper.push(group);
    if (unit) units.push(unit);
    if (shaper.stopped) return { units, stopped: true };
  }
  const last = shaper.finish();
  if (last) units.push(last);
  // A stop held back behind a longer one that might have begun earlier is found at the end.
  return { units, stopped: shaper.stopped };
}

const textOf = (units: readonly OutputUnit[]) => units.map((unit) => unit.text).join('');
const tokensOf = (units: readonly OutputUnit[]) => units.flatMap((unit) => unit.tokens);

describe('stop sequences (LMSP 13 stop)', () => {
  test('a stop string split across tokens ends the output before it, and is never emitted', () => {
    const { units, stopped } = shape(['ab', 'cX', 'Yd', 'e'], ['XY']);
    assert.equal(stopped, true);
    assert.deepEqual(units, [{ text: 'ab', tokens: [1] }, { text: 'c', tokens: [2, 3] }]);
  });

  test('text that could start a stop string is held until it is known not to', () => {
    const shaper = new OutputShaper(new OutputSplitter('content', null, [], ['XYZ']));
    assert.deepEqual(shaper.push({ text: 'aX', tokens: [1] }), null, 'X might begin XYZ');
    assert.deepEqual(shaper.push({ text: 'Y', tokens: [2] }), null, 'XY might too');
    assert.deepEqual(shaper.push({ text: 'Q', tokens: [3] }), { text: 'aXYQ', tokens: [1, 2, 3] });
    assert.deepEqual(shaper.push({ text: 'X', tokens: [4] }), null);
    assert.deepEqual(shaper.finish(), { text: 'X', tokens: [4] }, 'at the end, held text is output');
  });

  test('of several stop strings, the earliest in the text wins', () => {
    const { units } = shape(['one ', 'two ', 'three'], ['three', 'two', 'e t']);
    assert.equal(textOf(units), 'on');
    // "b" completes first, but "Xba" begins earlier: the output ends before "Xba", whatever the tokens.
    assert.equal(textOf(shape(['Xb', 'a'], ['Xba', 'b']).units), '');
    assert.equal(textOf(shape(['Xb', 'c'], ['Xba', 'b']).units), 'X');
  });

  test('property: the output is the text before the first stop, and a resume from any committed unit continues identically', () => {
    const alphabet = fc.constantFrom('a', 'b', 'X', 'Y');
    fc.assert(fc.property(
      fc.array(fc.string({ unit: alphabet, minLength: 1, maxLength: 3 }), { minLength: 1, maxLength: 25 }),
      fc.array(fc.string({ unit: alphabet, minLength: 1, maxLength: 4 }), { minLength: 0, maxLength: 3 }),
      (groups, stops) => {
        const full = groups.join('');
        const cut = Math.min(...stops.map((stop) => full.indexOf(stop)).filter((at) => at >= 0), full.length);
        const reference = shape(groups, stops);
        assert.equal(textOf(reference.units), full.slice(0, cut));
        assert.equal(reference.stopped, cut < full.length);
        for (const stop of stops) assert.ok(!textOf(reference.units).includes(stop));
        // Commit any prefix of the units, replay its tokens, go on: the same units follow.
        for (let committed = 0; committed <= reference.units.length; committed++) {
          const replayed = tokensOf(reference.units.slice(0, committed)).length;
          const resumed = shape(groups, stops, replayed);
          assert.deepEqual(resumed.units, reference.units.slice(committed), `resume after ${committed} units`);
          assert.equal(resumed.stopped, reference.stopped);
        }
      }), { numRuns: 400 });
  });

  describe('in the engine', () => {
    const messages = [{ role: 'user' as const, content: 'Say something.' }];

    test('lmsp-tiny stops at a stop string spread over several tokens, at the earliest of several', { timeout: 60_000 }, () => withEngine({}, async ({ engine, tiny }) => {
      const full = await runGeneration(engine, tiny, { messages, sampling: sampling(5, 80) });
      assert.equal(full.finishReason, 'max_output_tokens');
      const text = full.text;
      const stop = text.slice(30, 34);
      const stopped = await runGeneration(engine, tiny, { messages, sampling: sampling(5, 80), stop: [stop] });
      assert.equal(stopped.finishReason, 'stop');
      assert.equal(stopped.text, text.slice(0, text.indexOf(stop)));
      const earlier = text.slice(12, 15);
      const both = await runGeneration(engine, tiny, { messages, sampling: sampling(5, 80), stop: [stop, earlier] });
      assert.equal(both.text, text.slice(0, Math.min(text.indexOf(stop), text.indexOf(earlier))));
      const never = await runGeneration(engine, tiny, { messages, sampling: sampling(5, 80), stop: [`${text.slice(20, 40)}\u0001`] });
      assert.equal(never.finishReason, 'max_output_tokens');
      assert.equal(never.text, text, 'held text is released when it turns out not to stop');
      assert.deepEqual(never.tokens, full.tokens);
    }));

    for (const matches of [false, true]) {
      test(`a runner killed while it holds back a possible stop string resumes to the same output (${matches ? 'the stop then matches' : 'it never matches'})`,
        { timeout: 120_000 }, () => withEngine({ tokenDelayMs: 25 }, async ({ engine, tiny }) => {
          const request = { messages, sampling: sampling(9, 70) };
          const full = await runGeneration(engine, tiny, request);
          // Positions 10 to 40 begin the stop string: the runner holds them back for 30 tokens.
          const stop = matches ? full.text.slice(10, 40) : `${full.text.slice(10, 40)}\u0001`;
          const uninterrupted = await runGeneration(engine, tiny, { ...request, stop: [stop] });
          assert.equal(uninterrupted.text, matches ? full.text.slice(0, 10) : full.text);
          const taskId = `task_stop_${matches}`;
          let killed = false;
          const committed: OutputUnit[] = [];
          await assert.rejects(runGeneration(engine, tiny, { ...request, stop: [stop], taskId }, {
            onUnit: (unit) => {
              committed.push(unit);
              if (!killed && textOf(committed).length >= 10) {
                killed = true;
                for (const pid of childPids(process.pid)) process.kill(pid, 'SIGKILL');
              }
            },
          }), { name: 'EngineExited' });
          assert.equal(textOf(committed), full.text.slice(0, 10), 'killed while holding back');
          const resumed = await runGeneration(engine, tiny, { ...request, stop: [stop], taskId, resumeTokens: tokensOf(committed) });
          assert.equal(resumed.finishReason, uninterrupted.finishReason);
          assert.equal(textOf(committed) + resumed.text, uninterrupted.text);
          assert.deepEqual([...tokensOf(committed), ...resumed.tokens], uninterrupted.tokens);
        }));
    }
  });
});
