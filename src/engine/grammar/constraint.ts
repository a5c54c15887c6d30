/**
 * The grammar of one generation, from what the request asks of its output (LMSP 6.1, 6.2): a
 * JSON object or a schema, a forced call of one of the tools (`required` or a named function),
 * or `auto`, where the model may write text and then call tools through its chat template's
 * call syntax. `none` with tools keeps the call syntax out of the text.
 */
import type { OutputFormat, ToolChoice, ToolDefinition } from '../types.js';
import { MAX_SCHEMA_WORK, withWorkBudget } from './automaton.js';
import { gbnfAlternatives, gbnfClass, gbnfLiteral, GbnfRuleSet } from './gbnf.js';
import { JsonSchemaTranslator } from './json-schema.js';
import { UnsupportedSchemaError } from './schema-keywords.js';

/** How a model writes a tool call: prefix, name, paramsPrefix, arguments (JSON), suffix. */
export interface ToolCallSyntax {
  prefix: string;
  paramsPrefix: string;
  suffix: string;
  /** Between two calls of one turn; null when the model writes one call per turn. */
  betweenCalls: string | null;
}

/** How the output splits into message content and tool calls (see output-splitter.ts). */
export type OutputLayout =
  /** Content only: no calls can be written. */
  | 'content'
  /** Calls only, from the first character. */
  | 'calls'
  /** Text, then optionally calls: a call starts where the text first holds the call prefix. */
  | 'text-then-calls'
  /** Either content (JSON) or calls, decided by the first characters. */
  | 'content-or-calls';

export interface GenerationConstraint {
  format: OutputFormat;
  tools: readonly ToolDefinition[];
  toolChoice: ToolChoice;
  parallelToolCalls: boolean;
}

export interface ConstraintGrammar {
  /** GBNF, or null when the output is free text. */
  grammar: string | null;
  layout: OutputLayout;
}

/** The grammar of a generation, at most this large (a bigger schema is unsupported). */
export const MAX_GRAMMAR_BYTES = 2 << 20;
/** One turn writes at most this many parallel calls. */
export const MAX_PARALLEL_TOOL_CALLS = 16;
/** Tool names as OpenAI allows them; they sit inside the call syntax unescaped. */
const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;

function newRules(): GbnfRuleSet {
  return new GbnfRuleSet(MAX_GRAMMAR_BYTES, () => {
    throw new UnsupportedSchemaError('size', '', `the schema would need a grammar over ${MAX_GRAMMAR_BYTES} bytes`);
  });
}

export type SchemaSupport = { ok: true } | { ok: false; keyword: string; pointer: string; message: string };

/**
 * Whether a JSON Schema can be enforced; if not, the keyword and where it is, for a 400
 * `unsupported_schema` (LMSP 6.1). It runs the same translation as generation does.
 */
export function checkSchemaSupported(schema: unknown): SchemaSupport {
  try {
    withWorkBudget(() => new JsonSchemaTranslator(newRules()).translate(schema), MAX_SCHEMA_WORK);
    return { ok: true };
  } catch (error) {
    if (error instanceof UnsupportedSchemaError) return { ok: false, keyword: error.keyword, pointer: error.pointer, message: error.message };
    throw error;
  }
}

export type ToolsSupport = SchemaSupport & { toolIndex?: number };

/**
 * The schema of a text format that generation puts in one grammar with the tools' calls: under
 * `tool_choice` `auto` (or none given) the model may write either; under the others, calls only.
 */
export function formatBesideCalls(toolChoice: unknown, format: { type: string; schema?: unknown } | undefined): unknown {
  const auto = toolChoice === undefined || toolChoice === null || toolChoice === 'auto';
  return auto && format?.type === 'json_schema' ? format.schema : undefined;
}

