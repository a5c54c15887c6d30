/**
 * JSON Schema to GBNF (LMSP 6.1): a grammar whose every complete output is a JSON value valid
 * against the schema. Where a keyword cannot be enforced, the translation throws
 * UnsupportedSchemaError naming it, so the API answers 400 `unsupported_schema` instead of
 * ignoring it. The grammar may generate only part of the valid values (properties in declared
 * order, no undeclared properties, bounded numbers); it never generates an invalid one.
 */
import { gbnfAlternatives, gbnfLiteral, gbnfSequence, type GbnfRuleSet } from './gbnf.js';
import { formatPattern, jsonLiteral, JsonRules } from './json-values.js';
import { boundedInteger, boundedNumber, MAX_GENERATED_INTEGER, multiplesOf, patternToGbnf, type NumberBounds } from './numbers.js';
import { dfaToGbnf, intersectAll, patternConstraints, stringsOf, trim, wholeMatches, withLength, withWorkBudget, WRITABLE, type Dfa } from './automaton.js';
import { hasLookahead, nodeToGbnf, parsePattern, UnsupportedPattern, MAX_PATTERN_REPETITION, type ParsedPattern } from './regex.js';
import {
  ANNOTATION_KEYWORDS, ARRAY_KEYWORDS, canonicalJson, declaredTypes, ENFORCED_KEYWORDS, isSchemaObject, literalSatisfies,
  NUMBER_KEYWORDS, OBJECT_KEYWORDS, pointerSegment, STRING_KEYWORDS, UnsupportedSchemaError, type JsonType, type Schema,
} from './schema-keywords.js';
import { MAX_ONE_OF_PAIRS, oneOfIsDisjoint } from './one-of.js';
import { checkSchemaValues } from './schema-values.js';
import { quoteShort } from '../../text.js';

/**
 * Enum and const values in one grammar at most. llama.cpp keeps a stack for each alternative it
 * could be in: building and stepping a grammar of 20,000 literals took 1.4 s, of 60,000 about 26 s
 * (on a 2-core machine), all of it holding the generation slot.
 */
export const MAX_LITERAL_VALUES = 10_000;

/** The most branches a oneOf may have whose pairs are compared one by one. */
const MAX_ONE_OF_BRANCHES = Math.floor((1 + Math.sqrt(1 + 8 * MAX_ONE_OF_PAIRS)) / 2);

/** Repetition bounds (minLength, minItems, ...) above this are not expanded into a grammar. */
export const MAX_REPETITION = MAX_PATTERN_REPETITION;
/** Schemas nested deeper than this are refused. */
const MAX_DEPTH = 64;
/** Multiples are listed one by one up to this many; beyond, only small steps without bounds. */
const MAX_LISTED_MULTIPLES = 1000;
const MAX_MULTIPLE_STEP = 50;

function unsupported(keyword: string, pointer: string, message: string): never {
  throw new UnsupportedSchemaError(keyword, `${pointer}${pointerSegment(keyword)}`, message);
}

function nonNegativeInteger(schema: Schema, keyword: string, pointer: string): number | null {
  const value = schema[keyword];
  if (value === undefined) return null;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) unsupported(keyword, pointer, `${keyword} must be a non-negative integer`);
  return value;
}

/** Translates the schemas of one grammar (a json_schema format, or every tool's parameters). */
export class JsonSchemaTranslator {
  readonly json: JsonRules;
  private readonly refRules = new Map<string, string>();

  constructor(readonly rules: GbnfRuleSet) {
    this.json = new JsonRules(rules);
  }

  /** The enum and const values written so far, in every schema this translator has read. */
  literalValues = 0;

  /** `$ref` rules whose bodies are being translated; meeting one again is a cycle. */
  readonly pendingRefs = new Set<string>();
  /** Whether the document being translated has a `$ref` cycle. */
  sawCycle = false;

  /** The GBNF expression of a whole schema document (its own `$ref`s resolve within it). */
  translate(root: unknown): string {
    checkSchemaValues(root);
    this.sawCycle = false;
    const expression = new SchemaScope(this, root).visit(root, '', new Set(), 0);
    // A cycle that every value must go around again (`{"properties": {"a": {"$ref": "#"}},
    // "required": ["a"]}`) is satisfied by no finite JSON: the model would write until its limit.
    // Where only some values would (an optional property of such a schema), the grammar's render
    // leaves those out.
    if (this.sawCycle && !this.rules.isFinite(expression)) {
      unsupported('$ref', '', 'the schema has no finite value lmsp can write: each of its $ref cycles must be gone around again (a recursive property that is required, or a tuple item, which is always written)');
    }
    return expression;
  }

  /** The rule of each combination of string constraints met so far: equal fields cost one automaton. */
  readonly stringRules = new Map<string, string>();

  refRule(key: string): string | undefined {
    return this.refRules.get(key);
  }

  setRefRule(key: string, name: string): void {
    this.refRules.set(key, name);
  }
}

/** Whether a schema accepts every value: `true`, or an object of annotations only (`{}`). */
function acceptsEverything(schema: unknown): boolean {
  return schema === true || (isSchemaObject(schema) && Object.keys(schema).every((keyword) => ANNOTATION_KEYWORDS.has(keyword) || keyword.startsWith('x-')));
}

