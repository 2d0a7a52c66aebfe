/** Deterministic test inputs shared by the all-reduce tests. */

/** Integer-valued floats keep every partial sum exact, so any wrong chunk shows. */
export function integerBuffer(rank: number, length: number): Float32Array {
  const buf = new Float32Array(length);
  for (let i = 0; i < length; i++) buf[i] = ((i * 7 + rank * 13) % 101) - 50 + rank * 1000;
  return buf;
}

export function expectedSum(worldSize: number, length: number): Float32Array {
  const sum = new Float32Array(length);
  for (let r = 0; r < worldSize; r++) {
    const b = integerBuffer(r, length);
    for (let i = 0; i < length; i++) sum[i]! += b[i]!;
  }
  return sum;
}

/**
 * Values over a wide range of scales, from 2^-34 (deep in the half subnormals) to 2^10,
 * each a multiple of 2^-34 below 2^12 · 2^k: float32-exact, and any 8 of them add up
 * exactly in float64, so the reference sum carries no error of its own.
 */
export function spreadBuffer(rank: number, length: number, seed: number): Float32Array {
  const buf = new Float32Array(length);
  let state = (0x9e3779b9 ^ (rank * 0x85ebca6b) ^ (seed * 0xc2b2ae35)) >>> 0 || 1;
  const next = (): number => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return state >>> 0;
  };
  for (let i = 0; i < length; i++) {
    const r = next();
    const mantissa = r & 0xfff;
    const exponent = -34 + ((r >>> 12) % 33);
    buf[i] = (r >>> 31 ? -1 : 1) * mantissa * 2 ** (exponent - 2);
  }
  return buf;
}

/** The bound derived in shared/collectives/ring-allreduce.ts: N · (2^-10 · Σ|x| + 2^-24). */
export const fp16Bound = (n: number, absSum: number): number => n * (2 ** -10 * absSum + 2 ** -24);

