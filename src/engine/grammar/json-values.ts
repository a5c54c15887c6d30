/**
 * The JSON building blocks every constrained grammar shares: whitespace, strings, numbers, any
 * value, and the string formats the schema translation knows.
 */
import { gbnfClass, gbnfLiteral, type GbnfRuleSet } from './gbnf.js';
import { MAX_FRACTION_DIGITS, MAX_INTEGER_DIGITS } from './numbers.js';
import { regexToGbnf } from './regex.js';

/**
 * Whitespace between tokens: nothing, a space, or a line break with some indentation. Bounded,
 * so a model cannot fill its budget with blanks.
 */
const MAX_INDENT = 40;

/**
 * One character of a JSON string: anything but a quote, a backslash or a control character, or
 * a short escape. `\u` escapes are left out: they could spell half a surrogate pair.
 */
const STRING_CHARACTER = `${gbnfClass([[0x22, 0x22], [0x5c, 0x5c], [0x00, 0x1f]], true)} | "\\\\" ${gbnfClass([[0x22, 0x22], [0x5c, 0x5c], [0x2f, 0x2f], [0x62, 0x62], [0x66, 0x66], [0x6e, 0x6e], [0x72, 0x72], [0x74, 0x74]])}`;


export class JsonRules {
  private valueName: string | null = null;
  private objectName = '';

  /** The rules below, each made once: `ws` alone spells out 40 rules, and every member and element asks for it. */
  private readonly made = new Map<string, string>();

  constructor(readonly rules: GbnfRuleSet) {}

  private once(key: string, make: () => string): string {
    let name = this.made.get(key);
    if (name === undefined) this.made.set(key, (name = make()));
    return name;
  }

  get ws(): string {
    return this.once('ws', () => this.rules.define('ws', `( " " | "\\n" ${this.rules.repeat('[ \\t]', 0, MAX_INDENT)} )?`));
  }

  get character(): string {
    return this.once('character', () => this.rules.define('char', STRING_CHARACTER));
  }

  get string(): string {
    return this.once('string', () => this.rules.define('string', `"\\"" ${this.character}* "\\""`));
  }

  get integer(): string {
    return this.once('integer', () => this.rules.define('integer', `"-"? ("0" | [1-9] ${this.rules.repeat('[0-9]', 0, MAX_INTEGER_DIGITS - 1)})`));
  }

  get number(): string {
    return this.once('number', () => this.rules.define('number', `${this.integer} ("." ${this.rules.repeat('[0-9]', 1, MAX_FRACTION_DIGITS)})?`));
  }

  get boolean(): string {
    return this.once('boolean', () => this.rules.define('boolean', '("true" | "false")'));
  }

  get null(): string {
    return this.once('null', () => this.rules.define('null', '"null"'));
  }

  /** `ws "," ws`: what separates members and elements. */
  get separator(): string {
    return this.once('separator', () => this.rules.define('sep', `${this.ws} "," ${this.ws}`));
  }

  /** Any JSON value. */
  get value(): string {
    if (this.valueName) return this.valueName;
    const value = this.rules.reserve('value');
    this.valueName = value;
    const member = this.rules.define('member', `${this.string} ${this.ws} ":" ${this.ws} ${value}`);
    const object = this.objectName = this.rules.define('object', `"{" ${this.ws} (${member} (${this.separator} ${member})* ${this.ws})? "}"`);
    const array = this.rules.define('array', `"[" ${this.ws} (${value} (${this.separator} ${value})* ${this.ws})? "]"`);
    this.rules.set(value, `${object} | ${array} | ${this.string} | ${this.number} | ${this.boolean} | ${this.null}`);
    return value;
  }

  /** Any JSON object (LMSP 6.1 `json_object`). */
  get object(): string {
    void this.value;
    return this.objectName;
  }

  /** A string in one of the known formats (the text between the quotes), or null if unknown. */
  format(format: string): string | null {
    const pattern = formatPattern(format);
    return pattern === null ? null : this.rules.define(`format-${format}`, regexToGbnf(pattern, this.rules));
  }
}

/** A label of a host name: lowercase letters and digits. */
const LABEL = '[a-z0-9]{1,20}';
const DATE = '[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])';
const TIME = '([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,3})?Z';
const OCTET = '(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])';

/**
 * Formats as a subset of what each means, written as regular expressions (whole matches): dates
 * with days 01 to 28 are valid in every month, times and date-times carry `Z`, e-mail addresses
 * and host names use lowercase letters and digits. Every value generated is valid; not every
 * valid value can be generated. The same expressions are the grammar of a format alone and one
 * side of its intersection with a `pattern` or lengths (automaton.ts).
 */
const FORMAT_PATTERNS: Readonly<Record<string, string>> = {
  date: DATE,
  time: TIME,
  'date-time': `${DATE}T${TIME}`,
  uuid: '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}',
  email: `${LABEL}@${LABEL}(\\.${LABEL}){0,2}\\.[a-z]{2,8}`,
  hostname: `${LABEL}(\\.${LABEL}){0,3}`,
  ipv4: `${OCTET}(\\.${OCTET}){3}`,
  uri: `https://${LABEL}(\\.${LABEL}){0,2}\\.[a-z]{2,8}(/[a-z0-9._~-]{0,32}){0,4}`,
};

export const KNOWN_FORMATS = Object.keys(FORMAT_PATTERNS);

/** The regular expression of a known format's values, or null. */
export function formatPattern(format: string): string | null {
  return Object.hasOwn(FORMAT_PATTERNS, format) ? FORMAT_PATTERNS[format]! : null;
}

/** A JSON literal: the text JSON.stringify writes for it. */
export function jsonLiteral(value: unknown): string {
  return gbnfLiteral(JSON.stringify(value));
}