/**
 * A schema without its `propertyNames`, as properties the grammar enforces. Every key of a JSON
 * object is a string, and Zod's records write `propertyNames: {type: "string"}`: that constrains
 * nothing left to enforce. Keys from an `enum` or `const` (Zod's `z.record(z.enum([...]), V)`)
 * become the only properties, each with its own schema or the `additionalProperties` one. Any
 * other `propertyNames` is refused.
 */
function withoutKeyNames(schema: Schema, pointer: string): Schema {
  if (schema.propertyNames === undefined) return schema;
  const names = schema.propertyNames;
  const { propertyNames: _names, ...rest } = schema;
  const others = isSchemaObject(names) ? Object.entries(names).filter(([keyword, value]) =>
    !(keyword === 'type' && value === 'string') && !ANNOTATION_KEYWORDS.has(keyword) && !keyword.startsWith('x-')) : [];
  if (names === true || (isSchemaObject(names) && others.length === 0)) return rest;
  const listed = isSchemaObject(names) && others.length === 1 && (others[0]![0] === 'enum' || others[0]![0] === 'const')
    ? (others[0]![0] === 'enum' ? others[0]![1] : [others[0]![1]]) : null;
  if (!Array.isArray(listed) || !listed.every((key) => typeof key === 'string')) {
    unsupported('propertyNames', pointer, 'propertyNames is supported when every key satisfies it (true, {} or {"type": "string"}) or as an enum or const of strings');
  }
  const declared = isSchemaObject(rest.properties) ? rest.properties : {};
  const extra = rest.additionalProperties;
  const properties: Schema = {};
  for (const key of new Set(listed as string[])) {
    const value = Object.hasOwn(declared, key) ? declared[key] : extra === undefined ? true : extra;
    if (value === false) continue;
    Object.defineProperty(properties, key, { value, enumerable: true, writable: true, configurable: true });
  }
  for (const key of Array.isArray(rest.required) ? rest.required : []) {
    if (!Object.hasOwn(properties, String(key))) unsupported('propertyNames', pointer, `required property ${JSON.stringify(key)} is not among the keys propertyNames allows`);
  }
  return { ...rest, properties, additionalProperties: false };
}

/** One schema document: resolves its `$ref`s and walks its subschemas. */
class SchemaScope {
  private static documents = 0;
  private readonly id = SchemaScope.documents++;
  /** Where each property of an object merged from allOf parts is declared. */
  private readonly mergedPointers = new WeakMap<object, ReadonlyMap<string, string>>();

  constructor(private readonly translator: JsonSchemaTranslator, private readonly root: unknown) {}

  private get json(): JsonRules {
    return this.translator.json;
  }

  private get rules(): GbnfRuleSet {
    return this.translator.rules;
  }

  /**
   * `left` holds the `$ref`s entered since the last character the grammar consumed: meeting one
   * again would be left recursion, which llama.cpp cannot parse.
   */
  visit(given: unknown, pointer: string, left: ReadonlySet<string>, depth: number): string {
    if (depth > MAX_DEPTH) throw new UnsupportedSchemaError('depth', pointer, `the schema nests deeper than ${MAX_DEPTH} levels`);
    if (given === true) return this.json.value;
    if (given === false) throw new UnsupportedSchemaError('false', pointer, 'the schema false accepts no value');
    if (!isSchemaObject(given)) throw new UnsupportedSchemaError('type', pointer, 'a schema must be an object or a boolean');
    const schema = withoutKeyNames(given, pointer);
    for (const keyword of Object.keys(schema)) {
      if (!ENFORCED_KEYWORDS.has(keyword) && !ANNOTATION_KEYWORDS.has(keyword) && !keyword.startsWith('x-')) {
        unsupported(keyword, pointer, `${keyword} is not supported`);
      }
    }
    const constraints = Object.keys(schema).filter((keyword) => ENFORCED_KEYWORDS.has(keyword));
    if (schema.$ref !== undefined) {
      const others = constraints.filter((keyword) => keyword !== '$ref');
      if (others.length > 0) unsupported(others[0]!, pointer, `${others[0]} beside $ref is not supported`);
      return this.ref(schema.$ref, pointer, left, depth);
    }
    if (schema.allOf !== undefined) {
      const merged = this.mergeAllOf(schema, pointer);
      return this.visit(merged.schema, merged.pointer, left, depth + 1);
    }
    for (const keyword of ['anyOf', 'oneOf'] as const) {
      if (schema[keyword] === undefined) continue;
      const others = constraints.filter((other) => other !== keyword);
      if (others.length > 0) unsupported(others[0]!, pointer, `${others[0]} beside ${keyword} is not supported`);
      const branches = schema[keyword];
      if (!Array.isArray(branches) || branches.length === 0) unsupported(keyword, pointer, `${keyword} must be a non-empty array`);
      const overlap = keyword === 'oneOf' ? oneOfIsDisjoint(branches, (ref) => this.resolve(ref, pointer)) : 'disjoint';
      if (overlap === 'overlapping') {
        unsupported('oneOf', pointer, 'oneOf is supported only when no value can match two branches (different types, or different const values)');
      }
      if (overlap === 'too-many') {
        unsupported('oneOf', pointer, `oneOf is supported with more than ${MAX_ONE_OF_BRANCHES} branches only when they are all literal values, or all objects told apart by one required property`);
      }
      return gbnfAlternatives(branches.map((branch, index) => this.visit(branch, `${pointer}/${keyword}/${index}`, left, depth + 1)));
    }
    if (schema.enum !== undefined || schema.const !== undefined) return this.literals(schema, pointer);
    const types = declaredTypes(schema, pointer) ?? inferredTypes(schema);
    if (types === null) return this.json.value;
    return gbnfAlternatives(types.map((type) => this.typed(type, schema, pointer, depth)));
  }

