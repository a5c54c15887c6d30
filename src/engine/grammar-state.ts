/**
 * Grammars in the runner: GBNF parsed once per text, and a grammar state that follows the
 * tokens of a generation. Resuming under a grammar (LMSP 6.1, 7.5) replays the committed tokens
 * into a fresh state; node-llama-cpp 3.21.1 accepts a token into a state only through its
 * bindings (what LlamaChat uses internally), reached here in one place.
 */
import { LlamaGrammarEvaluationState, type Llama, type LlamaGrammar, type LlamaModel, type Token } from 'node-llama-cpp';

interface StateInternals {
  _llama?: { _bindings?: { AddonSampler?: { acceptGrammarEvaluationStateToken?: (state: unknown, token: number) => void } } };
  _state?: unknown;
}

const grammars = new Map<string, Promise<LlamaGrammar>>();
const GRAMMAR_CACHE_SIZE = 16;

/** A parsed grammar, shared by generations with the same GBNF. */
export function grammarFor(llama: Llama, gbnf: string): Promise<LlamaGrammar> {
  let grammar = grammars.get(gbnf);
  if (grammar) {
    grammars.delete(gbnf);
  } else {
    grammar = llama.createGrammar({ grammar: gbnf });
    grammar.catch(() => grammars.delete(gbnf));
  }
  grammars.set(gbnf, grammar);
  while (grammars.size > GRAMMAR_CACHE_SIZE) grammars.delete(grammars.keys().next().value as string);
  return grammar;
}

export function newGrammarState(model: LlamaModel, grammar: LlamaGrammar): LlamaGrammarEvaluationState {
  return new LlamaGrammarEvaluationState({ model, grammar });
}

/** Advances a grammar state by a token that was already generated (a replay). */
export function acceptToken(state: LlamaGrammarEvaluationState, token: Token): void {
  const internals = state as unknown as StateInternals;
  const accept = internals._llama?._bindings?.AddonSampler?.acceptGrammarEvaluationStateToken;
  if (typeof accept !== 'function') {
    throw new Error('this node-llama-cpp cannot advance a grammar state by a token; a constrained generation cannot resume');
  }
  accept(internals._state, token);
}
