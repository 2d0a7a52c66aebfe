/**
 * The local-steps lab's report (`npm run lab -- --local-steps`, lab/local-steps-rows.ts):
 * the composition of time to 97 % from the windows (seconds a turn on the emulated network)
 * and the accuracy runs (turns to 97 % in-process), the two targets, where every-step sync
 * is still the better choice, the non-IID comparison, and bench/lab-local-steps.md. Pure:
 * rows in, figures and text out.
 */
import type { StartConfig, StepTimingReport } from '../shared/protocol';
import { LOCAL_STEPS_TARGET_IDS, type CheckpointPoint, type LabReport, type Reached, type Target } from './report-types';
import type { DeviceProfile } from './cpu-caps';
import type { CpuSample } from './cpu-monitor';
import type { ModelValidation } from './validate-models';
import { classesOf, type AccuracyData, type AccuracyResult } from './local-steps-protocol';

export type LocalStepsNetwork = 'school-uplink' | 'wifi';

export const SPEEDUP_GOAL_SCHOOL = 3;
export const SPEEDUP_GOAL_WIFI = 1.5;
/** The best local-steps run's final accuracy may be at most this many points below every step's. */
export const FINAL_ACCURACY_POINTS = 1;
export const [TARGET_SCHOOL, TARGET_WIFI] = LOCAL_STEPS_TARGET_IDS;
/** The class sizes the school-uplink target reads. */
export const SCHOOL_NS = [4, 8];

/** One timed window: a run of one way of summing, after its warm-up, over a few turns. */
export interface LocalStepsWindow {
  network: LocalStepsNetwork;
  n: number;
  device: DeviceProfile;
  /** 'every-step' or 'H<localSteps>'. */
  variant: string;
  config: Partial<StartConfig>;
  /** The wire the run took (fp16 for local steps, fp32 every step, by default). */
  wire: string;
  fromStep: number;
  toStep: number;
  fromRound: number;
  toRound: number;
  /** Each turn of the window on the server's clock (the chief's report intervals), and its steps. */
  intervalsMs: number[];
  stepsPerTurn: number[];
  /** Their median. */
  turnMs: number;
  /** From the harness's Start to the report that opened the window (the start-up and the warm-up's turns); null when unknown. */
  startupMs: number | null;
  algorithm: string;
  reason: string;
  /** The chief's split, averaged over the turns its reports showed (a round's compute summed over its local steps). */
  timingMean: StepTimingReport | null;
  /** Measured: bytes each device's interface sent over the window. */
  wireBytesByDevice: number[];
  /** Their mean per device and turn, and the class's total per example trained. */
  wireBytesPerTurn: number;
  wireBytesPerExample: number;
  /** The product's own figures (GET /api/rooms/:room bytesSentPerRound and bytesSentPerExample), medians over the window's turns. */
  reportedBytesPerTurn: number | null;
  reportedBytesPerExample: number | null;
  globalBatch: number;
  cpu: CpuSample;
  /** CPU seconds the idle-priority accuracy runs took meanwhile, and the machine's busy share without them. */
  poolCpuSeconds: number;
  machineBusyWithout: number;
  /** No member lost, the machine (without the accuracy runs) not saturated. */
  counts: boolean;
  lost: string | null;
}

/** The direct run: a local-steps class on the lab until a checkpoint scores the threshold. */
export interface DirectRun {
  network: LocalStepsNetwork;
  n: number;
  device: DeviceProfile;
  variant: string;
  wire: string;
  budgetMs: number;
  points: CheckpointPoint[];
  reached: Reached | null;
  stoppedBy: 'threshold' | 'budget' | 'lost-member' | 'run-ended';
  runMs: number;
  rounds: number;
  /** The chief's reports, ms after Start. */
  history: Array<{ at: number; step: number }>;
  cpu: CpuSample;
  lost: string | null;
  counts: boolean;
}

export interface LocalStepsReport {
  generatedAt: string;
  machine: { cores: number; kernel: string; node: string };
  netem: boolean;
  cfsPeriodUs: number;
  minutes: number;
  threshold: number;
  profiles: Record<LocalStepsNetwork, { model: string; params: unknown }>;
  plan: unknown;
  validations: Array<{ network: LocalStepsNetwork } & Pick<ModelValidation, 'name' | 'params' | 'measured' | 'expected' | 'ok' | 'delayMs'>>;
  classes: Array<{ network: LocalStepsNetwork; n: number; device: DeviceProfile; cores: number }>;
  windows: LocalStepsWindow[];
  accuracy: AccuracyResult[];
  direct: DirectRun | null;
  targets: Target[];
  errors: Array<{ what: string; message: string }>;
  /** What the plan named and this run did not measure. */
  notRun: string[];
  /**
   * Accuracy runs made after the run with the same code and a later cap (lab/local-steps-accuracy.ts
   * runAccuracy), for settings that had not reached the threshold within the run's; the
   * report composes them with the run's windows beside the targets, never into them.
   */
  extension?: { note: string; runs: AccuracyResult[] };
}

/** The time model of one class size on one network: a turn of H steps takes H × localStepMs + allReduceMs. */
export interface TurnModel {
  /** ms per step of compute (and what else scales with the steps), and per turn of its all-reduce (and what else comes once a turn). */
  localStepMs: number;
  allReduceMs: number;
  /** Beyond those, from Start to the window (the first turn's start-up, the links' probes). */
  startupExcessMs: number;
  /** 'measured': the variant's own window; 'fit': the line through the timed local-steps windows. */
  source: 'measured' | 'fit';
  /** The windows it comes from, and whether they all counted. */
  from: string[];
  counts: boolean;
}

