/**
 * Quantized sums with error feedback: a buffer of gradients (every step's, a round's change
 * in weights, or PowerSGD's factors) travels as small integers in 8- or 16-bit words that
 * every algorithm adds modulo 2^8 or 2^16: a quarter or a half of float32's bytes, and, under
 * secure aggregation, masked words of that width instead of 32 bits.
 *
 * The class agrees on a grid per block of BLOCK_FLOATS values first. Rank i contributes
 * c_i, its block's largest magnitude rounded up to SCALE_GRID; one small all-reduce (on the
 * tag before the values', so masked alike) gives S = Σ c_i, the same bits on every rank.
 * With L = 2^(b−1) − N − 2 levels, the step is s = S / L and rank i sends
 *
 *     q_i = round(x_i / s), clamped to ±⌈c_i / s⌉,
 *
 * so |Σ q_i| ≤ L·Σc_i/S + N < 2^(b−1) (the margin also covers S's float32 rounding): the
 * sum of the N words, read back as a signed b-bit integer, is the exact integer sum, and
 * every rank decodes s·Σq_i to the same float32. Each rank's share of the grid is c_i/S of
 * it: about L/N steps when the ranks' magnitudes are alike (30 at N = 4 with 8-bit words,
 * 8,000 with 16-bit ones).
 *
 * Error feedback: rank i keeps x_i − s·q_i, what its words did not carry, and adds it to its
 * next buffer of the same tag, so nothing it trained is lost, only delayed (Karimireddy et
 * al. 2019). The residuals live as long as the generation's collective, like PowerSGD's: a
 * new ring starts them at zero, and a sum that fails leaves them as they were.
 *
 * What a sum reveals beyond the class's sum: S, the sum of the ranks' largest magnitudes per
 * block (masked alike under secure aggregation, so no rank's own is seen).
 */
import { COLLECTIVE_TAG, passOptions, type BroadcastChain, type Collective, type CollectiveOptions, type CollectiveTag } from './collective';
import { wordsOf } from './words';
import type { SumWordBits } from '../protocol';

/** Values that share one grid: a layer's weights mostly share a magnitude, so blocks this small lose little to the largest. */
export const BLOCK_FLOATS = 1024;
/**
 * The grid the largest magnitudes are rounded up to: secure aggregation's fixed point
 * (shared/secagg/fixed-point.ts), so a masked sum of them is exact and never below the
 * true sum. A block whose values are all far below it waits in the residual until they are not.
 */
export const SCALE_GRID = 2 ** -16;
/** The largest magnitude a block may claim: the fixed point's bound; larger values are clamped, and the rest waits in the residual. */
export const SCALE_BOUND = 2 ** 10 - SCALE_GRID;

/** The levels of the grid of a sum of `n` ranks in `bits`-bit words: L = 2^(b−1) − n − 2 (see above). */
export const quantizedLevels = (bits: 8 | 16, n: number): number => 2 ** (bits - 1) - n - 2;

/** The tag of the scales sent just before the values of `tag`: the order every rank runs them in. */
const SCALE_TAG: Partial<Record<CollectiveTag, CollectiveTag>> = {
  [COLLECTIVE_TAG.gradients]: COLLECTIVE_TAG.gradientScales,
  [COLLECTIVE_TAG.gradientFactors]: COLLECTIVE_TAG.gradientFactorScales,
};

/** `collective` as the run sums its gradients: quantized to `bits`-bit words, or as it is for 0 (start config's sumWordBits). */
export function quantizedOver(collective: Collective, bits: SumWordBits): Collective {
  return bits === 0 ? collective : new QuantizedCollective(collective, bits);
}

/** One tag's buffers: its error feedback (what its last sum did not carry, and the residual the sum in flight leaves) and its blocks' magnitudes. */
interface TagState {
  owed: Float32Array;
  next: Float32Array;
  /** This rank's largest magnitude per block, on the grid. */
  own: Float32Array;
  /** The class's sums of them (before the scales' all-reduce: a copy of `own`). */
  scales: Float32Array;
}

export class QuantizedCollective implements Collective {
  readonly rank: number;
  readonly worldSize: number;
  /** Values clamped to the grid's bound over the collective's life (their excess waits in the residual). */
  clamped = 0;
  private readonly states = new Map<CollectiveTag, TagState>();
  /** The words, then the tail as float32: what the inner collective sums. */
  private words = new Float32Array(0);
  private readonly levels: number;
  private readonly scaleOptions: CollectiveOptions = { wire: 'fp32', exactTail: 0 };
  private readonly wordOptions: CollectiveOptions;