/** Whether every tool has a usable name and parameters the grammar can enforce. */
export function checkToolsSupported(tools: readonly ToolDefinition[], alongside?: unknown): ToolsSupport {
  // One budget for all the tools of a request (automaton.ts: bounded work on the request thread),
  // and one more for a format beside them, as generation has.
  return withWorkBudget(() => checkEachTool(tools, alongside), alongside === undefined ? MAX_SCHEMA_WORK : 2 * MAX_SCHEMA_WORK);
}

/**
 * `alongside`: the schema of a text format the model may write instead of calls (`tool_choice`
 * `auto`), checked already, which generation puts in the same grammar: its size counts too.
 */
function checkEachTool(tools: readonly ToolDefinition[], alongside?: unknown): ToolsSupport {
  const names = new Set<string>();
  const translator = new JsonSchemaTranslator(newRules());
  const withFormat = alongside !== undefined && tools.length > 0;
  if (withFormat) withWorkBudget(() => translator.translate(alongside), MAX_SCHEMA_WORK);
  for (const [index, tool] of tools.entries()) {
    if (!TOOL_NAME.test(tool.name) || names.has(tool.name)) {
      const message = names.has(tool.name) ? `The tool name ${JSON.stringify(tool.name)} is used by more than one tool; names must be unique.`
        : `The tool name ${JSON.stringify(tool.name)} must match ${TOOL_NAME.source}.`;
      return { ok: false, toolIndex: index, keyword: 'name', pointer: '', message };
    }
    names.add(tool.name);
    const parameters = toolParameters(tool);
    if (parameters.type !== 'object' || parameters.nullable === true) {
      // As OpenAI: the arguments are a JSON object (clients parse them as one), never a bare
      // value, nor null (OpenAPI's `nullable` is `type: ["object", "null"]` written otherwise).
      const nullable = parameters.type === 'object';
      return {
        ok: false, toolIndex: index, keyword: nullable ? 'nullable' : 'type', pointer: '',
        message: nullable ? 'the parameters of a function must be a JSON Schema of type "object", which cannot be nullable'
          : `the parameters of a function must be a JSON Schema of type "object", not ${JSON.stringify(parameters.type ?? null)}`,
      };
    }
    // One grammar holds every tool's parameters, as generation builds it: one size limit for all.
    try {
      translator.translate(parameters);
    } catch (error) {
      if (!(error instanceof UnsupportedSchemaError)) throw error;
      const message = error.keyword !== 'size' ? error.message
        : `${withFormat ? "the text format's schema and " : ''}the parameters of the tools up to this one would need a grammar over ${MAX_GRAMMAR_BYTES} bytes`;
      return { ok: false, toolIndex: index, keyword: error.keyword, pointer: error.pointer, message };
    }
  }
  return { ok: true };
}

/** A tool without parameters takes an empty object. */
export function toolParameters(tool: ToolDefinition): Record<string, unknown> {
  return tool.parameters ?? { type: 'object', properties: {} };
}

/**
 * Text that never contains `needle`, by the automaton of its partial matches (KMP): state i
 * means the text ends with the first i characters of the needle. When `then` is given, writing
 * the whole needle is allowed and continues with `then`; otherwise it cannot be written.
 */
function textAvoiding(rules: GbnfRuleSet, needle: string, then: string | null): string {
  const chars = [...needle];
  const alphabet = [...new Set(chars)];
  const failure: number[] = [0];
  for (let i = 1, k = 0; i < chars.length; i++) {
    while (k > 0 && chars[i] !== chars[k]) k = failure[k - 1]!;
    if (chars[i] === chars[k]) k++;
    failure[i] = k;
  }
  const step = (state: number, char: string): number => {
    let k = state;
    while (k > 0 && chars[k] !== char) k = failure[k - 1]!;
    return chars[k] === char ? k + 1 : 0;
  };
  const names = chars.map(() => rules.reserve('text'));
  const other = gbnfClass(alphabet.map((char) => [char.codePointAt(0)!, char.codePointAt(0)!] as [number, number]), true);
  chars.forEach((_, state) => {
    const options = ['""', `${other} ${names[0]}`];
    for (const char of alphabet) {
      const next = step(state, char);
      if (next < chars.length) options.push(`${gbnfLiteral(char)} ${names[next]}`);
      else if (then !== null) options.push(`${gbnfLiteral(char)} ${then}`);
    }
    rules.set(names[state]!, options.join(' | '));
  });
  return names[0]!;
}

