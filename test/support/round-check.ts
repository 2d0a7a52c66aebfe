/**
 * A local-steps round through a Replica (Replica.trainRound, compute/device-round.ts) against
 * the step-by-step path every-step training takes, with no Node or DOM of its own: the unit
 * tests run it in Node (test/unit/device-round.test.ts) and a test page runs it in a tab's
 * compute thread on each browser backend (client/round-check.ts, test/e2e/round-backends.spec.ts).
 */
import { RoundLegs } from '../../shared/training/round-legs';
import type { Replica } from '../../shared/compute/replica';

/** Real digits as the models take them: step `s`'s `n` examples of `share`, features in 0..1. */
export interface Digits {
  /** Examples a step holds at most (the legs' stride). */
  share: number;
  /** Floats of one example. */
  rowFloats: number;
  of(s: number, n?: number): { features: Float32Array; labels: Int32Array };
}

/** Every step's examples, as `digits` has them, from MNIST's `features` (bytes) and `labels`, row by row. */
export function digitsFrom(features: ArrayLike<number>, labels: ArrayLike<number>, share: number, rowFloats: number): Digits {
  return {
    share,
    rowFloats,
    of(s, n = share) {
      const out = { features: new Float32Array(n * rowFloats), labels: new Int32Array(n) };
      for (let i = 0; i < n; i++) {
        const at = s * share + i;
        for (let p = 0; p < rowFloats; p++) out.features[i * rowFloats + p] = features[at * rowFloats + p]! / 255;
        out.labels[i] = labels[at]!;
      }
      return out;
    },
  };
}

export interface RoundResult {
  weights: Float32Array;
  loss: number;
  correct: number;
}

/** The round's steps (counts: examples a step, 0 sits one out) in one leg, or in legs of `perLeg` steps. */
export async function trainRound(replica: Replica, digits: Digits, counts: number[], rate: number, perLeg = counts.length, drift: Float32Array | null = null): Promise<RoundResult> {
  const legs = new RoundLegs(replica.parameterCount, digits.rowFloats, digits.share, counts.length, perLeg * digits.share * digits.rowFloats * 4);
  if (legs.capacity !== perLeg) throw new Error(`legs of ${legs.capacity} steps, not ${perLeg}`);
  let loss = 0;
  let correct = 0;
  for (let from = 0; from < counts.length; from += perLeg) {
    const k = Math.min(perLeg, counts.length - from);
    for (let j = 0; j < k; j++) {
      const slot = legs.slot(j);
      const d = digits.of(from + j);
      slot.features.set(d.features);
      slot.labels.set(d.labels);
      legs.set(j, counts[from + j]!, rate);
    }
    const done = await legs.train(replica, k, { first: from === 0, last: from + k >= counts.length, drift: from === 0 ? drift : null });
    loss += done.loss;
    correct += done.correct;
  }
  return { weights: legs.weights.slice(), loss, correct };
}

/** The same steps one at a time, as every-step training runs them: gradients read back, the mean, the fused update; the replica's state is put back after. */
export async function stepByStep(replica: Replica, digits: Digits, counts: number[], rate: number, drift: Float32Array | null = null): Promise<RoundResult> {
  let loss = 0;
  let correct = 0;
  const start = await replica.readState();
  for (let s = 0; s < counts.length; s++) {
    const n = counts[s]!;
    if (n === 0) continue;
    const { flat, ...result } = await replica.computeGradients({ ...digits.of(s), n }, new Float32Array(replica.parameterCount));
    loss += result.loss;
    correct += result.correct;
    for (let i = 0; i < flat.length; i++) flat[i] = flat[i]! / n;
    await replica.applyGradients(flat, rate);
    if (drift) {
      const w = await replica.readState();
      for (let i = 0; i < drift.length; i++) w[i] = w[i]! + drift[i]!;
      await replica.writeState(w);
    }
  }
  const weights = await replica.readWeights();
  await replica.writeState(start);
  return { weights, loss, correct };
}

export function maxDiff(a: Float32Array, b: Float32Array): number {
  let d = 0;
  for (let i = 0; i < a.length; i++) d = Math.max(d, Math.abs(a[i]! - b[i]!));
  return d;
}

/** What acrossEpochEnd measured. */
export interface EpochEndReport {
  /** The one-step round's and the next round's local weights against the step-by-step path's. */
  oneStepDiff: number;
  nextDiff: number;
  loss: number;
  /** Tensors the replica's engine held after it all, less before. */
  tensorsLeft: number;
}

/**
 * An epoch's end one step into a round (mnist-60k at 3 × 32: 625 = 6 · 104 + 1): the round of
 * that one step, a short shard as an epoch's tail often is, then the evaluation that closes
 * the epoch and the next epoch's first round, each against the step-by-step path, on `a`
 * (the round path under test) and `b` (step by step). Throws, saying what differed, past
 * `tolerance` per weight.
 */
export async function acrossEpochEnd(a: Replica, b: Replica, digits: Digits, tolerance: number, tensors: () => Promise<number>): Promise<EpochEndReport> {
  const check = (ok: boolean, what: string) => {
    if (!ok) throw new Error(what);
  };
  const before = await tensors();
  const tail = await trainRound(a, digits, [11], 0.1);
  const byStep = await stepByStep(b, digits, [11], 0.1);
  const oneStepDiff = maxDiff(tail.weights, byStep.weights);
  check(oneStepDiff <= tolerance, `a round of one step: the local weights differ by ${oneStepDiff}`);
  check(maxDiff(tail.weights, await a.readWeights()) > 1e-4, 'the one step did not move the local weights');
  check(tail.loss > 0 && Math.abs(tail.loss - byStep.loss) <= 1e-3 * byStep.loss, `a round of one step: loss ${tail.loss} against ${byStep.loss}`);
  check(tail.correct === byStep.correct, `a round of one step: ${tail.correct} right against ${byStep.correct}`);
  // The class's state is the round start's, so the evaluation scores it alike on both.
  const [sa, sb] = [await a.score({ ...digits.of(7), n: digits.share }), await b.score({ ...digits.of(7), n: digits.share })];
  check(Math.abs(sa.loss - sb.loss) <= 1e-4 * sb.loss && sa.correct === sb.correct, `the evaluation after it scored ${sa.loss} (${sa.correct} right) against ${sb.loss} (${sb.correct})`);
  const next = await trainRound(a, digits, [digits.share, digits.share, 5], 0.1);
  const nextByStep = await stepByStep(b, digits, [digits.share, digits.share, 5], 0.1);
  const nextDiff = maxDiff(next.weights, nextByStep.weights);
  check(nextDiff <= tolerance, `the next epoch's first round: the local weights differ by ${nextDiff}`);
  return { oneStepDiff, nextDiff, loss: tail.loss, tensorsLeft: (await tensors()) - before };
}