  private ref(ref: unknown, pointer: string, left: ReadonlySet<string>, depth: number): string {
    const target = this.resolve(ref, pointer);
    const key = `${this.id}:${ref as string}`;
    if (left.has(key)) unsupported('$ref', pointer, `${ref as string} refers back to itself before any character is written`);
    const cached = this.translator.refRule(key);
    if (cached) {
      if (this.translator.pendingRefs.has(cached)) this.translator.sawCycle = true;
      return cached;
    }
    const name = this.rules.reserve(`ref-${String(ref).split('/').pop()}`);
    this.translator.setRefRule(key, name);
    this.translator.pendingRefs.add(name);
    try {
      this.rules.set(name, this.visit(target, String(ref).slice(1), new Set([...left, key]), depth + 1));
    } finally {
      this.translator.pendingRefs.delete(name);
    }
    return name;
  }

  /** A local reference: `#` or a JSON pointer from the root (`#/$defs/name`, `#/definitions/name`, ...). */
  private resolve(ref: unknown, pointer: string): unknown {
    if (typeof ref !== 'string' || !ref.startsWith('#') || (ref.length > 1 && !ref.startsWith('#/'))) {
      unsupported('$ref', pointer, `only references within the schema (#/...) are supported, not ${JSON.stringify(ref)}`);
    }
    let node: unknown = this.root;
    const path = ref.slice(2);
    for (const raw of path === '' ? [] : path.split('/')) {
      const segment = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
      // Own members only: `#/constructor` or `#/__proto__` names nothing in a schema.
      node = (isSchemaObject(node) || Array.isArray(node)) && Object.hasOwn(node, segment) ? (node as Record<string, unknown>)[segment] : undefined;
      if (node === undefined) unsupported('$ref', pointer, `${ref} does not exist in the schema`);
    }
    return node;
  }

  /**
   * allOf whose parts are objects that all allow extra properties merge into one object. Its
   * properties are named, in errors, where their part declares them (`/allOf/1/properties/b`).
   */
  private mergeAllOf(schema: Schema, pointer: string): { schema: unknown; pointer: string } {
    const parts = schema.allOf;
    if (!Array.isArray(parts) || parts.length === 0) unsupported('allOf', pointer, 'allOf must be a non-empty array');
    const { allOf: _allOf, ...rest } = schema;
    const siblings = Object.keys(rest).filter((keyword) => ENFORCED_KEYWORDS.has(keyword));
    if (parts.length === 1 && siblings.length === 0) return { schema: parts[0], pointer: `${pointer}/allOf/0` };
    const all = [...parts.map((part) => (isSchemaObject(part) && typeof part.$ref === 'string' ? this.resolve(part.$ref, pointer) : part)), ...(siblings.length > 0 ? [rest] : [])];
    const properties: Schema = {};
    const pointers = new Map<string, string>();
    const required = new Set<string>();
    for (const [index, part] of all.entries()) {
      // A part given as a `$ref` is named where it is defined (`/$defs/B`), as its properties are.
      const ref = index < parts.length && isSchemaObject(parts[index]) ? (parts[index] as Schema).$ref : undefined;
      const defined = typeof ref === 'string' && ref.startsWith('#') ? safeDecode(ref.slice(1)) : null;
      const partPointer = index >= parts.length ? pointer : defined ?? `${pointer}/allOf/${index}`;
      const mergeable = isSchemaObject(part)
        && Object.keys(part).every((keyword) => ['type', 'properties', 'required', 'additionalProperties'].includes(keyword) || ANNOTATION_KEYWORDS.has(keyword) || keyword.startsWith('x-'))
        && (part.type === undefined || part.type === 'object')
        && (part.additionalProperties === undefined || acceptsEverything(part.additionalProperties));
      if (!mergeable) unsupported('allOf', pointer, 'allOf is supported for one schema, or for object schemas that do not forbid extra properties');
      for (const [key, value] of Object.entries(isSchemaObject(part.properties) ? part.properties : {})) {
        if (Object.hasOwn(properties, key)) unsupported('allOf', pointer, `allOf parts both declare property ${JSON.stringify(key)}`);
        Object.defineProperty(properties, key, { value, enumerable: true, writable: true, configurable: true });
        pointers.set(key, `${partPointer}/properties${pointerSegment(key)}`);
      }
      for (const key of Array.isArray(part.required) ? part.required : []) required.add(String(key));
    }
    const merged = { type: 'object', properties, required: [...required] };
    this.mergedPointers.set(merged, pointers);
    return { schema: merged, pointer: `${pointer}/allOf` };
  }

