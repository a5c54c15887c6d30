/**
 * Tokens and pairing codes (LMSP section 4). Both come from a CSPRNG. A token (256 bits) is
 * stored as its SHA-256 and found by looking its hash up, so no secret is ever compared byte by
 * byte. A pairing code has only 40 bits: a bare hash of one could be brute-forced offline by
 * whoever reads the database, so codes are stored keyed, as an HMAC with a secret of the data
 * directory kept outside the database (pairing-key.ts).
 */
import { createHash, createHmac, randomBytes, randomInt } from 'node:crypto';

const TOKEN_PREFIX = 'lmsp_';
const TOKEN_PATTERN = /^lmsp_[A-Za-z0-9_-]{43}$/;
/** Crockford's base32: no I, L, O or U, so codes survive being read aloud or typed. */
const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
const CODE_LENGTH = 8;

export function sha256(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}

/** `lmsp_` + 43 base64url characters from 32 random bytes. */
export function newToken(): string {
  return TOKEN_PREFIX + randomBytes(32).toString('base64url');
}

export function looksLikeToken(value: string): boolean {
  return TOKEN_PATTERN.test(value);
}

/** A pairing code as shown to people: `XXXX-XXXX`. */
export function newPairingCode(): string {
  let code = '';
  for (let i = 0; i < CODE_LENGTH; i++) code += CROCKFORD[randomInt(CROCKFORD.length)];
  return `${code.slice(0, 4)}-${code.slice(4)}`;
}

/** The canonical form of a typed code (case, dashes, spaces and Crockford's look-alikes), or null. */
export function normalizePairingCode(input: string): string | null {
  const code = input.toUpperCase().replace(/[\s-]/g, '').replace(/[IL]/g, '1').replace(/O/g, '0');
  if (code.length !== CODE_LENGTH || [...code].some((char) => !CROCKFORD.includes(char))) return null;
  return code;
}

export function hashPairingCode(normalized: string, key: Buffer): Buffer {
  return createHmac('sha256', key).update(`pairing-code:${normalized}`, 'utf8').digest();
}