/** Every-step's turn: its window's median turn, split by the chief's all-reduce. */
export function everyStepModel(w: LocalStepsWindow): TurnModel {
  const allReduce = w.timingMean ? Math.min(w.timingMean.commMs, w.turnMs) : 0;
  return { localStepMs: w.turnMs - allReduce, allReduceMs: allReduce, startupExcessMs: startupExcess(w, w.turnMs - allReduce, allReduce), source: 'measured', from: [w.variant], counts: w.counts };
}

const hOf = (variant: string): number | null => (variant.startsWith('H') ? Number(variant.slice(1)) : null);

/**
 * The local-steps line: a round of H steps takes H·c + a. Through two timed windows of
 * different H, exactly; with one (or a line that comes out negative, from noise), each
 * window's own split: c = (turn − the chief's all-reduce) / H, a = the all-reduce.
 */
export function localStepsModel(windows: LocalStepsWindow[]): Omit<TurnModel, 'startupExcessMs' | 'source'> | null {
  const timed = windows.filter((w) => hOf(w.variant) !== null && w.intervalsMs.length > 0).sort((a, b) => hOf(a.variant)! - hOf(b.variant)!);
  if (timed.length === 0) return null;
  const counts = timed.every((w) => w.counts);
  const from = timed.map((w) => w.variant);
  if (timed.length >= 2) {
    const lo = timed[0]!;
    const hi = timed.at(-1)!;
    const c = (hi.turnMs - lo.turnMs) / (hOf(hi.variant)! - hOf(lo.variant)!);
    const a = lo.turnMs - hOf(lo.variant)! * c;
    if (c > 0 && a >= 0) return { localStepMs: c, allReduceMs: a, from, counts };
  }
  const splits = timed.map((w) => {
    const h = hOf(w.variant)!;
    const a = w.timingMean ? Math.min(w.timingMean.commMs, w.turnMs) : 0;
    return { c: (w.turnMs - a) / h, a };
  });
  return { localStepMs: splits.reduce((s, x) => s + x.c, 0) / splits.length, allReduceMs: splits.reduce((s, x) => s + x.a, 0) / splits.length, from, counts };
}

/** What the warm-up took beyond the steady turns it covered: the start-up's own cost. */
function startupExcess(w: LocalStepsWindow, localStepMs: number, allReduceMs: number): number {
  if (w.startupMs === null) return 0;
  return Math.max(0, w.startupMs - (w.fromStep * localStepMs + w.fromRound * allReduceMs));
}

/** Composed time of a run that stands at `steps` and `rounds`. */
export const composeMs = (m: TurnModel, steps: number, rounds: number): number => m.startupExcessMs + steps * m.localStepMs + rounds * m.allReduceMs;

/** One line of the table: a way of summing at a class size on a network, composed. */
export interface ComposedRow {
  network: LocalStepsNetwork;
  n: number;
  device: DeviceProfile | null;
  variant: string;
  wire: string | null;
  model: TurnModel | null;
  /** The accuracy run of this class size and way of summing. */
  accuracy: AccuracyResult | null;
  /** Composed: time to the first point at the threshold, and to the point scored before it. */
  timeMs: number | null;
  timeBeforeMs: number | null;
  /** Where a run that never crossed stopped: time to its end (a lower bound on its time to the threshold). */
  timeAtEndMs: number | null;
  /** Measured in the window (or, for a fitted round, the timed local window's bytes a turn over this round's examples): the class's bytes per example. */
  bytesPerExample: number | null;
  reportedBytesPerExample: number | null;
  /** The class's bytes up to the threshold: bytes per example × examples. */
  bytesToThreshold: number | null;
  /** The default run's final accuracy on all 10,000 test digits. */
  finalAccuracy: number | null;
  /** Composed time to lower accuracies (the first point at each, the screen or all 10,000), for runs that never reach the threshold. */
  timeTo: Array<{ threshold: number; examples: number | null; ms: number | null }>;
  counts: boolean;
}

/** The lower accuracies every run is timed to beside the threshold. */
export const LOWER_THRESHOLDS = [0.95, 0.96];

/** The first scored point at `threshold` (all 10,000 digits where scored, else the screen). */
export function firstAt(a: AccuracyResult, threshold: number): AccuracyResult['points'][number] | null {
  return a.points.find((p) => (p.full ?? p.screen) >= threshold) ?? null;
}

export interface LocalStepsSummary {
  rows: ComposedRow[];
  threshold: number;
  largestWifi: number | null;
}

