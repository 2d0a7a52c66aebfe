/**
 * PowerSGD (Vogels, Karimireddy & Jaggi, NeurIPS 2019) as a collective: a buffer of summed
 * gradients (every step's, or a round's change in weights) travels as rank-r factors of each
 * weight matrix instead of the matrix. With M_i the m × n matrix on rank i (its buffer plus
 * what its last sums did not carry):
 *
 *   P  = Σ_i M_i Q        one all-reduce of m·r floats, with the vectors and the exact tail;
 *   P̂  = P's columns made orthonormal (Gram–Schmidt; every rank holds the same P);
 *   Q' = Σ_i M_iᵀ P̂       a second all-reduce of n·r floats;
 *   ΣM ≈ P̂ Q'ᵀ,           what every rank applies: the same bits everywhere.
 *
 * Error feedback: rank i keeps M_i − P̂ P̂ᵀ M_i, the part of its buffer the factors did not
 * carry, and adds it to its next buffer, so nothing it trained is lost, only delayed. Q
 * starts each sum from the last Q' (normalised), so one power iteration a sum tracks the
 * matrix's leading directions. Vectors (biases) and the tail travel whole.
 *
 * Q and the residuals live as long as the generation's collective: a new ring starts them
 * afresh (Q from a fixed seed, every residual at zero), so survivors and joiners agree on Q
 * without a hand-over. A sum that fails leaves both as they were: the step is summed again.
 */
import { COLLECTIVE_TAG, passOptions, type BroadcastChain, type Collective, type CollectiveOptions, type CollectiveTag } from './collective';
import { mulberry32 } from '../util/random';
import { quantizedOver } from './quantized-sum';
import type { StartConfig } from '../protocol';

/** One weight matrix of the flat buffer: `rows` × `cols` floats, row-major, from `offset`. */
export interface FlatMatrix {
  offset: number;
  rows: number;
  cols: number;
}

/**
 * Where one matrix's pieces lie: the vector floats before it in the head ([vectorFrom,
 * matrix.offset)), which travel whole at `vectorAt` of the first sum, then its P at `pAt`;
 * its Q and Q' at `qAt` of their buffers.
 */
interface Segment {
  mat: FlatMatrix;
  vectorFrom: number;
  vectorAt: number;
  pAt: number;
  qAt: number;
}

/** Where the matrices are in the buffer's head of `length` floats; every float outside them is a vector's, sent whole. */
export interface FactorLayout {
  length: number;
  matrices: readonly FlatMatrix[];
}

/** Q's first values: the same on every rank, whatever the run. */
const Q_SEED = 0x5eed_0f9d;
/**
 * A column whose length after Gram–Schmidt is under this fraction of its length before has
 * no direction of its own left (the matrix's rank is below r, or the column was zero): it
 * is set to zero, because normalising its rounding noise would give a column that is not
 * orthogonal to the others, and P̂ P̂ᵀ would no longer be a projection.
 */
const RANK_DEFICIENT = 1e-4;

/**
 * The layout of a model whose variables have `shapes`, in variable order: a variable of two
 * or more dimensions is a matrix of its last dimension's columns (a convolution kernel
 * [h, w, in, out] is (h·w·in) × out); one of one dimension is a vector. A matrix too small
 * to gain from factors of rank `rank` (r·(m + n) ≥ m·n) travels whole, as a vector does.
 */
export function factorLayout(shapes: ReadonlyArray<readonly number[]>, rank: number): FactorLayout {
  const matrices: FlatMatrix[] = [];
  let offset = 0;
  for (const shape of shapes) {
    const size = shape.reduce((a, b) => a * b, 1);
    const cols = shape.at(-1) ?? 1;
    const rows = size / cols;
    if (shape.length >= 2 && rank * (rows + cols) < rows * cols) matrices.push({ offset, rows, cols });
    offset += size;
  }
  return { length: offset, matrices };
}

/** Floats a sum sends through the collective for `layout` at `rank`, the tail not counted: P and the vectors, then Q'. */
export function factorFloats(layout: FactorLayout, rank: number): { first: number; second: number } {
  let matrixFloats = 0;
  let first = 0;
  let second = 0;
  for (const m of layout.matrices) {
    matrixFloats += m.rows * m.cols;
    first += m.rows * rank;
    second += m.cols * rank;
  }
  return { first: first + layout.length - matrixFloats, second };
}

