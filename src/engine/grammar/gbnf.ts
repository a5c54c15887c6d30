/**
 * Writing GBNF, the grammar language of llama.cpp: quoting of literals and character classes,
 * and a rule set that gives every rule a valid, unique name and shares identical rules.
 */

/** Literal and class characters are written this way: printable ASCII as is, the rest escaped. */
function escapeCodePoint(codePoint: number, inClass: boolean): string {
  const char = String.fromCodePoint(codePoint);
  if (codePoint === 0x22) return '\\"';
  if (codePoint === 0x5c) return '\\\\';
  if (inClass && (codePoint === 0x5d || codePoint === 0x5b || codePoint === 0x2d || codePoint === 0x5e)) {
    return `\\x${codePoint.toString(16).padStart(2, '0')}`;
  }
  if (codePoint >= 0x20 && codePoint < 0x7f) return char;
  if (codePoint <= 0xff) return `\\x${codePoint.toString(16).padStart(2, '0')}`;
  if (codePoint <= 0xffff) return `\\u${codePoint.toString(16).padStart(4, '0')}`;
  return `\\U${codePoint.toString(16).padStart(8, '0')}`;
}

/** A GBNF literal matching `text` exactly; the empty text is `""`. */
export function gbnfLiteral(text: string): string {
  let body = '';
  for (const char of text) body += escapeCodePoint(char.codePointAt(0)!, false);
  return `"${body}"`;
}

/** A character class of code point ranges (inclusive); `negated` matches every other character. */
export function gbnfClass(ranges: ReadonlyArray<readonly [number, number]>, negated = false): string {
  const body = ranges.map(([from, to]) => (from === to
    ? escapeCodePoint(from, true)
    : `${escapeCodePoint(from, true)}-${escapeCodePoint(to, true)}`)).join('');
  return `[${negated ? '^' : ''}${body}]`;
}

/** Whether an expression is one element: a rule name, a literal, a class or a group. */
function isElement(expression: string): boolean {
  return /^([a-z0-9-]+|"(?:[^"\\]|\\.)*"|\[(?:[^\]\\]|\\.)*\])$/.test(expression) || isGroup(expression);
}

/** Whether the expression is one parenthesised group (the first parenthesis closes at the end). */
function isGroup(expression: string): boolean {
  if (!expression.startsWith('(') || !expression.endsWith(')')) return false;
  let depth = 0;
  for (let i = 0; i < expression.length; i++) {
    const char = expression[i]!;
    if (char === '"' || char === '[') {
      const close = char === '"' ? '"' : ']';
      for (i++; i < expression.length && expression[i] !== close; i++) if (expression[i] === '\\') i++;
      continue;
    }
    if (char === '(') depth++;
    if (char === ')' && --depth === 0 && i < expression.length - 1) return false;
  }
  return true;
}

/** Parenthesises an expression unless it is one element already. */
export function group(expression: string): string {
  return isElement(expression) ? expression : `(${expression})`;
}

/** Alternatives, deduplicated, in order, as one group. */
export function gbnfAlternatives(expressions: readonly string[]): string {
  const unique = [...new Set(expressions)];
  return unique.length === 1 ? unique[0]! : `(${unique.join(' | ')})`;
}

/** A sequence of expressions (alternatives are always grouped, so they can be joined as they are). */
export function gbnfSequence(expressions: readonly string[]): string {
  const parts = expressions.filter((expression) => expression !== '""');
  return parts.length === 0 ? '""' : parts.join(' ');
}

/**
 * The rules of one grammar. `define` names a rule body and returns its name; the same body gets
 * the same rule, so shared sub-schemas do not multiply the grammar.
 */
export class GbnfRuleSet {
  private readonly bodies = new Map<string, string>();
  private readonly names = new Map<string, string>();
  private readonly used = new Set<string>(['root']);
  private readonly counters = new Map<string, number>();
  private size = 0;
  /** Rules known to match some finite text, and the others parsed so far (see `isFinite`). */
  private readonly productive = new Set<string>();
  private readonly undecided = new Map<string, GbnfNode>();
  private readonly unparsed: string[] = [];

  constructor(private readonly maxBytes: number, private readonly onTooLarge: () => never) {}