  private literals(schema: Schema, pointer: string): string {
    let values: unknown[];
    if (schema.const !== undefined) values = [schema.const];
    else if (Array.isArray(schema.enum)) values = schema.enum;
    else unsupported('enum', pointer, 'enum must be an array');
    if (schema.const !== undefined && Array.isArray(schema.enum)) {
      values = values.filter((value) => (schema.enum as unknown[]).some((member) => canonicalJson(member) === canonicalJson(value)));
    }
    const seen = new Set<string>();
    const allowed = values.filter((value) => {
      const key = canonicalJson(value);
      if (seen.has(key)) return false;
      seen.add(key);
      return literalSatisfies(value, schema, pointer);
    });
    const keyword = schema.const !== undefined ? 'const' : 'enum';
    if (allowed.length === 0) unsupported(keyword, pointer, 'no value of enum or const satisfies the schema');
    this.translator.literalValues += allowed.length;
    if (this.translator.literalValues > MAX_LITERAL_VALUES) {
      unsupported(keyword, pointer, `more than ${MAX_LITERAL_VALUES} enum and const values in one schema (or one request's tools) are not supported`);
    }
    return gbnfAlternatives(allowed.map(jsonLiteral));
  }

  private typed(type: JsonType, schema: Schema, pointer: string, depth: number): string {
    switch (type) {
      case 'null': return this.json.null;
      case 'boolean': return this.json.boolean;
      case 'string': return this.string(schema, pointer);
      case 'integer': return this.number(schema, pointer, true);
      case 'number': return this.number(schema, pointer, false);
      case 'object': return this.object(schema, pointer, depth);
      case 'array': return this.array(schema, pointer, depth);
    }
  }

  private string(schema: Schema, pointer: string): string {
    const minLength = nonNegativeInteger(schema, 'minLength', pointer) ?? 0;
    const maxLength = nonNegativeInteger(schema, 'maxLength', pointer);
    const hasLength = schema.minLength !== undefined || schema.maxLength !== undefined;
    if (schema.format !== undefined && typeof schema.format !== 'string') unsupported('format', pointer, 'format must be a string');
    if (schema.pattern !== undefined && typeof schema.pattern !== 'string') unsupported('pattern', pointer, 'pattern must be a string');
    if (maxLength !== null && maxLength < minLength) unsupported('maxLength', pointer, 'maxLength is below minLength');
    const format = schema.format as string | undefined;
    const pattern = schema.pattern as string | undefined;
    const parsed = pattern === undefined ? null : this.parsePattern(pattern, pointer);
    // One constraint alone is one GBNF expression; together (or a pattern with lookaheads) they
    // are the intersection of their automata.
    const constraints = [format, pattern, hasLength ? 'length' : undefined].filter((constraint) => constraint !== undefined).length;
    if (constraints > 1 || (parsed && hasLookahead(parsed.node))) return this.intersection(schema, pointer, parsed, minLength, maxLength);
    if (format !== undefined) {
      const body = this.json.format(format);
      if (!body) unsupported('format', pointer, `format ${JSON.stringify(format)} is not supported`);
      return this.rules.define(`string-${format}`, `"\\"" ${body} "\\""`);
    }
    if (parsed) {
      const body = this.ofPattern(pattern!, pointer, () => nodeToGbnf(parsed.node, this.rules));
      return this.rules.define('string-pattern', `"\\"" ${body} "\\""`);
    }
    if (!hasLength) return this.json.string;
    if (minLength > MAX_REPETITION) unsupported('minLength', pointer, `minLength above ${MAX_REPETITION} is not supported`);
    // A cap below a larger maxLength still generates only valid strings.
    const max = maxLength === null ? null : Math.min(maxLength, MAX_REPETITION);
    return this.rules.define('string-bounded', `"\\"" ${this.rules.repeat(this.json.character, minLength, max)} "\\""`);
  }

  private parsePattern(pattern: string, pointer: string): ParsedPattern {
    return this.ofPattern(pattern, pointer, () => parsePattern(pattern));
  }

  /** Work on a pattern whose failure to be enforced is 400 `unsupported_schema` naming `pattern`. */
  private ofPattern<T>(pattern: string, pointer: string, work: () => T): T {
    try {
      return work();
    } catch (error) {
      if (error instanceof UnsupportedPattern) unsupported('pattern', pointer, `pattern ${quoteShort(pattern, 200)} uses ${error.message}, which is not supported`);
      throw error;
    }
  }

  /**
   * A string that satisfies its format, pattern and lengths at once: the product of their
   * automata, narrowest first. Beside a format, a pattern is read as JSON Schema reads it, a
   * search; alone (with lengths, or lookaheads) as a whole match, as the pattern alone is. A
   * format lmsp does not know is taken as the pattern's name, when a pattern says what it is.
   */
  private intersection(schema: Schema, pointer: string, parsed: ParsedPattern | null, minLength: number, maxLength: number | null): string {
    const key = JSON.stringify([schema.format ?? null, schema.pattern ?? null, minLength, maxLength]);
    const known = this.translator.stringRules.get(key);
    if (known) return known;
    const rule = this.intersectionRule(schema, pointer, parsed, minLength, maxLength);
    this.translator.stringRules.set(key, rule);
    return rule;
  }