/** Every (network, N, way of summing) the report has a window or an accuracy run for, composed. */
export function summarize(r: Pick<LocalStepsReport, 'windows' | 'accuracy' | 'classes' | 'threshold'>): LocalStepsSummary {
  const rows: ComposedRow[] = [];
  const variants = ['every-step', ...[...new Set([...r.windows.map((w) => w.variant), ...r.accuracy.filter((a) => a.plan.data === 'mnist').map((a) => a.plan.variant.id)].filter((v) => v !== 'every-step'))].sort((a, b) => hOf(a)! - hOf(b)!)];
  for (const cls of r.classes) {
    const windows = r.windows.filter((w) => w.network === cls.network && w.n === cls.n);
    const es = windows.find((w) => w.variant === 'every-step');
    const line = localStepsModel(windows);
    const anchor = windows.filter((w) => hOf(w.variant) !== null).sort((a, b) => hOf(b.variant)! - hOf(a.variant)!)[0];
    for (const variant of variants) {
      const accuracy = r.accuracy.find((a) => a.plan.data === 'mnist' && a.plan.n === cls.n && a.plan.variant.id === variant) ?? null;
      const own = windows.find((w) => w.variant === variant);
      let model: TurnModel | null = null;
      let bytesPerExample: number | null = null;
      let reportedBytesPerExample: number | null = null;
      if (variant === 'every-step') {
        if (es) {
          model = everyStepModel(es);
          bytesPerExample = es.wireBytesPerExample;
          reportedBytesPerExample = es.reportedBytesPerExample;
        }
      } else if (line) {
        const h = hOf(variant)!;
        const startupFrom = own ?? anchor;
        model = { ...line, startupExcessMs: startupFrom ? startupExcess(startupFrom, line.localStepMs, line.allReduceMs) : 0, source: own ? 'measured' : 'fit' };
        if (own) {
          bytesPerExample = own.wireBytesPerExample;
          reportedBytesPerExample = own.reportedBytesPerExample;
        } else if (anchor) {
          // A round's all-reduce moves the same bytes whatever H: spread over this round's examples.
          bytesPerExample = (anchor.wireBytesPerTurn * cls.n) / (h * anchor.globalBatch);
          reportedBytesPerExample = anchor.reportedBytesPerTurn === null ? null : anchor.reportedBytesPerTurn / (h * anchor.globalBatch);
        }
      }
      const crossed = accuracy?.crossed ?? null;
      const timeMs = model && crossed ? composeMs(model, crossed.steps, crossed.rounds) : null;
      const timeBeforeMs = model && crossed ? (crossed.before ? composeMs(model, crossed.before.steps, crossed.before.rounds) : 0) : null;
      const timeAtEndMs = model && accuracy && !crossed && accuracy.end.steps > 0 ? composeMs(model, accuracy.end.steps, accuracy.end.rounds) : null;
      rows.push({
        network: cls.network,
        n: cls.n,
        device: cls.device,
        variant,
        wire: own?.wire ?? (variant === 'every-step' ? es?.wire ?? null : anchor?.wire ?? null),
        model,
        accuracy,
        timeMs,
        timeBeforeMs,
        timeAtEndMs,
        bytesPerExample,
        reportedBytesPerExample,
        bytesToThreshold: bytesPerExample !== null && crossed ? bytesPerExample * crossed.examples : null,
        finalAccuracy: accuracy?.defaultRun?.accuracy ?? null,
        timeTo: LOWER_THRESHOLDS.map((t) => {
          const p = accuracy ? firstAt(accuracy, t) : null;
          return { threshold: t, examples: p?.examples ?? null, ms: p && model ? composeMs(model, p.steps, p.rounds) : null };
        }),
        counts: !!model?.counts && !!accuracy && accuracy.stoppedBy !== 'error' && accuracy.stoppedBy !== 'diverged',
      });
    }
  }
  const wifi = r.classes.filter((c) => c.network === 'wifi').map((c) => c.n);
  return { rows, threshold: r.threshold, largestWifi: wifi.length > 0 ? Math.max(...wifi) : null };
}

/** Every step against the fastest local-steps setting at one class size: the ratio of composed times, and whether it is a bound. */
export interface Comparison {
  network: LocalStepsNetwork;
  n: number;
  everyStep: ComposedRow | null;
  best: ComposedRow | null;
  /** Every local-steps row of the class, crossed or not. */
  local: ComposedRow[];
  /** Every step's time over the best local setting's; a lower bound when every step never crossed (its time at its end stands in). */
  ratio: number | null;
  lowerBound: boolean;
  /** The best local setting's final accuracy minus every step's, in points. */
  finalDiffPoints: number | null;
  counts: boolean;
}

export function compare(s: LocalStepsSummary, network: LocalStepsNetwork, n: number): Comparison {
  const rows = s.rows.filter((r) => r.network === network && r.n === n);
  const everyStep = rows.find((r) => r.variant === 'every-step') ?? null;
  const local = rows.filter((r) => r.variant !== 'every-step' && r.timeMs !== null).sort((a, b) => a.timeMs! - b.timeMs!);
  const best = local[0] ?? null;
  const esTime = everyStep?.timeMs ?? everyStep?.timeAtEndMs ?? null;
  const ratio = best && esTime !== null ? esTime / best.timeMs! : null;
  const finalDiffPoints = best?.finalAccuracy != null && everyStep?.finalAccuracy != null ? (best.finalAccuracy - everyStep.finalAccuracy) * 100 : null;
  return { network, n, everyStep, best, local: rows.filter((r) => r.variant !== 'every-step'), ratio, lowerBound: everyStep !== null && everyStep.timeMs === null, finalDiffPoints, counts: !!everyStep?.counts && !!best?.counts };
}

const pct = (x: number | null | undefined): string => (x == null ? '–' : `${(x * 100).toFixed(2)} %`);
const minutes = (ms: number | null | undefined): string => (ms == null ? '–' : ms >= 3_600_000 ? `${(ms / 3_600_000).toFixed(2)} h` : `${(ms / 60_000).toFixed(1)} min`);

function comparisonText(c: Comparison): string {
  if (c.everyStep && !c.best) {
    const locals = c.local.map((r) => `${r.variant} ${pct(r.accuracy?.end.accuracy ?? null)} after ${r.accuracy?.end.examples.toLocaleString('en-US') ?? '–'} examples`).join(', ');
    return `${c.network} N = ${c.n}: no local-steps setting reached the threshold within its runs (${locals || 'none run'}); every step ${c.everyStep.timeMs !== null ? `did in ${minutes(c.everyStep.timeMs)}` : 'did not either'}`;
  }
  if (!c.everyStep || !c.best) return `${c.network} N = ${c.n}: ${!c.everyStep ? 'every step' : 'no local-steps setting'} not composed`;
  const es = c.lowerBound ? `every step not at the threshold after ${minutes(c.everyStep.timeAtEndMs)} (its run's end)` : `every step ${minutes(c.everyStep.timeMs)}`;
  return `${c.network} N = ${c.n}: ${c.best.variant} ${minutes(c.best.timeMs)} against ${es} = ${c.lowerBound ? '≥ ' : ''}${c.ratio?.toFixed(2) ?? '–'}×; final accuracy ${pct(c.best.finalAccuracy)} against ${pct(c.everyStep.finalAccuracy)}${c.counts ? '' : ' (a part did not count)'}`;
}