  private uniqueName(hint: string): string {
    const base = hint.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '').slice(0, 40) || 'rule';
    let name = base;
    // Numbered from where the last name of this base ended, so naming stays linear.
    for (let n = this.counters.get(base) ?? 2; this.used.has(name); n++) {
      name = `${base}-${n}`;
      this.counters.set(base, n + 1);
    }
    this.used.add(name);
    return name;
  }

  define(hint: string, body: string): string {
    const existing = this.names.get(body);
    if (existing) return existing;
    const name = this.uniqueName(hint);
    this.set(name, body);
    this.names.set(body, name);
    return name;
  }

  /** A name for a rule whose body comes later (a rule that refers to itself). */
  reserve(hint: string): string {
    return this.uniqueName(hint);
  }

  set(name: string, body: string): void {
    this.size += name.length + body.length + 6;
    if (this.size > this.maxBytes) this.onTooLarge();
    this.bodies.set(name, body);
    this.unparsed.push(name);
  }

  /**
   * `expression` min to max times (max null: unbounded), spelled out as rules. llama.cpp's own
   * `{m,n}` expands the same way but refuses, past a threshold that depends on the rest of the
   * rule and on its version, grammars this service accepted; only `?`, `*` and `+` (one rule
   * each) are left to it, and the grammar's size stays what MAX_GRAMMAR_BYTES bounds.
   */
  repeat(expression: string, min: number, max: number | null): string {
    if (max !== null && max < min) throw new Error(`repetition ${min} to ${max}`);
    if (max === 0) return '""';
    const element = group(expression);
    if (min === 0 && max === 1) return `${element}?`;
    if (min === 0 && max === null) return `${element}*`;
    if (min === 1 && max === null) return `${element}+`;
    // The optional part: a chain where each link is "one more, or stop".
    let tail = '""';
    if (max === null) tail = `${element}*`;
    else {
      for (let count = 1; count <= max - min; count++) {
        tail = this.define('repeat', count === 1 ? `${element}?` : `${element} ${tail} | ""`);
      }
    }
    // The required part: short runs written out, long ones as a chain of rules.
    if (min <= 8) return gbnfSequence([...Array.from({ length: min }, () => element), tail]);
    let required = tail;
    for (let count = 1; count <= min; count++) required = this.define('repeat', gbnfSequence([element, required]));
    return required;
  }

  /**
   * The rules that match some finite text. A rule is productive when one of its alternatives is
   * made of literals, classes, optional parts and productive rules only; rules are swept until
   * none changes. Rules, once set, do not change, so each is parsed once and a productive one is
   * never looked at again: asking after each schema of a request (each tool) costs the rules it
   * added, not all of them again.
   */
  private productiveRules(): ReadonlySet<string> {
    for (const name of this.unparsed) this.undecided.set(name, parseGbnf(this.bodies.get(name)!));
    this.unparsed.length = 0;
    for (let changed = true; changed;) {
      changed = false;
      for (const [name, node] of this.undecided) {
        if (isProductive(node, this.productive)) {
          this.productive.add(name);
          this.undecided.delete(name);
          changed = true;
        }
      }
    }
    return this.productive;
  }

  /**
   * Whether `expression` matches some finite text under these rules. Only `$ref` cycles can make
   * a rule unproductive (a recursive property that is required), so callers ask only when they met one.
   */
  isFinite(expression: string): boolean {
    return isProductive(parseGbnf(expression), this.productiveRules());
  }

  render(rootBody: string): string {
    const productive = this.productiveRules();
    let root = rootBody;
    if (this.undecided.size > 0) {
      // Parts that only endless text matches (an optional property whose every value would nest
      // for ever) are taken out, in the root and in every rule that is kept, so that the model is
      // never offered them: it would nest until its limit.
      for (const name of productive) this.bodies.set(name, renderGbnf(prune(parseGbnf(this.bodies.get(name)!), productive)!));
      root = renderGbnf(prune(parseGbnf(rootBody), productive) ?? parseGbnf(rootBody));
    }
    const lines = [`root ::= ${root}`];
    for (const [name, body] of this.bodies) lines.push(`${name} ::= ${body}`);
    return `${lines.join('\n')}\n`;
  }
}

/** A GBNF expression as this module writes it: terminals, rule names, sequences, alternatives, `?`, `*`, `+`. */
type GbnfNode =
  | { kind: 'terminal'; text: string }
  | { kind: 'rule'; name: string }
  | { kind: 'sequence' | 'alternatives'; items: GbnfNode[] }
  | { kind: 'optional'; item: GbnfNode; operator: '?' | '*' }
  | { kind: 'some'; item: GbnfNode };