  private intersectionRule(schema: Schema, pointer: string, parsed: ParsedPattern | null, minLength: number, maxLength: number | null): string {
    const format = schema.format as string | undefined;
    const formatSource = format === undefined ? null : formatPattern(format);
    if (format !== undefined && formatSource === null && !parsed) unsupported('format', pointer, `format ${JSON.stringify(format)} is not supported`);
    const keyword = parsed ? 'pattern' : schema.minLength !== undefined ? 'minLength' : 'maxLength';
    try {
      // Bounded work, however the pattern is written: this runs on the thread that answers requests.
      return withWorkBudget(() => {
        const automata: Dfa[] = [];
        if (formatSource !== null) automata.push(wholeMatches(parsePattern(formatSource).node));
        if (parsed) automata.push(...patternConstraints(parsed, formatSource !== null));
        let language = intersectAll(automata.length > 0 ? automata : [stringsOf(WRITABLE)]);
        if (language && (minLength > 0 || maxLength !== null)) language = trim(withLength(language, minLength, maxLength));
        if (!language) unsupported(keyword, pointer, 'no string satisfies its format, pattern, minLength and maxLength together');
        return this.rules.define('string-constrained', `"\\"" ${dfaToGbnf(language, this.rules, 'string-state')} "\\""`);
      });
    } catch (error) {
      if (error instanceof UnsupportedPattern) unsupported(keyword, pointer, `the string constraints at ${pointer || '/'} use ${error.message}, which is not supported`);
      throw error;
    }
  }

  private number(schema: Schema, pointer: string, integer: boolean): string {
    const format = numberFormat(schema, pointer);
    if (format?.integer) integer = true;
    const bounds = numberBounds(schema, pointer);
    if (format?.minimum !== undefined && (bounds.minimum === null || bounds.minimum < format.minimum)) [bounds.minimum, bounds.exclusiveMinimum] = [format.minimum, false];
    if (format?.maximum !== undefined && (bounds.maximum === null || bounds.maximum > format.maximum)) [bounds.maximum, bounds.exclusiveMaximum] = [format.maximum, false];
    const bounded = bounds.minimum !== null || bounds.maximum !== null;
    if (schema.multipleOf !== undefined) {
      const step = schema.multipleOf;
      if (typeof step !== 'number' || !Number.isInteger(step) || step <= 0) {
        unsupported('multipleOf', pointer, 'multipleOf is supported for positive whole numbers only');
      }
      if (step === 1) return this.number({ ...schema, multipleOf: undefined, type: 'integer' }, pointer, true);
      // A bound past every integer the grammar writes bounds nothing: Zod's .int() writes
      // ±(2^53 - 1), and .nonnegative() or .positive() beside it a minimum of 0.
      const largest = Number(MAX_GENERATED_INTEGER);
      const noMaximum = bounds.maximum === null || bounds.maximum >= largest;
      if (noMaximum && (bounds.minimum === null || bounds.minimum <= -largest) && step <= MAX_MULTIPLE_STEP) {
        return this.rules.define(`multiple-of-${step}`, multiplesOf(step, this.rules));
      }
      if (noMaximum && bounds.minimum === 0 && step <= MAX_MULTIPLE_STEP) {
        return this.rules.define(`multiple-of-${step}-${bounds.exclusiveMinimum ? 'positive' : 'non-negative'}`,
          multiplesOf(step, this.rules, { negative: false, zero: !bounds.exclusiveMinimum }));
      }
      if (bounded) {
        const low = bounds.minimum === null ? -1e15 : bounds.minimum;
        const high = bounds.maximum === null ? 1e15 : bounds.maximum;
        const first = Math.ceil(low / step) * step;
        const count = Math.floor((high - first) / step) + 1;
        if (count > MAX_LISTED_MULTIPLES) unsupported('multipleOf', pointer, `multipleOf with bounds is supported up to ${MAX_LISTED_MULTIPLES} multiples in range`);
        const values: number[] = [];
        for (let value = first; value <= high; value += step) {
          if ((value > low || !bounds.exclusiveMinimum) && (value < high || !bounds.exclusiveMaximum) && value >= low) values.push(value);
        }
        if (values.length === 0) unsupported('multipleOf', pointer, 'no multiple lies within the bounds');
        return gbnfAlternatives(values.map((value) => gbnfLiteral(String(value))));
      }
      if (step > MAX_MULTIPLE_STEP) unsupported('multipleOf', pointer, `multipleOf without bounds is supported up to ${MAX_MULTIPLE_STEP}`);
      return this.rules.define(`multiple-of-${step}`, multiplesOf(step, this.rules));
    }
    if (!bounded) return integer ? this.json.integer : this.json.number;
    const pattern = integer ? boundedInteger(bounds) : boundedNumber(bounds);
    if (!pattern) {
      const keyword = bounds.minimum !== null ? (schema.exclusiveMinimum !== undefined && typeof schema.exclusiveMinimum === 'number' ? 'exclusiveMinimum' : 'minimum') : 'maximum';
      unsupported(keyword, pointer, `no ${integer ? 'integer' : 'number'} the service can write lies within the bounds`);
    }
    return this.rules.define(integer ? 'integer-bounded' : 'number-bounded', patternToGbnf(pattern, this.rules));
  }