/** Makes the `r` columns of the row-major rows × r block at `at` of `a` orthonormal, in place (modified Gram–Schmidt). */
export function orthonormalise(a: Float32Array, at: number, rows: number, r: number): void {
  for (let j = 0; j < r; j++) {
    let before = 0;
    for (let i = 0; i < rows; i++) before += a[at + i * r + j]! * a[at + i * r + j]!;
    for (let k = 0; k < j; k++) {
      let dot = 0;
      for (let i = 0; i < rows; i++) dot += a[at + i * r + j]! * a[at + i * r + k]!;
      for (let i = 0; i < rows; i++) a[at + i * r + j] = a[at + i * r + j]! - dot * a[at + i * r + k]!;
    }
    let norm = 0;
    for (let i = 0; i < rows; i++) norm += a[at + i * r + j]! * a[at + i * r + j]!;
    const scale = norm > 0 && norm > before * RANK_DEFICIENT * RANK_DEFICIENT ? 1 / Math.sqrt(norm) : 0;
    for (let i = 0; i < rows; i++) a[at + i * r + j] = a[at + i * r + j]! * scale;
  }
}

/**
 * `collective` as the run sums its gradients (start config's powerSgdRank and sumWordBits):
 * factored at the rank over a model of `shapes` (the replica's weightShapes), each sum in
 * words of that width; as it is for 0 and 0.
 */
export function compressedOver(collective: Collective, config: Pick<StartConfig, 'powerSgdRank' | 'sumWordBits'>, shapes: ReadonlyArray<readonly number[]>): Collective {
  const words = quantizedOver(collective, config.sumWordBits);
  const rank = config.powerSgdRank;
  return rank > 0 ? new PowerSgdCollective(words, factorLayout(shapes, rank), rank) : words;
}

export class PowerSgdCollective implements Collective {
  readonly rank: number;
  readonly worldSize: number;
  /** What this rank's sums have not carried yet (error feedback), over the head. */
  private residual: Float32Array;
  /** The head plus the residual: this sum's matrices before they are factored. */
  private readonly m: Float32Array;
  /** The residual this sum leaves, kept apart until both all-reduces succeeded. */
  private nextResidual: Float32Array;
  /** Every matrix's Q (n × r, row-major), one after another: the same on every rank. */
  private readonly q: Float32Array;
  private first = new Float32Array(0);
  private readonly second: Float32Array;
  private readonly floats: { first: number; second: number };
  /** Each matrix's pieces in the buffers, in layout order; the vectors after the last start at `tailVectorFrom`. */
  private readonly segments: Segment[] = [];
  private readonly tailVectorFrom: number;
  /** The options of the factors' all-reduces: the caller's, with the tail only on the first. */
  private readonly firstOptions: CollectiveOptions = {};
  private readonly secondOptions: CollectiveOptions = {};
  /** Floats this rank sent through the inner collective for its sums, the tails not counted; for the bench. */
  sentFloats = 0;

  constructor(
    private readonly inner: Collective,
    private readonly layout: FactorLayout,
    private readonly r: number,
  ) {
    this.rank = inner.rank;
    this.worldSize = inner.worldSize;
    this.residual = new Float32Array(layout.length);
    this.m = new Float32Array(layout.length);
    this.nextResidual = new Float32Array(layout.length);
    this.floats = factorFloats(layout, r);
    this.second = new Float32Array(this.floats.second);
    this.q = new Float32Array(this.floats.second);
    let p = 0;
    let qAt = 0;
    let covered = 0;
    for (const mat of layout.matrices) {
      const vectorAt = p;
      p += mat.offset - covered;
      this.segments.push({ mat, vectorFrom: covered, vectorAt, pAt: p, qAt });
      p += mat.rows * r;
      qAt += mat.cols * r;
      covered = mat.offset + mat.rows * mat.cols;
    }
    this.tailVectorFrom = covered;
    const random = mulberry32(Q_SEED);
    for (let i = 0; i < this.q.length; i++) this.q[i] = random() - 0.5;
    for (const { mat, qAt: at } of this.segments) orthonormalise(this.q, at, mat.cols, r);
  }

  broadcast(buf: Float32Array, step: number, tag: CollectiveTag, chain: BroadcastChain): Promise<void> {
    return this.inner.broadcast(buf, step, tag, chain);
  }