function isProductive(node: GbnfNode, productive: ReadonlySet<string>): boolean {
  switch (node.kind) {
    case 'terminal':
    case 'optional': return true;
    case 'rule': return productive.has(node.name);
    case 'some': return isProductive(node.item, productive);
    case 'sequence': return node.items.every((item) => isProductive(item, productive));
    case 'alternatives': return node.items.some((item) => isProductive(item, productive));
  }
}

const EMPTY: GbnfNode = { kind: 'terminal', text: '""' };

/** The node without its parts that match no finite text; null when it matches none. */
function prune(node: GbnfNode, productive: ReadonlySet<string>): GbnfNode | null {
  switch (node.kind) {
    case 'terminal': return node;
    case 'rule': return productive.has(node.name) ? node : null;
    case 'optional': {
      const item = prune(node.item, productive);
      return item ? { ...node, item } : EMPTY;
    }
    case 'some': {
      const item = prune(node.item, productive);
      return item && { ...node, item };
    }
    case 'sequence': {
      const items = node.items.map((item) => prune(item, productive));
      return items.every((item) => item !== null) ? { kind: 'sequence', items: items as GbnfNode[] } : null;
    }
    case 'alternatives': {
      const items = node.items.map((item) => prune(item, productive)).filter((item) => item !== null);
      return items.length === 0 ? null : items.length === 1 ? items[0]! : { kind: 'alternatives', items };
    }
  }
}

function renderGbnf(node: GbnfNode): string {
  const grouped = (inner: GbnfNode) => (inner.kind === 'terminal' || inner.kind === 'rule' ? renderGbnf(inner) : `(${renderGbnf(inner)})`);
  switch (node.kind) {
    case 'terminal': return node.text;
    case 'rule': return node.name;
    case 'optional': return `${grouped(node.item)}${node.operator}`;
    case 'some': return `${grouped(node.item)}+`;
    case 'sequence': return node.items.map((item) => (item.kind === 'alternatives' ? grouped(item) : renderGbnf(item))).join(' ');
    case 'alternatives': return node.items.map(renderGbnf).join(' | ');
  }
}

/** Parses an expression written by this module (literals, classes, names, groups, `|`, `?`, `*`, `+`). */
function parseGbnf(text: string): GbnfNode {
  let at = 0;
  const skipSpace = () => {
    while (at < text.length && /\s/.test(text[at]!)) at++;
  };
  const quoted = (close: string): GbnfNode => {
    const start = at;
    for (at++; at < text.length && text[at] !== close; at++) if (text[at] === '\\') at++;
    at++;
    return { kind: 'terminal', text: text.slice(start, at) };
  };
  const alternatives = (): GbnfNode => {
    const items = [sequence()];
    while (text[at] === '|') {
      at++;
      items.push(sequence());
    }
    return items.length === 1 ? items[0]! : { kind: 'alternatives', items };
  };
  const sequence = (): GbnfNode => {
    const items: GbnfNode[] = [];
    for (skipSpace(); at < text.length && text[at] !== '|' && text[at] !== ')'; skipSpace()) items.push(postfix(atom()));
    return items.length === 1 ? items[0]! : { kind: 'sequence', items };
  };
  const postfix = (node: GbnfNode): GbnfNode => {
    const operator = text[at];
    if (operator === '?' || operator === '*') {
      at++;
      return { kind: 'optional', item: node, operator };
    }
    if (operator === '+') {
      at++;
      return { kind: 'some', item: node };
    }
    return node;
  };
  const atom = (): GbnfNode => {
    const char = text[at]!;
    if (char === '"') return quoted('"');
    if (char === '[') return quoted(']');
    if (char === '(') {
      at++;
      const inner = alternatives();
      if (text[at] !== ')') throw new Error(`unbalanced group in ${text}`);
      at++;
      return inner;
    }
    const name = /^[a-z0-9-]+/.exec(text.slice(at, at + 64))?.[0];
    if (!name) throw new Error(`unexpected ${JSON.stringify(char)} in ${text}`);
    at += name.length;
    return { kind: 'rule', name };
  };
  const node = alternatives();
  if (at < text.length) throw new Error(`unexpected ${JSON.stringify(text[at])} in ${text}`);
  return node;
}