  private object(schema: Schema, pointer: string, depth: number): string {
    const properties = schema.properties === undefined ? {} : schema.properties;
    if (!isSchemaObject(properties)) unsupported('properties', pointer, 'properties must be an object');
    const required = schema.required === undefined ? [] : schema.required;
    if (!Array.isArray(required) || required.some((key) => typeof key !== 'string')) unsupported('required', pointer, 'required must be an array of strings');
    const additional = schema.additionalProperties;
    if (additional !== undefined && typeof additional !== 'boolean' && !isSchemaObject(additional)) unsupported('additionalProperties', pointer, 'additionalProperties must be a schema');
    const minProperties = nonNegativeInteger(schema, 'minProperties', pointer) ?? 0;
    const maxProperties = nonNegativeInteger(schema, 'maxProperties', pointer);
    const entries: Array<{ key: string; expression: string; required: boolean }> = [];
    for (const [key, subschema] of Object.entries(properties)) {
      const at = this.mergedPointers.get(schema)?.get(key) ?? `${pointer}/properties${pointerSegment(key)}`;
      entries.push({ key, expression: this.visit(subschema, at, new Set(), depth + 1), required: required.includes(key) });
    }
    for (const key of new Set(required as string[])) {
      if (Object.hasOwn(properties, key)) continue; // a property named `constructor` is not declared by Object.prototype
      if (additional === false) unsupported('required', pointer, `required property ${JSON.stringify(key)} is not allowed by additionalProperties: false`);
      const subschema = isSchemaObject(additional) ? additional : true;
      entries.push({ key, expression: this.visit(subschema, `${pointer}/additionalProperties`, new Set(), depth + 1), required: true });
    }
    const requiredCount = entries.filter((entry) => entry.required).length;
    // Undeclared properties: generated only when additionalProperties is a schema, or when
    // minProperties needs more than the declared ones and any property is allowed.
    let extra: string | null = null;
    if (isSchemaObject(additional)) extra = this.visit(additional, `${pointer}/additionalProperties`, new Set(), depth + 1);
    else if (additional !== false && entries.length === 0 && minProperties > 0) extra = this.json.value;
    if (entries.length === 0 && extra !== null) {
      const key = this.json.string;
      const member = this.rules.define('extra-member', `${key} ${this.json.ws} ":" ${this.json.ws} ${extra}`);
      if (maxProperties !== null && maxProperties < minProperties) unsupported('maxProperties', pointer, 'maxProperties is below minProperties');
      // Nothing in a grammar keeps the keys it writes apart: {"a": 1, "a": 2} parses to one property.
      if (minProperties > 1) unsupported('minProperties', pointer, 'minProperties above 1 is not supported on an object without properties: the keys written could repeat');
      return this.rules.define('object-map', `"{" ${this.json.ws} ${this.separated(member, minProperties, maxProperties)} ${this.json.ws} "}"`);
    }
    if (minProperties > requiredCount) unsupported('minProperties', pointer, 'minProperties is supported up to the number of required properties');
    if (maxProperties !== null && (maxProperties < entries.length || extra !== null)) {
      unsupported('maxProperties', pointer, 'maxProperties is supported when it allows every declared property and no others');
    }
    if (extra !== null && entries.some((entry) => JSON.stringify(entry.key).includes('\\'))) {
      unsupported('additionalProperties', pointer, 'additionalProperties beside properties whose names need escaping is not supported');
    }
    const extraMember = extra === null ? null
      : this.rules.define('extra-member', `${this.rules.define('undeclared-key', undeclaredKey(this.rules, entries.map((entry) => entry.key)))} ${this.json.ws} ":" ${this.json.ws} ${extra}`);
    return this.rules.define('object', `"{" ${this.json.ws} ${this.members(entries, extraMember)} ${this.json.ws} "}"`);
  }

  /**
   * Members in declared order, optional ones optional, commas only between members: `first(j)`
   * is members j.. with none written yet, `after(j)` the same once one has been written.
   */
  private members(entries: ReadonlyArray<{ key: string; expression: string; required: boolean }>, extraMember: string | null): string {
    const separator = this.json.separator;
    let after = extraMember === null ? '""' : this.rules.define('extra-after', `(${separator} ${extraMember})*`);
    let first = extraMember === null ? '""' : this.rules.define('extra-first', `(${extraMember} (${separator} ${extraMember})*)?`);
    for (let index = entries.length - 1; index >= 0; index--) {
      const entry = entries[index]!;
      const member = this.rules.define(`member-${entry.key}`, `${gbnfLiteral(JSON.stringify(entry.key))} ${this.json.ws} ":" ${this.json.ws} ${entry.expression}`);
      const nextAfter = after;
      const nextFirst = first;
      if (entry.required) {
        first = this.rules.define('members', gbnfSequence([member, nextAfter]));
        after = this.rules.define('members-after', gbnfSequence([separator, member, nextAfter]));
      } else {
        first = this.rules.define('members', gbnfAlternatives([gbnfSequence([member, nextAfter]), nextFirst]));
        after = this.rules.define('members-after', gbnfSequence([`(${separator} ${member})?`, nextAfter]));
      }
    }
    return first;
  }

  /** `count` elements (min to max) separated by commas. */
  private separated(element: string, min: number, max: number | null): string {
    if (min > MAX_REPETITION) throw new UnsupportedSchemaError('minItems', '', `more than ${MAX_REPETITION} elements`);
    const cap = max === null ? null : Math.min(max, MAX_REPETITION);
    if (cap === 0) return '""';
    const rest = this.rules.repeat(`${this.json.separator} ${element}`, Math.max(0, min - 1), cap === null ? null : cap - 1);
    const some = gbnfSequence([element, rest]);
    return min === 0 ? `(${some})?` : some;
  }

