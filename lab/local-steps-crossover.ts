/**
 * Where every step is still the better choice (`npm run lab -- --section local-steps`): the
 * break-even of a step's all-reduce against its compute, from the steps local steps need
 * for the same accuracy (the accuracy runs) and the step splits measured here or in another
 * lab report. Pure: figures in, lines out.
 */
import { SERVER_DATA, type AccuracyResult } from './local-steps-protocol';
import { LAB_WORKLOADS } from '../shared/tasks/lab-workloads';
import type { ClassReport } from './report-types';
import { firstAt, LOWER_THRESHOLDS, type LocalStepsNetwork, type LocalStepsSummary } from './local-steps-report';

/**
 * Local steps H beat every step when a step's all-reduce is large against its compute:
 * every step takes S_es·(c + a), local steps S_ls·(κc + q·a/H), with q a round's all-reduce
 * over a step's (½ when rounds travel fp16 and steps fp32: shared/training/sync-advice.ts)
 * and κ a local step's time over an every-step step's compute (both per step and update;
 * every step's split counts waiting for the slowest rank as all-reduce, a round's line does
 * not). With r = a/c and ρ = S_ls/S_es (the
 * steps local steps need for the same accuracy over every step's), every step is the
 * better choice while r < r* = (ρκ − 1)/(1 − ρq/H); when the denominator is not positive,
 * local steps never win. Null for ρκ ≤ 1 (local steps always win).
 */
export function breakEvenRatio(rho: number, q: number, h: number, kappa = 1): number | null {
  if (rho * kappa <= 1) return null;
  const denominator = 1 - (rho * q) / h;
  return denominator <= 0 ? Number.POSITIVE_INFINITY : (rho * kappa - 1) / denominator;
}

/** A class whose step the report can place against the break-even: measured here, or in another lab report. */
export interface StepSplit {
  what: string;
  /** 'measured here' or where the figures come from. */
  source: string;
  n: number;
  computeMs: number;
  allReduceMs: number;
}

/** A split with its all-reduce scaled by `factor` (a bandwidth-bound all-reduce on a link `1/factor` times as fast): modelled, not measured. */
export const scaledSplit = (split: StepSplit, factor: number, what: string): StepSplit => ({ ...split, what, source: `modelled: the all-reduce of “${split.what}” × ${factor} (${split.source})`, allReduceMs: split.allReduceMs * factor });

/**
 * The dense model's step splits of the class's scaling rows in a lab report (N > 1: wired-lab and
 * wifi, measured with the hub beside the server, fp32), and the wired-lab row on real
 * wired ports (100 Mbit/s and 1 Gbit/s, the lab's being `wiredPortMbit`), modelled.
 */
export function scalingSplits(cls: ClassReport | null, wiredPortMbit: number | null): StepSplit[] {
  if (!cls?.scaling) return [];
  const measured: StepSplit[] = cls.scaling.splits
    .filter((x) => x.net === LAB_WORKLOADS.dense.model && x.n > 1 && x.split)
    .map((x) => {
      const row = cls.scaling!.rows.find((r) => r.model === x.model && r.net === LAB_WORKLOADS.dense.model && r.n === x.n);
      const rates = x.model === 'wired-lab' && wiredPortMbit !== null ? `${wiredPortMbit} Mbit/s ports` : x.model === 'wifi' ? '100 Mbit/s of air' : "the lab's rates";
      return {
        what: `${x.model}, N = ${x.n} laptops`,
        source: `bench/lab-class.json's scaling (${cls.generatedAt.slice(0, 10)}; ${rates}, the hub beside the server, ${row?.algorithm ?? '?'}, fp32)`,
        n: x.n,
        computeMs: x.split!.stepMs - x.split!.allReduceMs,
        allReduceMs: x.split!.allReduceMs,
      };
    });
  const wired = measured.find((x) => x.what.startsWith('wired-lab'));
  const real = wired && wiredPortMbit !== null ? [100, 1000].filter((m) => m > wiredPortMbit).map((mbit) => scaledSplit(wired, wiredPortMbit / mbit, `wired-lab at ${mbit} Mbit/s ports, N = ${wired.n} laptops`)) : [];
  return [...measured, ...real];
}

