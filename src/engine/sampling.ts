/**
 * Randomness for seeded sampling that survives a resume (LMSP 7.5): the seed of the token at
 * position k is derived from the request's seed and k alone, so a generation continued after a
 * crash draws exactly what an uninterrupted one would have.
 */

function mix32(value: number): number {
  let x = value >>> 0;
  x = Math.imul(x ^ (x >>> 16), 0x7feb352d);
  x = Math.imul(x ^ (x >>> 15), 0x846ca68b);
  return (x ^ (x >>> 16)) >>> 0;
}

/** A 32-bit sampler seed for the token at `position` (0 = first generated token). */
export function positionSeed(seed: number, position: number): number {
  const wide = BigInt.asUintN(64, BigInt(seed));
  const low = Number(wide & 0xffffffffn);
  const high = Number(wide >> 32n);
  return mix32(mix32(low ^ mix32(high + 0x9e3779b9)) + mix32(position + 0x632be5ab));
}

/** A seed for a request that named none; recorded on the response (LMSP section 6). */
export function randomSeed(): number {
  return Math.floor(Math.random() * 2 ** 32);
}