/** The two targets, in the shape of the lab's others ({id, goal, value, met, detail}). */
export function localStepsTargets(s: LocalStepsSummary): Target[] {
  const school = SCHOOL_NS.map((n) => compare(s, 'school-uplink', n));
  const schoolValues = school.map((c) => c.ratio);
  const schoolValue = schoolValues.every((v) => v !== null) ? Math.min(...(schoolValues as number[])) : null;
  const schoolMet = school.every((c) => c.ratio !== null && c.ratio >= SPEEDUP_GOAL_SCHOOL && c.counts && c.finalDiffPoints !== null && c.finalDiffPoints >= -FINAL_ACCURACY_POINTS);
  const wifi = s.largestWifi === null ? null : compare(s, 'wifi', s.largestWifi);
  const targets: Target[] = [
    {
      id: TARGET_SCHOOL,
      goal: `school-uplink, N = ${SCHOOL_NS.join(' and ')}: local steps (the best of H) reach ${(s.threshold * 100).toFixed(0)} % test accuracy ≥ ${SPEEDUP_GOAL_SCHOOL}× sooner than every step, and its final accuracy is no more than ${FINAL_ACCURACY_POINTS} point below (value: the smaller speed-up; composed from measured parts)`,
      value: schoolValue,
      met: schoolMet,
      detail: school.map(comparisonText).join('; '),
    },
    {
      id: TARGET_WIFI,
      goal: `wifi at the largest class the lab holds: local steps (the best of H) reach ${(s.threshold * 100).toFixed(0)} % ≥ ${SPEEDUP_GOAL_WIFI}× sooner than every step (composed from measured parts)`,
      value: wifi?.ratio ?? null,
      met: !!wifi && wifi.ratio !== null && wifi.ratio >= SPEEDUP_GOAL_WIFI && wifi.counts,
      detail: wifi ? comparisonText(wifi) : 'no wifi class measured',
    },
  ];
  return targets;
}

/** The lab's report's targets with the local-steps ones replaced by `fresh` (the others kept in their order). */
export function mergeTargets(existing: Target[], fresh: Target[]): Target[] {
  const ids = new Set<string>(LOCAL_STEPS_TARGET_IDS);
  return [...existing.filter((t) => !ids.has(t.id)), ...fresh];
}