  private array(schema: Schema, pointer: string, depth: number): string {
    const tuple = Array.isArray(schema.items);
    const prefix = (schema.prefixItems ?? (tuple ? schema.items : [])) as unknown;
    if (!Array.isArray(prefix)) unsupported('prefixItems', pointer, 'prefixItems must be an array');
    const items = tuple ? schema.additionalItems : schema.items;
    const minItems = nonNegativeInteger(schema, 'minItems', pointer) ?? 0;
    const maxItems = nonNegativeInteger(schema, 'maxItems', pointer);
    if (maxItems !== null && maxItems < minItems) unsupported('maxItems', pointer, 'maxItems is below minItems');
    if (minItems > MAX_REPETITION) unsupported('minItems', pointer, `minItems above ${MAX_REPETITION} is not supported`);
    const itemsKeyword = tuple ? 'additionalItems' : 'items';
    if (schema.uniqueItems === true && (maxItems === null || maxItems > 1)) {
      return this.uniqueArray(prefix, items, minItems, maxItems, pointer);
    }
    const written = Math.min(prefix.length, maxItems ?? Infinity);
    const elements = prefix.slice(0, written).map((item, index) => this.visit(item, `${pointer}/${tuple ? 'items' : 'prefixItems'}/${index}`, new Set(), depth + 1));
    const extraMin = Math.max(0, minItems - written);
    let extraMax = maxItems === null ? null : maxItems - written;
    let extra: string | null = null;
    if (items === false) {
      if (extraMin > 0) unsupported('minItems', pointer, `minItems needs more items than ${itemsKeyword}: false allows`);
    } else if (items === undefined || items === true) {
      // Items nobody described: written only as far as minItems needs them.
      if (extraMin > 0 || prefix.length === 0) extra = this.json.value;
      if (prefix.length > 0) extraMax = extraMin;
    } else {
      extra = this.visit(items, `${pointer}/${itemsKeyword}`, new Set(), depth + 1);
    }
    const parts: string[] = [];
    elements.forEach((element, index) => parts.push(index === 0 ? element : `${this.json.separator} ${element}`));
    if (extra !== null && extraMax !== 0) {
      if (elements.length > 0) {
        parts.push(this.rules.repeat(`${this.json.separator} ${extra}`, extraMin, extraMax === null ? null : Math.min(extraMax, MAX_REPETITION)));
      } else {
        parts.push(this.separated(extra, extraMin, extraMax));
      }
    }
    return this.rules.define('array', `"[" ${this.json.ws} ${gbnfSequence(parts)} ${this.json.ws} "]"`);
  }

  /**
   * uniqueItems over a finite set of literals (an enum, const, or boolean items): the items are
   * a subsequence of the set in its order, so none repeats; minItems and maxItems are counted.
   */
  private uniqueArray(prefix: unknown[], items: unknown, minItems: number, maxItems: number | null, pointer: string): string {
    const finite = prefix.length === 0 && isSchemaObject(items) ? finiteLiterals(items, `${pointer}/items`) : null;
    if (!finite) unsupported('uniqueItems', pointer, 'uniqueItems is supported for items with a finite set of values (enum, const, boolean)');
    const values = finite.map(jsonLiteral);
    const max = Math.min(maxItems ?? values.length, values.length);
    if (minItems > max) unsupported('minItems', pointer, 'minItems exceeds the number of distinct values');
    // A rule for each state (the next value to take or skip, the items written so far) that can
    // still reach minItems, made from the last value back, without recursion: thousands of
    // values are thousands of rules (up to the grammar's size), not a call stack as deep.
    const names = new Map<string, string>();
    const nameOf = (index: number, count: number): string => {
      const key = `${index}:${count}`;
      let name = names.get(key);
      if (!name) names.set(key, (name = this.rules.reserve('unique-items')));
      return name;
    };
    for (let index = values.length; index >= 0; index--) {
      const after = values.length - index - 1;
      for (let count = Math.min(index, max); count >= 0 && count + values.length - index >= minItems; count--) {
        const options: string[] = [];
        if (count >= minItems) options.push('""');
        if (index < values.length && count < max && after >= minItems - count - 1) {
          options.push(gbnfSequence([count > 0 ? this.json.separator : '""', values[index]!, nameOf(index + 1, count + 1)]));
        }
        if (index < values.length && after >= minItems - count) options.push(nameOf(index + 1, count));
        this.rules.set(nameOf(index, count), options.join(' | '));
      }
    }
    return this.rules.define('array-unique', `"[" ${this.json.ws} ${nameOf(0, 0)} ${this.json.ws} "]"`);
  }
}

/** The values a schema allows when they are few and literal: enum, const, or boolean. */
function finiteLiterals(schema: Schema, pointer: string): unknown[] | null {
  const keywords = Object.keys(schema).filter((keyword) => ENFORCED_KEYWORDS.has(keyword));
  if (schema.enum !== undefined || schema.const !== undefined) {
    const values = schema.const !== undefined ? [schema.const] : Array.isArray(schema.enum) ? schema.enum : [];
    const seen = new Set<string>();
    return values.filter((value) => {
      const key = canonicalJson(value);
      if (seen.has(key)) return false;
      seen.add(key);
      return literalSatisfies(value, schema, pointer);
    });
  }
  if (keywords.length === 1 && schema.type === 'boolean') return [false, true];
  return null;
}

/** A `$ref` fragment as the JSON pointer it spells (percent-decoded); null when it does not decode. */
function safeDecode(text: string): string | null {
  try {
    return decodeURIComponent(text);
  } catch {
    return null;
  }
}

/**
 * JSON strings other than the declared keys, by a trie of their characters (keys that need
 * escaping are refused before). `\/` is not written, so no undeclared key can equal a
 * declared one once parsed.
 */
