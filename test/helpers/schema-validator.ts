/**
 * JSON Schema 2020-12 validation with formats (Ajv), to check what constrained decoding produced.
 * `ownProperties`: a required `constructor` is not satisfied by what `{}` inherits.
 */
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

const ajv = new Ajv2020.default({ strict: false, allErrors: true, validateFormats: true, ownProperties: true });
addFormats.default(ajv);

/** Parses the text and validates it; returns null when valid, else what is wrong. */
export function schemaViolation(schema: unknown, text: string): string | null {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return `not JSON: ${(error as Error).message}`;
  }
  const validate = ajv.compile(schema as object);
  return validate(value) ? null : ajv.errorsText(validate.errors);
}
