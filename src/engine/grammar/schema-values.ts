/**
 * The values of a schema's keywords, checked everywhere in the schema before it is translated:
 * where a keyword cannot apply (`pattern` on an integer) or a definition is never used, the
 * translation never reads it, and a schema that no validator accepts (Ajv refuses
 * `{"type": "integer", "pattern": "(["}`) would pass unnoticed. OpenAI refuses such a schema;
 * so does the service, naming the keyword and where it is.
 *
 * Draft 4's boolean `exclusiveMinimum`/`exclusiveMaximum` and OpenAPI's `nullable` are accepted,
 * as the translation enforces them. `$id` is accepted only at the root: below it, it would change
 * what a `$ref` inside resolves against, which the translation does not follow.
 */
import { isSchemaObject, JSON_TYPES, pointerSegment, UnsupportedSchemaError, type Schema } from './schema-keywords.js';

type Check = (value: unknown) => boolean;

const isNonNegativeInteger: Check = (value) => typeof value === 'number' && Number.isInteger(value) && value >= 0;
const isNumber: Check = (value) => typeof value === 'number' && Number.isFinite(value);
const isString: Check = (value) => typeof value === 'string';
const isBoolean: Check = (value) => typeof value === 'boolean';
const isArray: Check = (value) => Array.isArray(value);
const isType: Check = (value) => typeof value === 'string' && (JSON_TYPES as readonly string[]).includes(value);

/** The same check for several keywords. */
function each(keywords: string[], check: Check, what: string): Record<string, [Check, string]> {
  return Object.fromEntries(keywords.map((keyword) => [keyword, [check, what]]));
}

/** Each keyword's value, with what the message says it must be. */
const VALUES: Record<string, [Check, string]> = {
  type: [(value) => isType(value) || (Array.isArray(value) && value.every(isType) && new Set(value).size === value.length), `one of ${JSON_TYPES.join(', ')}, or an array of them without repeats`],
  ...each(['minLength', 'maxLength', 'minItems', 'maxItems', 'minProperties', 'maxProperties'], isNonNegativeInteger, 'a non-negative integer'),
  ...each(['minimum', 'maximum'], isNumber, 'a number'),
  ...each(['exclusiveMinimum', 'exclusiveMaximum'], (value) => isNumber(value) || isBoolean(value), "a number (or draft 4's boolean)"),
  multipleOf: [(value) => isNumber(value) && (value as number) > 0, 'a number above 0'],
  pattern: [(value) => typeof value === 'string' && compiles(value), 'a regular expression valid with the u flag (ECMA-262 in Unicode mode, as JSON Schema validators such as Ajv read it)'],
  ...each(['format', 'title', 'description', '$comment', '$ref', '$schema', '$id', '$anchor'], isString, 'a string'),
  ...each(['uniqueItems', 'nullable', 'deprecated', 'readOnly', 'writeOnly'], isBoolean, 'a boolean'),
  required: [(value) => Array.isArray(value) && value.every(isString), 'an array of strings'],
  ...each(['enum', 'examples'], isArray, 'an array'),
};

/** Keywords whose value is a schema, an array of schemas, or an object of schemas. */
const ONE_SCHEMA = ['additionalProperties', 'additionalItems', 'not', 'if', 'then', 'else', 'contains', 'propertyNames', 'unevaluatedProperties', 'unevaluatedItems', 'contentSchema'];
const SCHEMA_LISTS = ['anyOf', 'oneOf', 'allOf', 'prefixItems'];
const SCHEMA_MAPS = ['properties', 'patternProperties', '$defs', 'definitions', 'dependentSchemas'];

/** Whether a pattern is a regular expression as JSON Schema validators read it: ECMA-262 with the `u` flag. */
function compiles(pattern: string): boolean {
  try {
    new RegExp(pattern, 'u');
    return true;
  } catch {
    return false;
  }
}

function refuse(keyword: string, pointer: string, message: string): never {
  throw new UnsupportedSchemaError(keyword, `${pointer}${pointerSegment(keyword)}`, message);
}

/** Throws UnsupportedSchemaError at the first keyword whose value no JSON Schema validator accepts. */
export function checkSchemaValues(schema: unknown, pointer = '', depth = 0): void {
  if (typeof schema === 'boolean') return;
  // The translation's own checks name a schema that is neither an object nor a boolean.
  if (!isSchemaObject(schema) || depth > MAX_DEPTH) return;
  const at = (keyword: string, child: unknown, childPointer: string) => {
    if (typeof child !== 'boolean' && !isSchemaObject(child)) refuse(keyword, pointer, `${keyword} must hold schemas (objects or booleans)`);
    checkSchemaValues(child, childPointer, depth + 1);
  };
  for (const [keyword, value] of Object.entries(schema as Schema)) {
    const rule = Object.hasOwn(VALUES, keyword) ? VALUES[keyword] : undefined;
    if (rule && !rule[0](value)) refuse(keyword, pointer, `${keyword} must be ${rule[1]}`);
    if (keyword === '$id' && pointer !== '') refuse(keyword, pointer, '$id is supported only at the root of the schema: below it, it changes what $ref resolves against');
    if (ONE_SCHEMA.includes(keyword)) at(keyword, value, `${pointer}${pointerSegment(keyword)}`);
    else if (keyword === 'items') {
      if (Array.isArray(value)) value.forEach((item, index) => at(keyword, item, `${pointer}/items/${index}`));
      else at(keyword, value, `${pointer}/items`);
    } else if (SCHEMA_LISTS.includes(keyword)) {
      if (!Array.isArray(value)) refuse(keyword, pointer, `${keyword} must be an array of schemas`);
      value.forEach((item, index) => at(keyword, item, `${pointer}${pointerSegment(keyword)}/${index}`));
    } else if (SCHEMA_MAPS.includes(keyword)) {
      if (!isSchemaObject(value)) refuse(keyword, pointer, `${keyword} must be an object of schemas`);
      for (const [name, child] of Object.entries(value)) at(keyword, child, `${pointer}${pointerSegment(keyword)}${pointerSegment(name)}`);
    }
  }
}

/** Deeper than the translation goes (it refuses the schema there itself). */
const MAX_DEPTH = 256;