  allReduce(buf: Float32Array, step: number, tag: CollectiveTag, options: CollectiveOptions = {}): Promise<void> {
    // Alone, nothing travels; only the gradients (or a round's change) are factored.
    if (tag !== COLLECTIVE_TAG.gradients || this.worldSize === 1) return this.inner.allReduce(buf, step, tag, options);
    return this.factoredSum(buf, step, tag, options);
  }

  private async factoredSum(buf: Float32Array, step: number, tag: CollectiveTag, options: CollectiveOptions): Promise<void> {
    const { layout, r, m, q, second } = this;
    const tail = options.exactTail ?? 0;
    if (buf.length - tail !== layout.length) throw new RangeError(`PowerSGD: a head of ${buf.length - tail} floats, laid out for ${layout.length}`);
    if (this.first.length !== this.floats.first + tail) this.first = new Float32Array(this.floats.first + tail);
    const first = this.first;
    for (let i = 0; i < m.length; i++) m[i] = buf[i]! + this.residual[i]!;

    // P = M Q for every matrix, after the vectors before it; the last vectors and the tail as they are.
    for (const { mat, vectorFrom, vectorAt, pAt, qAt } of this.segments) {
      first.set(m.subarray(vectorFrom, mat.offset), vectorAt);
      for (let i = 0; i < mat.rows; i++) {
        const row = mat.offset + i * mat.cols;
        for (let j = 0; j < r; j++) {
          let s = 0;
          for (let c = 0; c < mat.cols; c++) s += m[row + c]! * q[qAt + c * r + j]!;
          first[pAt + i * r + j] = s;
        }
      }
    }
    const lastVectors = this.floats.first - (layout.length - this.tailVectorFrom);
    first.set(m.subarray(this.tailVectorFrom), lastVectors);
    first.set(buf.subarray(layout.length), this.floats.first);
    this.firstOptions.wire = options.wire;
    await this.inner.allReduce(first, step, tag, passOptions(this.firstOptions, options, tail));

    // P̂ from the class's P, then this rank's Q' = Mᵀ P̂ and what it leaves out.
    for (const { mat, pAt, qAt } of this.segments) {
      orthonormalise(first, pAt, mat.rows, r);
      for (let c = 0; c < mat.cols; c++) {
        for (let j = 0; j < r; j++) {
          let s = 0;
          for (let i = 0; i < mat.rows; i++) s += m[mat.offset + i * mat.cols + c]! * first[pAt + i * r + j]!;
          second[qAt + c * r + j] = s;
        }
      }
      this.reconstruct(first, pAt, second, qAt, mat, m, this.nextResidual);
    }
    this.secondOptions.wire = options.wire;
    await this.inner.allReduce(second, step, COLLECTIVE_TAG.gradientFactors, passOptions(this.secondOptions, options, 0));

    // The class's sum ≈ P̂ Q'ᵀ; the vectors and the tail came whole. Commit Q and the residual.
    for (const { mat, vectorFrom, vectorAt, pAt, qAt } of this.segments) {
      buf.set(first.subarray(vectorAt, pAt), vectorFrom);
      this.reconstruct(first, pAt, second, qAt, mat, null, buf);
      q.set(second.subarray(qAt, qAt + mat.cols * r), qAt);
      orthonormalise(q, qAt, mat.cols, r);
    }
    buf.set(first.subarray(lastVectors, this.floats.first), this.tailVectorFrom);
    buf.set(first.subarray(this.floats.first), layout.length);
    // The new residual is written only where the matrices are (the vectors travel whole and
    // owe nothing: zero in both buffers), so the two buffers just change places.
    [this.residual, this.nextResidual] = [this.nextResidual, this.residual];
    this.sentFloats += this.floats.first + this.floats.second;
  }


  /**
   * P̂ Q'ᵀ into the matrix's place in `out`, or, given `minus`, `minus` − P̂ Q'ᵀ (the residual
   * this rank's own Q' leaves: M − P̂ P̂ᵀ M).
   */
  private reconstruct(pHat: Float32Array, p: number, qs: Float32Array, qa: number, mat: FlatMatrix, minus: Float32Array | null, out: Float32Array): void {
    const r = this.r;
    for (let i = 0; i < mat.rows; i++) {
      const row = mat.offset + i * mat.cols;
      for (let c = 0; c < mat.cols; c++) {
        let s = 0;
        for (let j = 0; j < r; j++) s += pHat[p + i * r + j]! * qs[qa + c * r + j]!;
        out[row + c] = minus ? minus[row + c]! - s : s;
      }
    }
  }
}