/** One or more calls after the first prefix has been written. */
function callsAfterPrefix(rules: GbnfRuleSet, translator: JsonSchemaTranslator, tools: readonly ToolDefinition[], syntax: ToolCallSyntax, parallel: boolean): string {
  const bodies = tools.map((tool, index) => {
    let parameters: string;
    try {
      parameters = translator.translate(toolParameters(tool));
    } catch (error) {
      if (error instanceof UnsupportedSchemaError) {
        throw new UnsupportedSchemaError(error.keyword, `/tools/${index}/parameters${error.pointer}`, `tool ${tool.name}: ${error.message}`);
      }
      throw error;
    }
    return rules.define(`call-${tool.name}`, `${gbnfLiteral(tool.name + syntax.paramsPrefix)} ${parameters} ${gbnfLiteral(syntax.suffix)}`);
  });
  const body = rules.define('call-body', gbnfAlternatives(bodies));
  if (!parallel || syntax.betweenCalls === null) return body;
  const more = rules.repeat(`${gbnfLiteral(syntax.betweenCalls + syntax.prefix)} ${body}`, 0, MAX_PARALLEL_TOOL_CALLS - 1);
  return rules.define('calls-after-prefix', `${body} ${more}`);
}

/** The grammar and the output layout of a generation; throws UnsupportedSchemaError. */
export function constraintGrammar(constraint: GenerationConstraint, syntax: ToolCallSyntax): ConstraintGrammar {
  // The request's checks gave its format and its tools a budget each: together they fit in two.
  return withWorkBudget(() => buildConstraintGrammar(constraint, syntax), 2 * MAX_SCHEMA_WORK);
}

function buildConstraintGrammar(constraint: GenerationConstraint, syntax: ToolCallSyntax): ConstraintGrammar {
  const rules = newRules();
  const translator = new JsonSchemaTranslator(rules);
  const content = (): string | null => {
    if (constraint.format.type === 'json_object') return translator.json.object;
    if (constraint.format.type === 'json_schema') return translator.translate(constraint.format.schema);
    return null;
  };
  const choice = constraint.toolChoice;
  if (constraint.tools.length === 0 || choice === 'none') {
    const json = content();
    if (json !== null) return { grammar: rules.render(json), layout: 'content' };
    // Tools the model was shown but may not call: keep their call syntax out of the text.
    if (constraint.tools.length > 0) return { grammar: rules.render(textAvoiding(rules, syntax.prefix, null)), layout: 'content' };
    return { grammar: null, layout: 'content' };
  }
  const allowed = typeof choice === 'object' ? constraint.tools.filter((tool) => tool.name === choice.name) : constraint.tools;
  if (allowed.length === 0) {
    throw new UnsupportedSchemaError('tool_choice', '', `tool_choice names ${JSON.stringify((choice as { name: string }).name)}, which is not among the tools`);
  }
  const calls = callsAfterPrefix(rules, translator, allowed, syntax, constraint.parallelToolCalls);
  if (choice !== 'auto') return { grammar: rules.render(`${gbnfLiteral(syntax.prefix)} ${calls}`), layout: 'calls' };
  const json = content();
  if (json !== null) return { grammar: rules.render(`${json} | ${gbnfLiteral(syntax.prefix)} ${calls}`), layout: 'content-or-calls' };
  return { grammar: rules.render(textAvoiding(rules, syntax.prefix, calls)), layout: 'text-then-calls' };
}

