/**
 * Fixed point modulo 2^32: how a gradient becomes words that masks can hide and that every
 * collective sums exactly (the 'u32' wire, shared/collectives/wire.ts).
 *
 * A rank's value v (the sum of its examples' gradients, per element) is clipped to
 * ±CLIP_BOUND and rounded to the nearest multiple of 2^-FRACTION_BITS: q = round(v · SCALE),
 * an integer with |q| < 2^26, stored as its 32-bit two's complement. N ≤ MAX_ROOM_MEMBERS = 32
 * such integers sum to |Σq| < 32 · 2^26 = 2^31, so the sum read back as a signed 32-bit
 * integer is the true integer sum: masks added modulo 2^32 cancel, and nothing wraps.
 *
 * The error against the float sum, for an element whose N addends are below CLIP_BOUND:
 *
 *     |decoded − Σ v| ≤ N · 2^-17 + 2^-24 · |Σ v|
 *
 * N roundings to the grid (each at most half a step, 2^-17), then one rounding of the exact
 * quotient to float32. At 32 examples per device and N = 30 that is at most
 * 2.3·10^-4 on a summed element, 2.4·10^-7 on the averaged gradient (÷ 960 examples).
 * A clipped value errs by more, and is counted (SecureStats.clipped): at 1024 per element a
 * device's summed gradient would have to be absurd (a diverged model) to reach it.
 */
import { MAX_ROOM_MEMBERS } from '../protocol';

export const FRACTION_BITS = 16;
/** 2^16: one unit of the grid is 1.5·10^-5. */
export const SCALE = 2 ** FRACTION_BITS;
/** The largest encodable magnitude, less one step: |q| ≤ 2^26 − 1. */
export const CLIP_BOUND = 2 ** 10 - 2 ** -FRACTION_BITS;
const MAX_Q = CLIP_BOUND * SCALE;

// The bound above, checked where it is set: N words of at most 2^26 − 1 sum below 2^31.
if (MAX_ROOM_MEMBERS * MAX_Q >= 2 ** 31) throw new Error('fixed point: the sum of a full room could wrap');

/** The documented bound on |decoded − Σ v| for N unclipped addends summing to `sum`. */
export const fixedPointErrorBound = (n: number, sum: number): number => n * 2 ** -(FRACTION_BITS + 1) + 2 ** -24 * Math.abs(sum);

/**
 * Writes `src[0, length)` as fixed-point words plus `mask[0, length)` into `dst` (mod 2^32).
 * Returns how many values were clipped. Non-finite values (never sent: the trainer zeroes
 * a diverged rank's gradient) encode as 0.
 */
export function encodeMasked(src: Float32Array, mask: Uint32Array, dst: Uint32Array, length: number): number {
  let clipped = 0;
  for (let i = 0; i < length; i++) {
    let q = Math.round(src[i]! * SCALE);
    if (q > MAX_Q || q < -MAX_Q) {
      clipped++;
      q = q > 0 ? MAX_Q : -MAX_Q;
    } else if (q !== q) {
      q = 0; // NaN
    }
    // A Uint32Array store reduces modulo 2^32: negative q becomes its two's complement.
    dst[i] = q + mask[i]!;
  }
  return clipped;
}

/** Reads `length` summed words as signed fixed point into `dst` (float32). */
export function decodeSum(src: Uint32Array, dst: Float32Array, length: number): void {
  for (let i = 0; i < length; i++) dst[i] = (src[i]! | 0) / SCALE;
}
