/**
 * Identifiers: a prefix, 8 base62 characters of the creation time in milliseconds, then 24
 * random base62 characters (LMSP section 2 asks for at least 24 random ones). Leading with the
 * time keeps new rows at the right edge of the database's indexes, so a commit writes a few
 * pages instead of one random page per index per row.
 */
import { randomFillSync } from 'node:crypto';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const ID_TIME_LENGTH = 8;
const ID_RANDOM_LENGTH = 24;

/** Random bytes drawn from a CSPRNG a pool at a time: one system call per 4 KiB, not per id. */
const pool = Buffer.alloc(4096);
let poolOffset = pool.length;

function randomByte(): number {
  if (poolOffset === pool.length) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  return pool[poolOffset++]!;
}

/** `length` base62 characters from a CSPRNG, without modulo bias. */
export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    const byte = randomByte();
    if (byte < 248) out += BASE62[byte % 62];
  }
  return out;
}

function base62Time(ms: number, length: number): string {
  let out = '';
  let value = ms;
  for (let i = 0; i < length; i++) {
    out = BASE62[value % 62]! + out;
    value = Math.floor(value / 62);
  }
  return out;
}

export type IdPrefix = 'resp' | 'task' | 'msg' | 'cli' | 'svc';

export function newId(prefix: IdPrefix): string {
  return `${prefix}_${base62Time(Date.now(), ID_TIME_LENGTH)}${randomBase62(ID_RANDOM_LENGTH)}`;
}

/** The id of one HTTP request (`x-request-id`), in OpenAI's form: `req_` and 32 random characters. */
export function newRequestId(): string {
  return `req_${randomBase62(32)}`;
}

/** LMSP 13: a chat completion's id, in OpenAI's form (`chatcmpl-...`). */
export function newChatCompletionId(): string {
  return `chatcmpl-${base62Time(Date.now(), ID_TIME_LENGTH)}${randomBase62(ID_RANDOM_LENGTH)}`;
}
