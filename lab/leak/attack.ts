/**
 * The gradient-leakage attack on the dense workload (a model whose first layer is dense on
 * the example's pixels: shared/tasks/lab-workloads.ts), as a curious classmate,
 * halving-doubling partner or hub would run it on what it received (docs/privacy.md). For the first dense layer,
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
import { LAB_WORKLOADS, type LabWorkload } from '../../shared/tasks/lab-workloads';
import { featureCount } from '../../shared/tasks/task';

/** A first dense layer as the gradient holds it: an inputs × units kernel (row-major), then units biases. */
export interface DenseLayer {
  /** The example's pixels. */
  inputs: number;
  units: number;
}

/** A workload's first layer: the example's pixels (its task's shape) to its hidden units; throws for one whose first layer is not dense. */
export function denseLayerOf(workload: LabWorkload): DenseLayer {
  if (workload.denseUnits === undefined) throw new Error(`the ${workload.name}'s first layer is not dense: no gradient-leak attack on it here`);
  return { inputs: featureCount(workload.task.example), units: workload.denseUnits };
}

/** The dense workload's first layer, which the demo attacks. */
export const DENSE_LAYER: DenseLayer = denseLayerOf(LAB_WORKLOADS.dense);
/** A unit whose bias gradient is below this carries nothing readable. */
const MIN_UNIT_SIGNAL = 1e-9;

/** One reconstruction: the pixels (NaN where the receiver saw nothing), and which unit gave it. */
export interface Candidate {
  pixels: Float32Array;
  unit: number;
}

/** Every hidden unit's reading of the examples behind `seen` (a gradient, NaN where not seen) of a model whose first layer is `layer`. */
export function denseCandidates(seen: Float32Array, layer: DenseLayer = DENSE_LAYER): Candidate[] {
  const { inputs, units } = layer;
  const kernelFloats = inputs * units;
  const out: Candidate[] = [];
  for (let j = 0; j < units; j++) {
    const bias = seen[kernelFloats + j]!;
    const pixels = new Float32Array(inputs);
    let peak = 0;
    let visible = 0;
    for (let p = 0; p < inputs; p++) {
      const v = seen[p * units + j]!;
      pixels[p] = v;
      if (Number.isFinite(v)) {
        visible++;
        if (Math.abs(v) > Math.abs(peak)) peak = v;
      }
    }
    if (visible === 0) continue;
    const scale = Number.isFinite(bias) && Math.abs(bias) > MIN_UNIT_SIGNAL ? bias : peak;
    if (!(Math.abs(scale) > MIN_UNIT_SIGNAL)) continue;
    for (let p = 0; p < inputs; p++) pixels[p] = Number.isFinite(pixels[p]!) ? pixels[p]! / scale : Number.NaN;
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
