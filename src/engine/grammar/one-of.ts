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

/** A branch's shape with its discriminators, read once however many branches it is compared with. */
interface Branch extends BranchShape {
  pinned: Map<string, Set<string>> | null;
}

function objectsOnly(branch: BranchShape): boolean {
  return branch.types.size === 1 && branch.types.has('object');
}

function disjoint(a: Branch, b: Branch): boolean {
  if (!typesOverlap(a.types, b.types)) return true;
  if (a.literals && b.literals) return [...a.literals].every((value) => !b.literals!.has(value));
  if (a.pinned && b.pinned) {
    for (const [key, values] of a.pinned) {
      const other = b.pinned.get(key);
      if (other && [...values].every((value) => !other.has(value))) return true;
    }
  }
  return false;
}

/** Pairs of branches compared one by one at most; a larger oneOf must fit a faster case below. */
export const MAX_ONE_OF_PAIRS = 250_000;

/** No value, canonically written, appears in two of the sets. */
function noneShared(sets: ReadonlyArray<ReadonlySet<string>>): boolean {
  const seen = new Set<string>();
  for (const set of sets) {
    for (const value of set) {
      if (seen.has(value)) return false;
      seen.add(value);
    }
  }
  return true;
}

/**
 * Whether no value can match two of the branches; `too-many` when telling would take more than
 * MAX_ONE_OF_PAIRS comparisons. Lists of literals, and objects all pinned by one required
 * property (a tagged union), are told apart in one pass however many branches they have.
 */
export function oneOfIsDisjoint(branches: readonly unknown[], resolve: (ref: string) => unknown): 'disjoint' | 'overlapping' | 'too-many' {
  const shapes: Branch[] = branches.map((branch) => {
    const found = shape(branch, resolve);
    return { ...found, pinned: objectsOnly(found) ? discriminators(found.schema, resolve) : null };
  });
  if (shapes.every((branch) => branch.literals)) return noneShared(shapes.map((branch) => branch.literals!)) ? 'disjoint' : 'overlapping';
  if (shapes.length > 1 && shapes.every((branch) => branch.pinned)) {
    for (const key of shapes[0]!.pinned!.keys()) {
      if (shapes.every((branch) => branch.pinned!.has(key)) && noneShared(shapes.map((branch) => branch.pinned!.get(key)!))) return 'disjoint';
    }
  }
  if ((shapes.length * (shapes.length - 1)) / 2 > MAX_ONE_OF_PAIRS) return 'too-many';
  for (let i = 0; i < shapes.length; i++) {
    for (let j = i + 1; j < shapes.length; j++) if (!disjoint(shapes[i]!, shapes[j]!)) return 'overlapping';
  }
  return 'disjoint';
}
