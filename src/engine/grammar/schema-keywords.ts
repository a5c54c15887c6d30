/**
 * What the JSON Schema translation knows about keywords: which it enforces, which only annotate,
 * and the exact checks it needs on literal values (enum and const members, oneOf branches).
 */

export type Schema = Record<string, unknown>;

/** An error that names the keyword the service cannot enforce, and where it is (RFC 6901). */
export class UnsupportedSchemaError extends Error {
  override name = 'UnsupportedSchemaError';
  constructor(readonly keyword: string, readonly pointer: string, message: string) {
    super(message);
  }
}

/** Keywords that only describe: they never make a value invalid, so they are ignored. */
export const ANNOTATION_KEYWORDS = new Set([
  'title', 'description', 'default', 'examples', 'example', '$comment', '$schema', '$id', '$defs', 'definitions',
  'deprecated', 'readOnly', 'writeOnly', 'contentEncoding', 'contentMediaType', 'contentSchema', 'discriminator',
  'externalDocs', 'xml', 'strict', '$anchor', '$dynamicAnchor', '$vocabulary',
]);

/** Keywords the translation enforces (each, or in the combinations docs/api.md lists). */
export const ENFORCED_KEYWORDS = new Set([
  'type', 'nullable', 'enum', 'const', 'anyOf', 'oneOf', 'allOf', '$ref',
  'properties', 'required', 'additionalProperties', 'minProperties', 'maxProperties',
  'items', 'prefixItems', 'additionalItems', 'minItems', 'maxItems', 'uniqueItems',
  'minLength', 'maxLength', 'format', 'pattern',
  'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf',
]);

export const OBJECT_KEYWORDS = ['properties', 'required', 'additionalProperties', 'minProperties', 'maxProperties'];
export const ARRAY_KEYWORDS = ['items', 'prefixItems', 'additionalItems', 'minItems', 'maxItems', 'uniqueItems'];
export const STRING_KEYWORDS = ['minLength', 'maxLength', 'format', 'pattern'];
export const NUMBER_KEYWORDS = ['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf'];

export const JSON_TYPES = ['object', 'array', 'string', 'number', 'integer', 'boolean', 'null'] as const;
export type JsonType = (typeof JSON_TYPES)[number];

export function isSchemaObject(value: unknown): value is Schema {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** RFC 6901: a pointer segment. */
export function pointerSegment(segment: string | number): string {
  return `/${String(segment).replace(/~/g, '~0').replace(/\//g, '~1')}`;
}

/** The JSON type of a value, `integer` for whole numbers. */
export function typeOf(value: unknown): JsonType {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number';
  if (typeof value === 'string') return 'string';
  if (typeof value === 'boolean') return 'boolean';
  return 'object';
}

/** Whether a value of type `actual` satisfies `type` (an integer is a number too). */
export function typeMatches(actual: JsonType, type: JsonType): boolean {
  return actual === type || (type === 'number' && actual === 'integer');
}

/** Code points, as JSON Schema counts string length. */
export function stringLength(value: string): number {
  let length = 0;
  for (const _ of value) length += 1;
  return length;
}

/** The declared types of a schema (`type` as a string or an array, plus `nullable`), or null. */
export function declaredTypes(schema: Schema, pointer: string): JsonType[] | null {
  if (schema.type === undefined) return null;
  const list = Array.isArray(schema.type) ? schema.type : [schema.type];
  for (const type of list) {
    if (!JSON_TYPES.includes(type as JsonType)) {
      throw new UnsupportedSchemaError('type', `${pointer}/type`, `type ${JSON.stringify(type)} is not a JSON Schema type`);
    }
  }
  const types = [...new Set(list as JsonType[])];
  if (schema.nullable === true && !types.includes('null')) types.push('null');
  // An empty list allows no value: the grammar would be an empty alternation, which matches the
  // empty text, so a "valid" answer would not be JSON at all (LMSP 6.1).
  if (types.length === 0) throw new UnsupportedSchemaError('type', `${pointer}/type`, 'type [] allows no value');
  return types;
}

/**
 * Whether a literal (an enum or const member) satisfies the scalar keywords beside it; other
 * keywords beside enum or const are not supported.
 */
export function literalSatisfies(value: unknown, schema: Schema, pointer: string): boolean {
  for (const [keyword, bound] of Object.entries(schema)) {
    if (keyword === 'enum' || keyword === 'const' || keyword === 'nullable' || ANNOTATION_KEYWORDS.has(keyword) || keyword.startsWith('x-')) continue;
    const at = `${pointer}${pointerSegment(keyword)}`;
    if (keyword === 'type') {
      if (!declaredTypes(schema, pointer)!.some((allowed) => typeMatches(typeOf(value), allowed))) return false;
      continue;
    }
    if (keyword === 'pattern') {
      let regex: RegExp;
      try {
        regex = new RegExp(String(bound), 'u');
      } catch {
        throw new UnsupportedSchemaError(keyword, at, 'pattern is not a valid regular expression');
      }
      if (typeof bound !== 'string') throw new UnsupportedSchemaError(keyword, at, 'pattern must be a string');
      if (typeof value === 'string' && !regex.test(value)) return false;
      continue;
    }
    if (typeof bound !== 'number' || !Number.isFinite(bound)) {
      throw new UnsupportedSchemaError(keyword, at, `${keyword} beside enum or const must be a number`);
    }
    const length = typeof value === 'string' ? stringLength(value) : null;
    const number = typeof value === 'number' ? value : null;
    switch (keyword) {
      case 'minLength': if (length !== null && length < bound) return false; break;
      case 'maxLength': if (length !== null && length > bound) return false; break;
      case 'minimum': if (number !== null && number < bound) return false; break;
      case 'maximum': if (number !== null && number > bound) return false; break;
      case 'exclusiveMinimum': if (number !== null && number <= bound) return false; break;
      case 'exclusiveMaximum': if (number !== null && number >= bound) return false; break;
      case 'multipleOf': if (number !== null && (bound <= 0 || !Number.isInteger(number / bound))) return false; break;
      default:
        throw new UnsupportedSchemaError(keyword, at, `${keyword} beside enum or const is not supported`);
    }
  }
  return true;
}

/** Canonical text of a JSON value (keys sorted), to compare literals. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (isSchemaObject(value)) {
    return `{${Object.keys(value).sort().map((key) => `${JSON.stringify(key)}:${canonicalJson(value[key])}`).join(',')}}`;
  }
  return JSON.stringify(value);
}
