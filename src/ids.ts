/** Identifiers: a prefix plus random base62 characters (LMSP section 2: at least 24). */
import { randomBytes } from 'node:crypto';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const ID_RANDOM_LENGTH = 32;

/** `length` base62 characters from a CSPRNG, without modulo bias. */
export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248) out += BASE62[byte % 62];
      if (out.length === length) break;
    }
  }
  return out;
}

export type IdPrefix = 'resp' | 'task' | 'msg' | 'cli' | 'svc';

export function newId(prefix: IdPrefix): string {
  return `${prefix}_${randomBase62(ID_RANDOM_LENGTH)}`;
}

/** Model ids are chosen by the operator (LMSP section 2). */
export const MODEL_ID_PATTERN = /^[a-z0-9][a-z0-9._:-]{0,127}$/;