function undeclaredKey(rules: GbnfRuleSet, keys: readonly string[]): string {
  interface Node { children: Map<string, Node>; terminal: boolean; name: string | null }
  const root: Node = { children: new Map(), terminal: false, name: null };
  for (const key of keys) {
    let node = root;
    for (const char of key) {
      let child = node.children.get(char);
      if (!child) node.children.set(char, (child = { children: new Map(), terminal: false, name: null }));
      node = child;
    }
    node.terminal = true;
  }
  const anyChar = rules.define('key-char', '[^"\\\\\\x00-\\x1f] | "\\\\" ["\\\\bfnrt]');
  // A rule for each node of the trie, children first, without recursion: a key thousands of
  // characters long is a chain of that many short rules, not an expression nested as deep.
  const order: Node[] = [];
  for (const pending = [root]; pending.length > 0;) {
    const node = pending.pop()!;
    order.push(node);
    pending.push(...node.children.values());
  }
  for (const node of order.reverse()) {
    const options: string[] = [];
    if (!node.terminal) options.push('"\\""');
    // A character that continues no key leaves the trie: anything may follow.
    const continuing = [...node.children.keys()].map((char) => `\\U${char.codePointAt(0)!.toString(16).padStart(8, '0')}`).join('');
    options.push(`[^"\\\\\\x00-\\x1f${continuing}] ${anyChar}* "\\""`);
    options.push(`"\\\\" ["\\\\bfnrt] ${anyChar}* "\\""`);
    for (const [char, child] of node.children) options.push(`${gbnfLiteral(char)} ${child.name!}`);
    node.name = rules.define('undeclared-key-rest', options.join(' | '));
  }
  return `"\\"" ${root.name!}`;
}

/**
 * The formats of numbers that OpenAPI writes (`int32`, `int64`, `float`, `double`), as ajv-formats
 * checks them: int32 and int64 are integers in their ranges, float and double any number.
 */
const NUMBER_FORMATS: Record<string, { integer: boolean; minimum?: number; maximum?: number }> = {
  int32: { integer: true, minimum: -(2 ** 31), maximum: 2 ** 31 - 1 },
  // Integers are written with at most MAX_INTEGER_DIGITS (15) digits: always within int64.
  int64: { integer: true },
  float: { integer: false },
  double: { integer: false },
};

/**
 * The number format a schema asks for; another format is refused (LMSP 6.1: never ignored),
 * unless the schema also allows strings, whose branch enforces or refuses it.
 */
function numberFormat(schema: Schema, pointer: string): (typeof NUMBER_FORMATS)[string] | null {
  const format = schema.format;
  if (format === undefined) return null;
  if (typeof format !== 'string') unsupported('format', pointer, 'format must be a string');
  if (Object.hasOwn(NUMBER_FORMATS, format)) return NUMBER_FORMATS[format]!;
  if (declaredTypes(schema, pointer)?.includes('string')) return null;
  return unsupported('format', pointer, `format ${JSON.stringify(format)} is not supported for numbers (int32, int64, float and double are)`);
}

function numberBounds(schema: Schema, pointer: string): NumberBounds {
  const bounds: NumberBounds = { minimum: null, maximum: null, exclusiveMinimum: false, exclusiveMaximum: false };
  const read = (keyword: string): number | null => {
    const value = schema[keyword];
    if (value === undefined || typeof value === 'boolean') return null;
    if (typeof value !== 'number' || !Number.isFinite(value)) unsupported(keyword, pointer, `${keyword} must be a number`);
    return value;
  };
  const minimum = read('minimum');
  const exclusiveMinimum = read('exclusiveMinimum');
  const maximum = read('maximum');
  const exclusiveMaximum = read('exclusiveMaximum');
  // The tighter of minimum and exclusiveMinimum (draft 4's boolean form makes minimum exclusive).
  if (minimum !== null) [bounds.minimum, bounds.exclusiveMinimum] = [minimum, schema.exclusiveMinimum === true];
  if (exclusiveMinimum !== null && (bounds.minimum === null || exclusiveMinimum >= bounds.minimum)) [bounds.minimum, bounds.exclusiveMinimum] = [exclusiveMinimum, true];
  if (maximum !== null) [bounds.maximum, bounds.exclusiveMaximum] = [maximum, schema.exclusiveMaximum === true];
  if (exclusiveMaximum !== null && (bounds.maximum === null || exclusiveMaximum <= bounds.maximum)) [bounds.maximum, bounds.exclusiveMaximum] = [exclusiveMaximum, true];
  return bounds;
}

/** Without `type`, keywords of one kind imply it (a valid value of that kind is valid). */
function inferredTypes(schema: Schema): JsonType[] | null {
  const has = (keywords: string[]) => keywords.some((keyword) => schema[keyword] !== undefined);
  if (has(OBJECT_KEYWORDS)) return ['object'];
  if (has(ARRAY_KEYWORDS)) return ['array'];
  // A number format alone (OpenAPI's int32, ...) says a number, as a string format says a string.
  const onlyFormat = STRING_KEYWORDS.every((keyword) => keyword === 'format' || schema[keyword] === undefined);
  if (onlyFormat && typeof schema.format === 'string' && Object.hasOwn(NUMBER_FORMATS, schema.format)) return ['number'];
  if (has(STRING_KEYWORDS)) return ['string'];
  if (has(NUMBER_KEYWORDS)) return ['number'];
  if (schema.nullable === true) return null;
  return null;
}
