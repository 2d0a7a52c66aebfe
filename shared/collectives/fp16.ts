/**
 * Exact IEEE 754 binary32 <-> binary16 conversion for the fp16 wire format of the ring
 * all-reduce.
 *
 * float32 -> float16 rounds to nearest, ties to even, as IEEE 754 §4.3.1 requires of a
 * conversion: magnitudes from 65520 (half-way between 65504, the largest half, and 2^16)
 * become ±Infinity, magnitudes at or below 2^-25 become ±0, and the subnormal halves in
 * between (multiples of 2^-24) are rounded to exactly. NaN stays NaN with its sign and
 * the top 10 payload bits, and is made quiet. float16 -> float32 is exact for every half.
 *
 * Nothing here allocates per call: the bit reinterpretation goes through one module-level
 * scratch word, and the bulk helpers write into views the caller reuses.
 */

const scratchFloat = new Float32Array(1);
const scratchBits = new Uint32Array(scratchFloat.buffer);

/** The largest finite half. */
export const FP16_MAX = 65504;
/** A half's exponent bits: all of them set means ±Infinity or NaN. */
export const HALF_EXPONENT_BITS = 0x7c00;

const SUBNORMAL_UNIT = 2 ** -24;

/**
 * The binary16 bits nearest to `value` once it is a float32 (values read from a
 * Float32Array already are; a wider number is first rounded to float32).
 */
export function floatToHalf(value: number): number {
  scratchFloat[0] = value;
  const bits = scratchBits[0]!;
  const sign = (bits >>> 16) & 0x8000;
  const abs = bits & 0x7fffffff;
  if (abs >= 0x477ff000) {
    // |value| >= 65520, infinite or NaN.
    if (abs > 0x7f800000) return sign | 0x7e00 | ((abs >>> 13) & 0x03ff);
    return sign | 0x7c00;
  }
  if (abs >= 0x38800000) {
    // A normal half (|value| >= 2^-14): rebias the exponent by 127 - 15 = 112, drop 13 mantissa bits.
    const half = (abs >>> 13) - 0x1c000;
    const rest = abs & 0x1fff;
    // A carry out of the mantissa correctly moves to the next binade.
    return sign | (rest > 0x1000 || (rest === 0x1000 && (half & 1) === 1) ? half + 1 : half);
  }
  // 2^-25 itself is a tie between 0 and 2^-24 and goes to the even one, 0.
  if (abs <= 0x33000000) return sign;
  // A subnormal half: the value in units of 2^-24 is mantissa · 2^(exponent - 126).
  const shift = 126 - (abs >>> 23); // 14 .. 24
  const mantissa = (abs & 0x007fffff) | 0x00800000;
  const half = mantissa >>> shift;
  const rest = mantissa & ((1 << shift) - 1);
  const tie = 1 << (shift - 1);
  // Rounding up from the largest subnormal gives 0x0400, the smallest normal: also correct.
  return sign | (rest > tie || (rest === tie && (half & 1) === 1) ? half + 1 : half);
}

/** The float32 value of binary16 `bits` (exact). */
export function halfToFloat(bits: number): number {
  const exponent = bits & 0x7c00;
  const mantissa = bits & 0x03ff;
  if (exponent === 0) {
    const magnitude = mantissa * SUBNORMAL_UNIT;
    return bits & 0x8000 ? -magnitude : magnitude;
  }
  const sign = (bits & 0x8000) << 16;
  scratchBits[0] =
    exponent === 0x7c00 ? sign | 0x7f800000 | (mantissa << 13) : sign | ((exponent + 0x1c000) << 13) | (mantissa << 13);
  return scratchFloat[0]!;
}

/** True for halves that are ±Infinity or NaN. */
const nonFinite = (bits: number): boolean => (bits & 0x7c00) === 0x7c00;

/**
 * Writes the halves of `src[from, from + length)` into `dst[0, length)`. Returns how many
 * finite values overflowed to ±Infinity, so that an overflow is never silent.
 */
export function encodeHalves(src: Float32Array, from: number, dst: Uint16Array, length: number): number {
  let overflows = 0;
  for (let i = 0; i < length; i++) {
    const value = src[from + i]!;
    const bits = floatToHalf(value);
    dst[i] = bits;
    if (nonFinite(bits) && Number.isFinite(value)) overflows++;
  }
  return overflows;
}

/** `dst[at + i] = half(src[i])` for i < length. */
export function decodeHalves(src: Uint16Array, dst: Float32Array, at: number, length: number): void {
  for (let i = 0; i < length; i++) dst[at + i] = halfToFloat(src[i]!);
}

/** `dst[at + i] += half(src[i])` for i < length, each sum rounded once to float32. */
export function addHalves(src: Uint16Array, dst: Float32Array, at: number, length: number): void {
  for (let i = 0; i < length; i++) dst[at + i]! += halfToFloat(src[i]!);
}

/**
 * Rounds `buf[from, from + length)` in place to the nearest halves, so that the values a
 * peer keeps equal the values it sends. Returns how many finite values overflowed.
 */
export function roundToHalves(buf: Float32Array, from: number, length: number): number {
  let overflows = 0;
  for (let i = from; i < from + length; i++) {
    const value = buf[i]!;
    const bits = floatToHalf(value);
    buf[i] = halfToFloat(bits);
    if (nonFinite(bits) && Number.isFinite(value)) overflows++;
  }
  return overflows;
}
