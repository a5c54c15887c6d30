/**
 * oneOf requires a value to match exactly one branch. Generating from any one branch is valid
 * only when no value can match two of them, which is decided here, conservatively: branches of
 * different types, literal sets with no member in common, or objects told apart by a required
 * property with different literal values. Anything else is reported as unsupported.
 */
import { canonicalJson, declaredTypes, isSchemaObject, typeMatches, typeOf, JSON_TYPES, type JsonType, type Schema } from './schema-keywords.js';

interface BranchShape {
  /** Every JSON type a value matching the branch can have. */
  types: Set<JsonType>;
  /** The branch's values when it lists them (enum or const). */
  literals: Set<string> | null;
  schema: Schema | null;
}

function literalsOf(schema: Schema): unknown[] | null {
  if (schema.const !== undefined) return [schema.const];
  if (Array.isArray(schema.enum)) return schema.enum;
  return null;
}

function shape(branch: unknown, resolve: (ref: string) => unknown, depth = 0): BranchShape {
  const everything: BranchShape = { types: new Set(JSON_TYPES), literals: null, schema: null };
  if (depth > 16 || !isSchemaObject(branch)) return everything;
  if (typeof branch.$ref === 'string') return shape(resolve(branch.$ref), resolve, depth + 1);
  const literals = literalsOf(branch);
  if (literals) {
    return { types: new Set(literals.map(typeOf)), literals: new Set(literals.map(canonicalJson)), schema: branch };
  }
  if (branch.anyOf !== undefined || branch.oneOf !== undefined || branch.allOf !== undefined) return everything;
  const types = declaredTypes(branch, '');
  return { types: types ? new Set(types) : new Set(JSON_TYPES), literals: null, schema: branch };
}

function typesOverlap(a: Set<JsonType>, b: Set<JsonType>): boolean {
  for (const x of a) for (const y of b) if (typeMatches(x, y) || typeMatches(y, x)) return true;
  return false;
}

/** The literal values a required property of an object branch is pinned to, by property. */
function discriminators(schema: Schema | null, resolve: (ref: string) => unknown): Map<string, Set<string>> {
  const result = new Map<string, Set<string>>();
  if (!schema || !isSchemaObject(schema.properties) || !Array.isArray(schema.required)) return result;
  for (const key of schema.required) {
    let property = (schema.properties as Schema)[String(key)];
    if (isSchemaObject(property) && typeof property.$ref === 'string') property = resolve(property.$ref);
    const literals = isSchemaObject(property) ? literalsOf(property) : null;
    if (literals) result.set(String(key), new Set(literals.map(canonicalJson)));
  }
  return result;
}

function disjoint(a: BranchShape, b: BranchShape, resolve: (ref: string) => unknown): boolean {
  if (!typesOverlap(a.types, b.types)) return true;
  if (a.literals && b.literals) return [...a.literals].every((value) => !b.literals!.has(value));
  const objectsOnly = (s: BranchShape) => s.types.size === 1 && s.types.has('object');
  if (objectsOnly(a) && objectsOnly(b)) {
    const left = discriminators(a.schema, resolve);
    const right = discriminators(b.schema, resolve);
    for (const [key, values] of left) {
      const other = right.get(key);
      if (other && [...values].every((value) => !other.has(value))) return true;
    }
  }
  return false;
}

export function oneOfIsDisjoint(branches: readonly unknown[], resolve: (ref: string) => unknown): boolean {
  const shapes = branches.map((branch) => shape(branch, resolve));
  for (let i = 0; i < shapes.length; i++) {
    for (let j = i + 1; j < shapes.length; j++) if (!disjoint(shapes[i]!, shapes[j]!, resolve)) return false;
  }
  return true;
}
