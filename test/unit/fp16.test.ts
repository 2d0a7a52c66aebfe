import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FP16_MAX, addHalves, decodeHalves, encodeHalves, floatToHalf, halfToFloat, roundToHalves } from '../../shared/collectives/fp16';

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);
const fromBits = (bits: number): number => {
  u32[0] = bits;
  return f32[0]!;
};
const bitsOf = (value: number): number => {
  f32[0] = value;
  return u32[0]!;
};
const hex = (n: number): string => `0x${n.toString(16).padStart(4, '0')}`;
const isNaNHalf = (h: number): boolean => (h & 0x7c00) === 0x7c00 && (h & 0x03ff) !== 0;

/** The value of a half from the textbook formula, independent of the module's bit tricks. */
function halfValue(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 0x1f;
  const m = h & 0x3ff;
  if (e === 0) return sign * m * 2 ** -24;
  if (e === 31) return m === 0 ? sign * Infinity : Number.NaN;
  return sign * 2 ** (e - 15) * (1 + m / 1024);
}

/** Non-negative finite halves in increasing order; the index is also the half's bits. */
const POSITIVE_HALVES = Array.from({ length: 0x7c00 }, (_, h) => halfValue(h));

/**
 * Round to nearest, ties to even, by search over every finite half: the reference the bit
 * manipulation must agree with. The overflow threshold is IEEE's: a magnitude that would
 * round to 2^16 with unbounded exponent (≥ 65520) is infinite.
 */
function referenceHalf(x: number): number {
  if (Number.isNaN(x)) return -1;
  const sign = x < 0 || Object.is(x, -0) ? 0x8000 : 0;
  const a = Math.abs(x);
  if (a >= 65520) return sign | 0x7c00;
  let lo = 0;
  let hi = POSITIVE_HALVES.length - 1;
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (POSITIVE_HALVES[mid]! <= a) lo = mid;
    else hi = mid;
  }
  if (a >= POSITIVE_HALVES[hi]!) return sign | hi;
  const below = a - POSITIVE_HALVES[lo]!;
  const above = POSITIVE_HALVES[hi]! - a;
  if (below < above) return sign | lo;
  if (above < below) return sign | hi;
  return sign | (lo % 2 === 0 ? lo : hi);
}

test('every one of the 65536 halves decodes to its value and encodes back to itself', () => {
  let nans = 0;
  for (let h = 0; h <= 0xffff; h++) {
    const value = halfToFloat(h);
    if (isNaNHalf(h)) {
      nans++;
      assert.ok(Number.isNaN(value), hex(h));
      // A conversion quiets a signalling NaN; sign and payload are kept.
      assert.equal(floatToHalf(value), h | 0x0200, hex(h));
      continue;
    }
    assert.ok(Object.is(value, halfValue(h)), `${hex(h)} decodes to ${value}, want ${halfValue(h)}`);
    assert.equal(floatToHalf(value), h, `${hex(h)} round trip`);
  }
  assert.equal(nans, 2 * 1023);
});

test('rounding to half is nearest-even on the named edge cases', () => {
  const cases: Array<[number, number]> = [
    [0, 0x0000],
    [-0, 0x8000],
    [1, 0x3c00],
    [-2, 0xc000],
    [1 + 2 ** -11, 0x3c00], // tie, to the even 1.0
    [1 + 3 * 2 ** -11, 0x3c02], // tie, to the even 0x3c02
    [1 + 2 ** -11 + 2 ** -23, 0x3c01], // just above the tie
    [FP16_MAX, 0x7bff],
    [65519, 0x7bff], // just below the overflow tie
    [65520, 0x7c00], // the tie between 65504 and 2^16 goes to the even 2^16: infinite
    [-65520, 0xfc00],
    [1e10, 0x7c00],
    [3.4e38, 0x7c00],
    [Infinity, 0x7c00],
    [-Infinity, 0xfc00],
    [Number.NaN, 0x7e00],
    [2 ** -14, 0x0400], // smallest normal
    [1023 * 2 ** -24, 0x03ff], // largest subnormal
    [1023.5 * 2 ** -24, 0x0400], // tie between the largest subnormal and the smallest normal
    [2 ** -24, 0x0001], // smallest subnormal
    [2 ** -25, 0x0000], // tie between 0 and 2^-24: to the even 0
    [-(2 ** -25), 0x8000],
    [2 ** -25 * (1 + 2 ** -23), 0x0001],
    [1.5 * 2 ** -24, 0x0002], // tie, to the even 2
    [2.5 * 2 ** -24, 0x0002], // tie, to the even 2
    [2 ** -26, 0x0000],
    [2 ** -149, 0x0000], // smallest float32 subnormal
    [0.1, 0x2e66],
    [1 / 3, 0x3555],
  ];
  for (const [value, want] of cases) {
    assert.equal(hex(floatToHalf(value)), hex(want), `${value}`);
    if (!Number.isNaN(value)) assert.equal(hex(referenceHalf(Math.fround(value))), hex(want), `reference for ${value}`);
  }
});

test('rounding matches the nearest-even reference at every tie, beside it, and on random float32s', () => {
  const check = (bits: number): void => {
    const x = fromBits(bits);
    const got = floatToHalf(x);
    if (Number.isNaN(x)) {
      assert.ok(isNaNHalf(got), `NaN ${bits.toString(16)} -> ${hex(got)}`);
      return;
    }
    const want = referenceHalf(x);
    if (got !== want) assert.fail(`${x} (float32 ${bits.toString(16)}): got ${hex(got)}, want ${hex(want)}`);
  };
  // Every midpoint between neighbouring halves (exact in float32) and its float32 neighbours.
  for (let h = 0; h < 0x7c00; h++) {
    const mid = Math.fround((POSITIVE_HALVES[h]! + (h + 1 < 0x7c00 ? POSITIVE_HALVES[h + 1]! : 65536)) / 2);
    const midBits = bitsOf(mid);
    for (const bits of [midBits - 1, midBits, midBits + 1]) {
      check(bits);
      check((bits | 0x80000000) >>> 0);
    }
  }
  // A deterministic spread of float32 bit patterns (xorshift32), NaNs and infinities included.
  let state = 0x9e3779b9;
  for (let i = 0; i < 500_000; i++) {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    check(state >>> 0);
  }
});

test('the bulk helpers encode, add, decode and round in place, and count overflows', () => {
  const src = Float32Array.from([1, 70000, -1e6, Infinity, Number.NaN, 0.1, FP16_MAX]);
  const halves = new Uint16Array(src.length);
  assert.equal(encodeHalves(src, 0, halves, src.length), 2, 'only the finite values that overflow count');
  assert.deepEqual([...halves].map(hex), ['0x3c00', '0x7c00', '0xfc00', '0x7c00', '0x7e00', '0x2e66', '0x7bff']);
  const decoded = new Float32Array(src.length + 2);
  decodeHalves(halves, decoded, 2, src.length);
  assert.deepEqual([...decoded.subarray(0, 2)], [0, 0]);
  assert.equal(decoded[2 + 5], Math.fround(halfValue(0x2e66)));
  const sums = Float32Array.from([0.5, 0.5]);
  addHalves(Uint16Array.from([0x3c00, 0x2e66]), sums, 0, 2);
  assert.deepEqual([...sums], [1.5, Math.fround(0.5 + halfValue(0x2e66))]);
  const inPlace = Float32Array.from([9, 0.1, 1e5, 3]);
  assert.equal(roundToHalves(inPlace, 1, 2), 1);
  assert.deepEqual([...inPlace], [9, Math.fround(halfValue(0x2e66)), Infinity, 3]);
});