// ---------------------------------------------------------------------------
// Where every step is still the better choice

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
 * The MLP's step splits of the class's scaling rows in a lab report (N > 1: wired-lab and
 * wifi, measured with the hub beside the server, fp32), and the wired-lab row on real
 * wired ports (100 Mbit/s and 1 Gbit/s, the lab's being `wiredPortMbit`), modelled.
 */
export function scalingSplits(report: LabReport | null, wiredPortMbit: number | null): StepSplit[] {
  const cls = report?.class;
  if (!cls?.scaling) return [];
  const measured: StepSplit[] = cls.scaling.splits
    .filter((x) => x.net === 'mlp' && x.n > 1 && x.split)
    .map((x) => {
      const row = cls.scaling!.rows.find((r) => r.model === x.model && r.net === 'mlp' && r.n === x.n);
      const rates = x.model === 'wired-lab' && wiredPortMbit !== null ? `${wiredPortMbit} Mbit/s ports` : x.model === 'wifi' ? '100 Mbit/s of air' : "the lab's rates";
      return {
        what: `${x.model}, N = ${x.n} laptops`,
        source: `bench/lab.json's class scaling (${cls.generatedAt.slice(0, 10)}; ${rates}, the hub beside the server, ${row?.algorithm ?? '?'}, fp32)`,
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
  const mine = accuracy.filter((a) => a.plan.data === 'mnist' && a.plan.n === n);
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
  const sizes = [...new Set(accuracy.filter((a) => a.plan.data === 'mnist').map((a) => a.plan.n))];
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

// ---------------------------------------------------------------------------
// Non-IID

export const NON_IID_THRESHOLDS = [0.9, 0.95, 0.97];

/** The first point at `threshold`: on all 10,000 digits at the run's threshold, on the screen below it. */
export function examplesTo(a: AccuracyResult, threshold: number): number | null {
  if (threshold >= a.plan.threshold) return a.crossed && a.crossed.accuracy >= threshold ? a.crossed.examples : null;
  return a.points.find((p) => (p.full ?? p.screen) >= threshold)?.examples ?? null;
}

export interface NonIidLine {
  data: AccuracyData;
  variant: string;
  n: number;
  secure: boolean;
  wire: string;
  examplesTo: Array<{ threshold: number; examples: number | null }>;
  finalAccuracy: number | null;
  epochExamples: number;
  /** Examples the run trained in all. */
  examplesRun: number;
}

/** The own-data runs, and beside them the server's digits at the same class size and ways of summing (the lab's other runs). */
export function nonIid(accuracy: AccuracyResult[]): NonIidLine[] {
  const own = accuracy.filter((a) => a.plan.data !== 'mnist');
  const references = accuracy.filter((a) => a.plan.data === 'mnist' && own.some((o) => o.plan.n === a.plan.n && o.plan.variant.id === a.plan.variant.id));
  return [...own, ...references]
    .map((a) => ({
      data: a.plan.data,
      variant: a.plan.variant.id,
      n: a.plan.n,
      secure: a.config.secureAggregation,
      wire: a.config.wire,
      examplesTo: NON_IID_THRESHOLDS.map((t) => ({ threshold: t, examples: examplesTo(a, t) })),
      finalAccuracy: a.defaultRun?.accuracy ?? a.end.accuracy,
      epochExamples: a.epochExamples,
      examplesRun: a.end.examples,
    }));
}

/** What the literature predicts, in its own terms (the report sets the measured figures beside it). */
export const NON_IID_LITERATURE = [
  'McMahan et al. 2017 (FedAvg; MNIST 2NN, the target 97 %, 100 clients, the "pathological" split of two digit classes per client): FedAvg still needs far fewer rounds than FedSGD (every step) on non-IID data, but its lead shrinks from one to two orders of magnitude (IID) to a few times (non-IID), because FedAvg needs several times more rounds on the non-IID split than on the IID one while FedSGD needs only a little more (Table 2).',
  'Zhao et al. 2018 ("Federated Learning with Non-IID Data"): FedAvg\'s accuracy falls with how skewed each client\'s classes are, by up to 55 % (keyword spotting) with one class per client, MNIST the least affected of their datasets; the loss follows the weight divergence, which grows with the earth mover\'s distance between a client\'s class distribution and the population\'s, and with more local steps between averages.',
];

// ---------------------------------------------------------------------------
// The markdown

const s2 = (ms: number | null | undefined): string => (ms == null ? '–' : (ms / 1000).toFixed(2));
const kb = (b: number | null | undefined): string => (b == null ? '–' : (b / 1e3).toFixed(1));
const mb = (b: number | null | undefined): string => (b == null ? '–' : (b / 1e6).toFixed(0));

export interface MarkdownExtras {
  /** Step splits from elsewhere (bench/lab.json's class scaling rows) for the crossover. */
  otherSplits: StepSplit[];
}

export function localStepsMarkdown(r: LocalStepsReport, extras: MarkdownExtras = { otherSplits: [] }): string {
  const s = summarize(r);
  const lines: string[] = [];
  const th = `${(r.threshold * 100).toFixed(0)} %`;
  lines.push(
    '# Local steps against every-step sync in the lab',
    '',
    `Measured ${r.generatedAt} by \`npm run lab -- --local-steps${(r.plan as { name?: string }).name === 'quick' ? ' --quick' : ''}\` in ${r.minutes.toFixed(1)} minutes, on one ${r.machine.cores}-core machine (kernel ${r.machine.kernel}, Node ${r.machine.node}, CFS period ${r.cfsPeriodUs / 1000} ms, netem ${r.netem ? 'present: school-uplink adds its 20 ms each way' : 'absent: rates only, no added delay, so school-uplink has no 20 ms of delay'}). The MLP on the product's defaults (Adam 0.003 after a 50-step warm-up, 32 examples a worker, balanced shares, \`allreduce: 'auto'\`, the server without a hub; local steps: Nesterov at 0.7 with momentum 0.9, rounds in fp16), only \`sync\` and \`localSteps\` changed.`,
    '',
    '**How the times are made.** Time to ' + th + ' is **composed from measured parts**, not one stopwatch:',
    '',
    '- *seconds a turn* (a step, or a round of H local steps) are measured on the emulated network: N capped Node workers in their own namespaces, the real server, each way of summing timed after its warm-up (past step 8 and its links measured) over a few turns on the server\'s clock. H = 100\'s round (a minute or more of local steps) is not timed: it is the line through the H = 5 and H = 20 rounds (H × local step + one all-reduce), marked *fit*;',
    '- *turns to ' + th + '* are measured in-process with the same Trainer over the in-memory ring (lab/local-steps-accuracy.ts), on the official 60,000 training digits, scored on the official 10,000 test digits as it goes (a 2,000-digit screen, all 10,000 within half a point of the threshold). Every step runs as one Trainer on the global batch (test/unit/equivalence.test.ts proves it equal to N ring workers); local steps run N replicas. Accuracy per example does not depend on the network;',
    '- time = the warm-up\'s excess over steady turns (measured) + steps × the local step + rounds × the round\'s all-reduce. The end-of-epoch evaluation a real run makes is not in it.',
    '',
    `Each run trains at least the default run (${(r.plan as { accuracy?: { defaultEpochs?: number } }).accuracy?.defaultEpochs ?? 2} epochs, whose end gives the final accuracy) and on to its first crossing of ${th}, at most ${(r.plan as { accuracy?: { maxEpochs?: number } }).accuracy?.maxEpochs ?? '?'} epochs.`,
    '',
    '| target | goal | value | met |',
    '|---|---|---|---|',
    ...r.targets.map((t) => `| ${t.id} | ${t.goal} | ${t.value === null ? '–' : t.value.toFixed(2)} | ${t.met ? 'yes' : 'no'} |`),
    '',
    ...r.targets.map((t) => `- \`${t.id}\`: ${t.detail}`),
    '',
    '## Time to ' + th + ', bytes, final accuracy',
    '',
    `Turn: measured (or fit); local step and all-reduce: the model the time is composed with. Examples, steps and rounds to ${th}: in-process, the first scored point at ${th} on all 10,000 digits (the one before it brackets the crossing). Time to ${LOWER_THRESHOLDS.map((t) => `${(t * 100).toFixed(0)} %`).join(' and ')}: composed the same way to the first point at it (on the 2,000-digit screen below ${(LOWER_THRESHOLDS.at(-1)! * 100 + 0.5).toFixed(1)} %, so a few tenths of a point either way), for the runs that never reach ${th}. Bytes per example: measured, everything the class's interfaces sent in the window over the examples trained (framing, acknowledgements and signaling included); the product's own figure (bytesSentPerExample, the all-reduce's payload) beside it. Final accuracy: the default run's end, all 10,000 digits.`,
    '',
    `| network | N | sync | wire | turn (s) | local step / all-reduce (s) | examples to ${th} | steps / rounds | time to ${th} (composed) | ${LOWER_THRESHOLDS.map((t) => `time to ${(t * 100).toFixed(0)} %`).join(' | ')} | bytes per example, measured (product's) | MB sent to ${th} | final accuracy | counts |`,
    `|---|---|---|---|---|---|---|---|---|${LOWER_THRESHOLDS.map(() => '---|').join('')}---|---|---|---|`,
  );
  for (const row of s.rows) {
    const m = row.model;
    const a = row.accuracy;
    const c = a?.crossed ?? null;
    const turn = m ? `${s2(row.variant === 'every-step' ? m.localStepMs + m.allReduceMs : (hOf(row.variant)! * m.localStepMs + m.allReduceMs))}${m.source === 'fit' ? ' (fit)' : ''}` : '–';
    const time = row.timeMs !== null ? `${minutes(row.timeMs)} (${minutes(row.timeBeforeMs)}–)` : row.timeAtEndMs !== null ? `not reached: below ${th} after ${minutes(row.timeAtEndMs)} (${a!.end.examples} examples)` : '–';
    lines.push(
      `| ${row.network} | ${row.n} | ${row.variant} | ${row.wire ?? '–'} | ${turn} | ${m ? `${s2(m.localStepMs)} / ${s2(m.allReduceMs)}` : '–'} | ${c ? c.examples.toLocaleString('en-US') : a ? `– (${a.stoppedBy})` : 'not run'} | ${c ? `${c.steps} / ${c.rounds}` : '–'} | ${time} | ${row.timeTo.map((x) => (x.ms === null ? (a ? 'not reached' : '–') : minutes(x.ms))).join(' | ')} | ${row.bytesPerExample === null ? '–' : row.bytesPerExample.toFixed(0)} (${row.reportedBytesPerExample === null ? '–' : row.reportedBytesPerExample.toFixed(0)}) | ${mb(row.bytesToThreshold)} | ${pct(row.finalAccuracy)} | ${row.counts ? 'yes' : 'no'} |`,
    );
  }
  if (r.direct) {
    const d = r.direct;
    const row = s.rows.find((x) => x.network === d.network && x.n === d.n && x.variant === d.variant);
    const m = row?.model ?? null;
    lines.push('', '## The composition checked: one class run directly to ' + th, '');
    lines.push(
      `${d.network}, N = ${d.n} ${d.device}s, ${d.variant} (${d.wire}): trained on the lab from Start until a checkpoint (the product's default schedule: every 50 steps and each epoch's end) scored ${th} on all 10,000 test digits (the lab's scorer, lab/checkpoint-eval.ts), within ${minutes(d.budgetMs)}. ${d.reached ? `**${th} at ${minutes(d.reached.ms)}** (the checkpoint at step ${d.reached.step}, ${pct(d.reached.accuracy)}; the one before at ${minutes(d.reached.previousMs)}).` : `Not ${th} within the budget (stopped by ${d.stoppedBy} after ${minutes(d.runMs)}).`}`,
      '',
      'Each checkpoint against the composition: its capture time against the composed time of its step (the same time model as above), and its accuracy against the in-process run\'s at the nearest scored point at or before the same examples.',
      '',
      '| step | captured (s) | composed (s) | captured / composed | screen (every 10th test digit) | all 10,000 | in-process at that point |',
      '|---|---|---|---|---|---|---|',
    );
    const acc = row?.accuracy ?? null;
    for (const p of d.points) {
      const rounds = roundsAt(d.history, p.step);
      const composed = m && rounds !== null ? composeMs(m, p.step, rounds) : null;
      const examples = p.step * (row?.accuracy ? row.accuracy.config.batchSizePerWorker * d.n : 32 * d.n);
      const inproc = acc ? [...acc.points].reverse().find((x) => x.examples <= examples) ?? null : null;
      lines.push(`| ${p.step} | ${(p.ms / 1000).toFixed(0)} | ${composed === null ? '–' : (composed / 1000).toFixed(0)} | ${composed ? (p.ms / composed).toFixed(2) : '–'} | ${pct(p.screen)} | ${pct(p.accuracy)} | ${inproc ? `${pct(inproc.full ?? inproc.screen)} at ${inproc.examples} examples` : '–'} |`);
    }
    if (row?.timeMs != null && d.reached) lines.push('', `Composed time to ${th} for this configuration: ${minutes(row.timeMs)} (${minutes(row.timeBeforeMs)}–); measured directly: ${minutes(d.reached.ms)} (${minutes(d.reached.previousMs)}–). The direct run reads checkpoints every 50 steps, the in-process run every ${(r.plan as { accuracy?: { scoreEveryExamples?: number } }).accuracy?.scoreEveryExamples ?? '?'} examples.`);
  }
  if (r.extension && r.extension.runs.length > 0) {
    const ext = r.extension;
    const swapped = summarize({ ...r, accuracy: r.accuracy.map((a) => ext.runs.find((e) => e.plan.id === a.plan.id) ?? a) });
    lines.push('', `## Beyond the run's cap: ${ext.note}`, '', `Composed with this run's windows, as above; the targets above are the run's own and do not use these.`, '', `| network | N | sync | examples to ${th} | steps / rounds | time to ${th} (composed) | every step's | every step ÷ this | stopped by | max epochs |`, '|---|---|---|---|---|---|---|---|---|---|');
    for (const e of ext.runs) {
      for (const row of swapped.rows.filter((x) => x.n === e.plan.n && x.variant === e.plan.variant.id)) {
        const es = swapped.rows.find((x) => x.network === row.network && x.n === row.n && x.variant === 'every-step');
        const c = e.crossed;
        const esMs = es?.timeMs ?? null;
        lines.push(`| ${row.network} | ${row.n} | ${row.variant} | ${c ? c.examples.toLocaleString('en-US') : `not reached (${e.end.examples.toLocaleString('en-US')}: ${pct(e.end.accuracy)})`} | ${c ? `${c.steps} / ${c.rounds}` : '–'} | ${row.timeMs !== null ? `${minutes(row.timeMs)} (${minutes(row.timeBeforeMs)}–)` : '–'} | ${esMs === null ? (es?.timeAtEndMs != null ? `not reached in ${minutes(es.timeAtEndMs)}` : '–') : minutes(esMs)} | ${row.timeMs !== null && esMs !== null ? `${(esMs / row.timeMs).toFixed(2)}×` : row.timeMs !== null && es?.timeAtEndMs != null ? `≥ ${(es.timeAtEndMs / row.timeMs).toFixed(2)}×` : '–'} | ${e.stoppedBy} | ${e.plan.maxEpochs} |`);
      }
    }
  }
  // Crossover
  const qs = measuredQ(s);
  const q = qs.length > 0 ? qs.reduce((x, y) => x + y.q, 0) / qs.length : 0.5;
  const ks = measuredKappa(s);
  const kappa = ks.length > 0 ? ks.reduce((x, y) => x + y.kappa, 0) / ks.length : 1;
  const splits: StepSplit[] = [
    ...s.rows.filter((x) => x.variant === 'every-step' && x.model).map((x) => ({ what: `${x.network}, N = ${x.n} ${x.device}s`, source: 'measured here (every-step window)', n: x.n, computeMs: x.model!.localStepMs, allReduceMs: x.model!.allReduceMs })),
    ...extras.otherSplits,
  ];
  const cross = crossover(splits, r.accuracy, q, kappa);
  const rStar = (b: CrossoverLine['byH'][number]) => (b.breakEven === null ? '– (ρκ ≤ 1)' : b.breakEven === Number.POSITIVE_INFINITY ? '∞' : b.breakEven.toFixed(2));
  lines.push(
    '',
    '## Where every step is still the better choice',
    '',
    `A step costs c (compute and the optimizer) and a (the all-reduce); every step takes S_es·(c + a), local steps S_ls·(κc + q·a/H): q is a round's all-reduce over a step's (measured: ${qs.map((x) => `${x.network} N = ${x.n}: ${x.q.toFixed(2)}`).join(', ') || 'none'}; shared/training/sync-advice.ts assumes ½ for fp16 rounds against fp32 steps; their mean, ${q.toFixed(2)}, below), κ a local step's compute over an every-step step's (measured: ${ks.map((x) => `${x.network} N = ${x.n}: ${x.kappa.toFixed(2)}`).join(', ') || 'none'}; ${kappa.toFixed(2)} below: every step's split counts the wait for the slowest rank as all-reduce, a round's line spreads it over the local steps) and ρ = S_ls/S_es the steps local steps need for the same accuracy over every step's, in-process, at ${th} where both reach it and otherwise at the highest of ${LOWER_THRESHOLDS.map((t) => `${(t * 100).toFixed(0)} %`).join(', ')} they do (the column says which). With r = a/c, every step is the faster while r < r* = (ρκ − 1)/(1 − ρq/H). Whatever r, a setting that never reaches ${th} cannot beat every step to it.`,
    '',
    '| class | source | c (s) | a (s) | r = a/c | ρ at | ρ, r* and every step ÷ local steps, by H (ρ at the nearest class size the accuracy runs cover) | every step better? |',
    '|---|---|---|---|---|---|---|---|',
    ...cross.map((x) => `| ${x.split.what} | ${x.split.source} | ${s2(x.split.computeMs)} | ${s2(x.split.allReduceMs)} | ${x.r.toFixed(2)} | ${x.threshold === null ? '–' : `${(x.threshold * 100).toFixed(0)} %`} | ${x.byH.map((b) => `H${b.h}: ρ ${b.rho.toFixed(2)}, r* ${rStar(b)}, ${b.predictedRatio.toFixed(2)}×`).join('; ') || '–'} | ${x.byH.length === 0 ? '–' : x.everyStepBetter ? '**yes**' : 'no'} |`),
  );
  // Non-IID
  const ni = nonIid(r.accuracy);
  if (ni.length > 0) {
    lines.push(
      '',
      '## Non-IID: the class\'s own data, each device some classes only',
      '',
      `In-process, N = ${ni[0]!.n}, data 'own' on the product's defaults for it (secure aggregation on, so rounds travel fp32): the 60,000 training digits in the devices' own stores (a fifth of each kept out as the holdout, as on every device), by class (the devices hold the digits ${Array.from({ length: ni[0]!.n }, (_, i) => classesOf(i, ni[0]!.n).join('')).join(' / ')}; at N = 3 that is test/e2e/own-data-tabs.spec.ts's 0–3 / 4–6 / 7–9) or at random. Examples to 90 % and 95 % on the 2,000-digit screen, to ${th} on all 10,000; the final accuracy at the default run's end.`,
      '',
      '| data | sync | wire, secure | examples to 90 % | to 95 % | to ' + th + ' | final accuracy |',
      '|---|---|---|---|---|---|---|',
      ...ni.map((x) => `| ${x.data === 'mnist' ? "the server's digits (reference)" : x.data} | ${x.variant} | ${x.wire}, ${x.secure ? 'secure' : 'plain'} | ${x.examplesTo.map((e) => (e.examples === null ? 'not reached' : e.examples.toLocaleString('en-US'))).join(' | ')} | ${pct(x.finalAccuracy)} |`),
      '',
      ...nonIidSlowdowns(ni).map((t) => `- ${t}`),
      '',
      'What the literature predicts:',
      '',
      ...NON_IID_LITERATURE.map((t) => `- ${t}`),
    );
  }
  lines.push('', '## Every window', '', 'In run order. Turn: the median of the chief\'s report intervals; the chief\'s split is the mean over the window\'s turns (compute summed over a round\'s local steps).', '');
  lines.push('| network | N | sync | wire | steps | turns (s) | chief: compute / all-reduce / apply (s) | start-up to the window (s) | sent per device a turn (kB) | the product\'s bytesSentPerRound (kB) | machine busy without the accuracy runs | counts |', '|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const w of r.windows) {
    const t = w.timingMean;
    lines.push(`| ${w.network} | ${w.n} | ${w.variant} | ${w.wire} | ${w.fromStep}–${w.toStep} | ${w.intervalsMs.map((x) => (x / 1000).toFixed(2)).join(', ')} | ${t ? `${s2(t.computeMs + t.readbackMs + t.crossMs)} / ${s2(t.commMs)} / ${s2(t.applyMs)}` : '–'} | ${s2(w.startupMs)} | ${kb(w.wireBytesPerTurn)} | ${kb(w.reportedBytesPerTurn)} | ${(w.machineBusyWithout * 100).toFixed(0)} % | ${w.counts ? 'yes' : `no${w.lost ? `: ${w.lost.split(';')[0]}` : ''}`} |`);
  }
  lines.push('', '## Every accuracy run', '', 'In-process; CPU seconds are the run\'s own (at idle priority beside the windows, then on a free core).', '', '| run | wire | stopped by | crossed at (examples) | default run\'s end | last point | CPU s | shares |', '|---|---|---|---|---|---|---|---|');
  for (const a of r.accuracy) {
    lines.push(`| ${a.plan.id}${a.plan.everyStepAsOne && a.plan.variant.sync === 'every-step' && a.plan.data === 'mnist' ? ' (one Trainer on the global batch)' : ''} | ${a.config.wire}${a.config.secureAggregation ? ', secure' : ''} | ${a.stoppedBy}${a.error ? `: ${a.error}` : ''} | ${a.crossed ? `${a.crossed.examples} (${pct(a.crossed.accuracy)})` : '–'} | ${a.defaultRun ? `${pct(a.defaultRun.accuracy)} at ${a.defaultRun.examples}` : '–'} | ${a.end.examples}: ${pct(a.end.accuracy)} | ${a.cpuSeconds.toFixed(0)} | ${a.lastShares.join('/')} |`);
  }
  if (r.validations.length > 0) {
    lines.push('', '## The profiles, validated before use (TCP goodput, Mbit/s)', '', '| profile | model | check | measured | expected |', '|---|---|---|---|---|');
    for (const v of r.validations) for (const k of Object.keys(v.expected)) lines.push(`| ${v.network} | ${v.name} ${JSON.stringify(v.params)} | ${k} | ${v.measured[k]} | ${v.expected[k]} |`);
  }
  if (r.errors.length > 0 || r.notRun.length > 0) {
    lines.push('', '## Not measured', '', ...r.errors.map((e) => `- ${e.what}: ${e.message.split('\n')[0]}`), ...r.notRun.map((x) => `- not run: ${x}`));
  }
  lines.push('');
  return lines.join('\n');
}

/** The rounds the class had trained once it stood at `step`, from the chief's reports. */
export function roundsAt(history: Array<{ at: number; step: number }>, step: number): number | null {
  const points = history.filter((p) => p.step <= step);
  return points.length > 0 && points.at(-1)!.step === step ? points.length : null;
}

/** The measured slowdowns in words: by class over at random, per way of summing and threshold. */
export function nonIidSlowdowns(lines: NonIidLine[]): string[] {
  const out: string[] = [];
  for (const variant of [...new Set(lines.map((l) => l.variant))]) {
    const byClass = lines.find((l) => l.variant === variant && l.data === 'own-by-class');
    const iid = lines.find((l) => l.variant === variant && l.data === 'own-iid') ?? lines.find((l) => l.variant === variant && l.data === 'mnist');
    if (!byClass || !iid) continue;
    const parts = NON_IID_THRESHOLDS.map((t) => {
      const a = byClass.examplesTo.find((e) => e.threshold === t)?.examples ?? null;
      const b = iid.examplesTo.find((e) => e.threshold === t)?.examples ?? null;
      if (a === null && b === null) return `${(t * 100).toFixed(0)} %: neither`;
      if (a === null) {
        const bound = byClass.examplesRun / b!;
        return `${(t * 100).toFixed(0)} %: by class never within its ${byClass.examplesRun.toLocaleString('en-US')} examples (the other after ${b!.toLocaleString('en-US')}${bound > 1 ? `, so more than ${bound.toFixed(1)}× the examples` : ''})`;
      }
      if (b === null) return `${(t * 100).toFixed(0)} %: the other never within the run (by class after ${a.toLocaleString('en-US')})`;
      return `${(t * 100).toFixed(0)} %: ${(a / b).toFixed(2)}× the examples`;
    });
    const against = iid.data === 'own-iid' ? 'at random' : "the server's digits (no own-data run at random: another data path, all 60,000 digits an epoch)";
    out.push(`${variant}, by class against ${against}: ${parts.join('; ')}; final accuracy ${pct(byClass.finalAccuracy)} against ${pct(iid.finalAccuracy)}.`);
  }
  return out;
}