export interface CrossoverLine {
  split: StepSplit;
  r: number;
  /** The accuracy ρ is read at: the threshold if every step and a local setting reach it, else the highest lower accuracy they both do. */
  threshold: number | null;
  /** Per H with a measured ρ at this class size: ρ, r* and the predicted time of every step over local steps'. */
  byH: Array<{ h: number; rho: number; breakEven: number | null; predictedRatio: number }>;
  everyStepBetter: boolean;
}

const stepsTo = (a: AccuracyResult, threshold: number): number | null => (threshold >= a.plan.threshold ? a.crossed?.steps ?? null : firstAt(a, threshold)?.steps ?? null);

/**
 * ρ (local steps' steps to an accuracy over every step's) at class size n, per H, from the
 * accuracy runs: at the threshold if every step and some local setting reached it, else at
 * the highest of LOWER_THRESHOLDS they did.
 */
export function stepRatios(accuracy: AccuracyResult[], n: number): { threshold: number | null; byH: Array<{ h: number; rho: number }> } {
  const mine = accuracy.filter((a) => a.plan.data === SERVER_DATA && a.plan.n === n);
  const es = mine.find((a) => a.plan.variant.sync === 'every-step');
  if (!es) return { threshold: null, byH: [] };
  for (const t of [es.plan.threshold, ...[...LOWER_THRESHOLDS].sort((a, b) => b - a)]) {
    const base = stepsTo(es, t);
    if (base === null) continue;
    const byH = mine
      .filter((a) => a.plan.variant.sync === 'local-steps' && stepsTo(a, t) !== null)
      .map((a) => ({ h: a.plan.variant.localSteps!, rho: stepsTo(a, t)! / base }))
      .sort((x, y) => x.h - y.h);
    if (byH.length > 0) return { threshold: t, byH };
  }
  return { threshold: null, byH: [] };
}

/** The class sizes the accuracy runs cover nearest to `n` (ρ is measured at a few sizes only). */
const nearestSize = (sizes: number[], n: number): number | null => (sizes.length === 0 ? null : sizes.reduce((a, b) => (Math.abs(b - n) < Math.abs(a - n) ? b : a)));

export function crossover(splits: StepSplit[], accuracy: AccuracyResult[], q: number, kappa = 1): CrossoverLine[] {
  const sizes = [...new Set(accuracy.filter((a) => a.plan.data === SERVER_DATA).map((a) => a.plan.n))];
  return splits.map((split) => {
    const r = split.allReduceMs / Math.max(1e-9, split.computeMs);
    const at = nearestSize(sizes, split.n);
    const ratios = at === null ? { threshold: null, byH: [] } : stepRatios(accuracy, at);
    const byH = ratios.byH.map(({ h, rho }) => ({ h, rho, breakEven: breakEvenRatio(rho, q, h, kappa), predictedRatio: (1 + r) / (rho * (kappa + (q * r) / h)) }));
    return { split, r, threshold: ratios.threshold, byH, everyStepBetter: byH.length > 0 && byH.every((x) => x.predictedRatio < 1) };
  });
}

/** κ measured: a local step's compute over an every-step step's (the models' per-step parts), per class. */
export function measuredKappa(s: LocalStepsSummary): Array<{ network: LocalStepsNetwork; n: number; kappa: number }> {
  const out: Array<{ network: LocalStepsNetwork; n: number; kappa: number }> = [];
  for (const es of s.rows.filter((r) => r.variant === 'every-step' && r.model && r.model.localStepMs > 0)) {
    const local = s.rows.find((r) => r.network === es.network && r.n === es.n && r.variant !== 'every-step' && r.model);
    if (local) out.push({ network: es.network, n: es.n, kappa: local.model!.localStepMs / es.model!.localStepMs });
  }
  return out;
}

/** q measured: a local-steps round's all-reduce over an every-step step's, per class (the fit's a over every step's split). */
export function measuredQ(s: LocalStepsSummary): Array<{ network: LocalStepsNetwork; n: number; q: number }> {
  const out: Array<{ network: LocalStepsNetwork; n: number; q: number }> = [];
  for (const es of s.rows.filter((r) => r.variant === 'every-step' && r.model && r.model.allReduceMs > 0)) {
    const local = s.rows.find((r) => r.network === es.network && r.n === es.n && r.variant !== 'every-step' && r.model);
    if (local) out.push({ network: es.network, n: es.n, q: local.model!.allReduceMs / es.model!.allReduceMs });
  }
  return out;
}
