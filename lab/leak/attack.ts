/**
 * The gradient-leakage attack on the MLP, as a curious classmate, halving-doubling partner
 * or hub would run it on what it received (docs/privacy.md). For the first dense layer,
 * ∂L/∂W₁[p, j] = Σₑ xₑ[p]·δₑ[j] and ∂L/∂b₁[j] = Σₑ δₑ[j]: a hidden unit that only one example
 * of the share switched on gives that example's pixels exactly, as column j divided by the
 * bias gradient (Phong et al. 2017; Geiping et al. 2020 call it the linear-layer leak). With
 * one example every unit does; with more, units that one example alone activates still do.
 * Where the bias is not in what was seen (a ring segment holds only some rows of W₁), the
 * column is scaled to its peak instead: the shape survives, the ink level does not.
 *
 * Scoring: each of the student's examples against its best candidate, by cosine similarity
 * over the pixels the receiver saw. docs/privacy.md explains the threshold.
 */
import { MNIST_PIXELS } from '../../shared/data/mnist-format';

/** The MLP's first layer: 784 inputs to 128 hidden units, then 128 biases (shared/compute/models.ts). */
export const MLP_HIDDEN = 128;
const KERNEL_FLOATS = MNIST_PIXELS * MLP_HIDDEN;
/** A unit whose bias gradient is below this carries nothing readable. */
const MIN_UNIT_SIGNAL = 1e-9;

/** One reconstruction: the pixels (NaN where the receiver saw nothing), and which unit gave it. */
export interface Candidate {
  pixels: Float32Array;
  unit: number;
}

/** Every hidden unit's reading of the examples behind `seen` (a gradient, NaN where not seen). */
export function mlpCandidates(seen: Float32Array): Candidate[] {
  const out: Candidate[] = [];
  for (let j = 0; j < MLP_HIDDEN; j++) {
    const bias = seen[KERNEL_FLOATS + j]!;
    const pixels = new Float32Array(MNIST_PIXELS);
    let peak = 0;
    let visible = 0;
    for (let p = 0; p < MNIST_PIXELS; p++) {
      const v = seen[p * MLP_HIDDEN + j]!;
      pixels[p] = v;
      if (Number.isFinite(v)) {
        visible++;
        if (Math.abs(v) > Math.abs(peak)) peak = v;
      }
    }
    if (visible === 0) continue;
    const scale = Number.isFinite(bias) && Math.abs(bias) > MIN_UNIT_SIGNAL ? bias : peak;
    if (!(Math.abs(scale) > MIN_UNIT_SIGNAL)) continue;
    for (let p = 0; p < MNIST_PIXELS; p++) pixels[p] = Number.isFinite(pixels[p]!) ? pixels[p]! / scale : Number.NaN;
    out.push({ pixels, unit: j });
  }
  return out;
}

/** Cosine similarity over the pixels both images have (finite in `a`); 0 when either is blank there. */
export function cosine(a: Float32Array, b: Float32Array): number {
  let ab = 0;
  let aa = 0;
  let bb = 0;
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!;
    if (!Number.isFinite(x)) continue;
    const y = b[i]!;
    ab += x * y;
    aa += x * x;
    bb += y * y;
  }
  return aa > 0 && bb > 0 ? ab / Math.sqrt(aa * bb) : 0;
}

/** For each original, its best candidate and their similarity. */
export function bestMatches(originals: readonly Float32Array[], candidates: readonly Candidate[]): Array<{ similarity: number; candidate: Candidate | null }> {
  return originals.map((x) => {
    let best: { similarity: number; candidate: Candidate | null } = { similarity: 0, candidate: null };
    for (const c of candidates) {
      const s = cosine(c.pixels, x);
      if (s > best.similarity) best = { similarity: s, candidate: c };
    }
    return best;
  });
}

/** Pixels in [0, 1] (NaN: unseen) as 8-bit gray; unseen pixels mid-gray, so a partial view shows as such. */
export function toGray(pixels: Float32Array): Uint8Array {
  const out = new Uint8Array(pixels.length);
  for (let i = 0; i < pixels.length; i++) {
    const v = pixels[i]!;
    out[i] = Number.isFinite(v) ? Math.round(255 * Math.min(1, Math.max(0, v))) : 128;
  }
  return out;
}
