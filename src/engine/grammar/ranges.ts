/**
 * Sets of code points as ranges: sorted, disjoint, inclusive `[from, to]` pairs. What the regex
 * translation and the automata both work with.
 */
export type Ranges = Array<[number, number]>;

export const MAX_CODE_POINT = 0x10ffff;

/** The same code points as sorted, disjoint ranges, adjacent ones merged. */
export function normalizeRanges(ranges: Ranges): Ranges {
  const sorted = [...ranges].sort((a, b) => a[0] - b[0]);
  const out: Ranges = [];
  for (const [from, to] of sorted) {
    const last = out.at(-1);
    if (last && from <= last[1] + 1) last[1] = Math.max(last[1], to);
    else out.push([from, to]);
  }
  return out;
}

/** Every code point the ranges leave out. */
export function complementRanges(ranges: Ranges): Ranges {
  const out: Ranges = [];
  let next = 0;
  for (const [from, to] of normalizeRanges(ranges)) {
    if (from > next) out.push([next, from - 1]);
    next = to + 1;
  }
  if (next <= MAX_CODE_POINT) out.push([next, MAX_CODE_POINT]);
  return out;
}

/** The code points in both (each normalized). */
export function intersectRanges(a: Ranges, b: Ranges): Ranges {
  const out: Ranges = [];
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    const from = Math.max(a[i]![0], b[j]![0]);
    const to = Math.min(a[i]![1], b[j]![1]);
    if (from <= to) out.push([from, to]);
    if (a[i]![1] < b[j]![1]) i++;
    else j++;
  }
  return out;
}

export function rangesContain(ranges: Ranges, codePoint: number): boolean {
  return ranges.some(([from, to]) => codePoint >= from && codePoint <= to);
}