  constructor(
    private readonly inner: Collective,
    private readonly bits: 8 | 16,
  ) {
    this.rank = inner.rank;
    this.worldSize = inner.worldSize;
    this.levels = quantizedLevels(bits, inner.worldSize);
    this.wordOptions = { wire: bits === 8 ? 'u8' : 'u16', exactTail: 0 };
  }

  broadcast(buf: Float32Array, step: number, tag: CollectiveTag, chain: BroadcastChain): Promise<void> {
    return this.inner.broadcast(buf, step, tag, chain);
  }

  allReduce(buf: Float32Array, step: number, tag: CollectiveTag, options: CollectiveOptions = {}): Promise<void> {
    const scaleTag = SCALE_TAG[tag];
    // Alone, nothing travels; only gradients (and their factors) are quantized.
    if (scaleTag === undefined || this.worldSize === 1) return this.inner.allReduce(buf, step, tag, options);
    return this.quantizedSum(buf, step, tag, scaleTag, options);
  }

  private async quantizedSum(buf: Float32Array, step: number, tag: CollectiveTag, scaleTag: CollectiveTag, options: CollectiveOptions): Promise<void> {
    const tail = options.exactTail ?? 0;
    const head = buf.length - tail;
    const blocks = Math.ceil(head / BLOCK_FLOATS);
    const state = this.stateOf(tag, head);
    const { owed, next, own, scales } = state;
    if (this.words.length !== buf.length) this.words = new Float32Array(buf.length);
    const words = this.words;

    // What this rank owes: its buffer plus what its last sum did not carry (kept in `next`
    // until the sum succeeds), and each block's largest magnitude on the grid.
    for (let b = 0; b < blocks; b++) {
      let largest = 0;
      for (let i = b * BLOCK_FLOATS, end = Math.min(head, i + BLOCK_FLOATS); i < end; i++) {
        const v = buf[i]! + owed[i]!;
        const x = v - v === 0 ? v : 0; // a non-finite value (a diverged model) is never sent
        next[i] = x;
        if (Math.abs(x) > largest) largest = Math.abs(x);
      }
      own[b] = Math.min(SCALE_BOUND, Math.ceil(largest / SCALE_GRID) * SCALE_GRID);
    }
    scales.set(own);
    await this.inner.allReduce(scales, step, scaleTag, passOptions(this.scaleOptions, options, 0));

    const w = wordsOf(words);
    const levels = this.levels;
    for (let b = 0; b < blocks; b++) {
      const grid = scales[b]! / levels;
      const cap = grid > 0 ? Math.ceil(own[b]! / grid) : 0;
      for (let i = b * BLOCK_FLOATS, end = Math.min(head, i + BLOCK_FLOATS); i < end; i++) {
        const x = next[i]!;
        let q = grid > 0 ? Math.round(x / grid) : 0;
        if (q > cap || q < -cap) {
          q = q > 0 ? cap : -cap;
          this.clamped++;
        }
        w[i] = q; // a Uint32Array store: q's two's complement
        next[i] = x - q * grid;
      }
    }
    words.set(buf.subarray(head), head);
    await this.inner.allReduce(words, step, tag, passOptions(this.wordOptions, options, tail));

    // The class's sum: the low b bits of each word as a signed integer, on the agreed grid.
    const shift = 32 - this.bits;
    for (let b = 0; b < blocks; b++) {
      const grid = scales[b]! / levels;
      for (let i = b * BLOCK_FLOATS, end = Math.min(head, i + BLOCK_FLOATS); i < end; i++) buf[i] = ((w[i]! << shift) >> shift) * grid;
    }
    buf.set(words.subarray(head), head);
    state.owed = next;
    state.next = owed;
  }

  private stateOf(tag: CollectiveTag, head: number): TagState {
    let state = this.states.get(tag);
    if (!state || state.owed.length !== head) {
      const blocks = Math.ceil(head / BLOCK_FLOATS);
      state = { owed: new Float32Array(head), next: new Float32Array(head), own: new Float32Array(blocks), scales: new Float32Array(blocks) };
      this.states.set(tag, state);
    }
    return state;
  }

}
