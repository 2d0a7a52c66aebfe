/**
 * The local-steps lab's report (`npm run lab -- --section local-steps`, lab/local-steps-rows.ts):
 * the composition of time to 97 % from the windows (seconds a turn on the emulated network)
 * and the accuracy runs (turns to 97 % in-process), the two targets, where every-step sync
 * is still the better choice, the non-IID comparison, and bench/lab-local-steps.md. Pure:
 * rows in, figures and text out.
 */
import { RECIPE_DEFAULTS, type StartConfig, type StepTimingReport } from '../shared/protocol';
import { LOCAL_STEPS_TARGET_IDS, type CheckpointPoint, type Reached, type Target } from './report-types';
import type { DeviceProfile } from './cpu-caps';
import type { CpuSample } from './cpu-monitor';
import type { ModelValidation } from './validate-models';
import { SERVER_DATA, isCompressed, isEveryStep, type AccuracyData, type AccuracyResult } from './local-steps-protocol';
import { LAB_DATA_WORDS } from '../shared/tasks/lab-workloads';

export type LocalStepsNetwork = 'school-uplink' | 'wifi';

export const SPEEDUP_GOAL_SCHOOL = 3;
export const SPEEDUP_GOAL_WIFI = 1.5;
/** The best local-steps run's final accuracy may be at most this many points below every step's. */
export const FINAL_ACCURACY_POINTS = 0.3;
export const [TARGET_SCHOOL, TARGET_WIFI, TARGET_NON_IID] = LOCAL_STEPS_TARGET_IDS;
/** The class's own data split by class: the product's default local steps end the default run at least this accurate. */
export const NON_IID_GOAL = 0.94;
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

export const hOf = (variant: string): number | null => (variant.startsWith('H') ? Number.parseInt(variant.slice(1), 10) : null);
/** A variant of the product as it is ('H<n>'), not one kept for comparison ('H20-adam': the product before). */
export const isProductVariant = (variant: string): boolean => /^H\d+$/.test(variant);

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
  const order = (v: string): number => (v === 'every-step' ? -2 : isEveryStep(v) ? -1 : hOf(v)!);
  const variants = ['every-step', ...[...new Set([...r.windows.map((w) => w.variant), ...r.accuracy.filter((a) => a.plan.data === SERVER_DATA).map((a) => a.plan.variant.id)].filter((v) => v !== 'every-step'))].sort((a, b) => order(a) - order(b) || a.localeCompare(b))];
  for (const cls of r.classes) {
    const windows = r.windows.filter((w) => w.network === cls.network && w.n === cls.n);
    const es = windows.find((w) => w.variant === 'every-step');
    // The line runs through the whole sums' rounds: a compressed round's all-reduce is its own.
    const whole = windows.filter((w) => !isCompressed(w.variant));
    const line = localStepsModel(whole);
    const anchor = whole.filter((w) => hOf(w.variant) !== null).sort((a, b) => hOf(b.variant)! - hOf(a.variant)!)[0];
    for (const variant of variants) {
      const accuracy = r.accuracy.find((a) => a.plan.data === SERVER_DATA && a.plan.n === cls.n && a.plan.variant.id === variant) ?? null;
      const own = windows.find((w) => w.variant === variant);
      let model: TurnModel | null = null;
      let bytesPerExample: number | null = null;
      let reportedBytesPerExample: number | null = null;
      const ownSplit = isCompressed(variant) && own ? localStepsModel([own]) : null;
      if (isEveryStep(variant)) {
        const w = variant === 'every-step' ? es : own;
        if (w) {
          model = everyStepModel(w);
          bytesPerExample = w.wireBytesPerExample;
          reportedBytesPerExample = w.reportedBytesPerExample;
        }
      } else if (isCompressed(variant)) {
        if (own && ownSplit) {
          model = { ...ownSplit, startupExcessMs: startupExcess(own, ownSplit.localStepMs, ownSplit.allReduceMs), source: 'measured' };
          bytesPerExample = own.wireBytesPerExample;
          reportedBytesPerExample = own.reportedBytesPerExample;
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
  // The best of the product's own settings: a variant kept for comparison never counts for it.
  const local = rows.filter((r) => isProductVariant(r.variant) && r.timeMs !== null).sort((a, b) => a.timeMs! - b.timeMs!);
  const best = local[0] ?? null;
  const esTime = everyStep?.timeMs ?? everyStep?.timeAtEndMs ?? null;
  const ratio = best && esTime !== null ? esTime / best.timeMs! : null;
  const finalDiffPoints = best?.finalAccuracy != null && everyStep?.finalAccuracy != null ? (best.finalAccuracy - everyStep.finalAccuracy) * 100 : null;
  return { network, n, everyStep, best, local: rows.filter((r) => r.variant !== 'every-step'), ratio, lowerBound: everyStep !== null && everyStep.timeMs === null, finalDiffPoints, counts: !!everyStep?.counts && !!best?.counts };
}

export const pct = (x: number | null | undefined): string => (x == null ? '–' : `${(x * 100).toFixed(2)} %`);
export const minutes = (ms: number | null | undefined): string => (ms == null ? '–' : ms >= 3_600_000 ? `${(ms / 3_600_000).toFixed(2)} h` : `${(ms / 60_000).toFixed(1)} min`);

function comparisonText(c: Comparison): string {
  if (c.everyStep && !c.best) {
    const locals = c.local.map((r) => `${r.variant} ${pct(r.accuracy?.end.accuracy ?? null)} after ${r.accuracy?.end.examples.toLocaleString('en-US') ?? '–'} examples`).join(', ');
    return `${c.network} N = ${c.n}: no local-steps setting reached the threshold within its runs (${locals || 'none run'}); every step ${c.everyStep.timeMs !== null ? `did in ${minutes(c.everyStep.timeMs)}` : 'did not either'}`;
  }
  if (!c.everyStep || !c.best) return `${c.network} N = ${c.n}: ${!c.everyStep ? 'every step' : 'no local-steps setting'} not composed`;
  const es = c.lowerBound ? `every step not at the threshold after ${minutes(c.everyStep.timeAtEndMs)} (its run's end)` : `every step ${minutes(c.everyStep.timeMs)}`;
  return `${c.network} N = ${c.n}: ${c.best.variant} ${minutes(c.best.timeMs)} against ${es} = ${c.lowerBound ? '≥ ' : ''}${c.ratio?.toFixed(2) ?? '–'}×; final accuracy ${pct(c.best.finalAccuracy)} against ${pct(c.everyStep.finalAccuracy)}${c.counts ? '' : ' (a part did not count)'}`;
}

/** The time and by-class targets, in the shape of the lab's others ({id, goal, value, met, detail}); all four: local-steps-targets.ts. */
export function timeTargets(s: LocalStepsSummary, nonIidLines: NonIidLine[] = []): Target[] {
  const school = SCHOOL_NS.map((n) => compare(s, 'school-uplink', n));
  const schoolValues = school.map((c) => c.ratio);
  const schoolValue = schoolValues.every((v) => v !== null) ? Math.min(...(schoolValues as number[])) : null;
  const schoolMet = school.every((c) => c.ratio !== null && c.ratio >= SPEEDUP_GOAL_SCHOOL && c.counts && c.finalDiffPoints !== null && c.finalDiffPoints >= -FINAL_ACCURACY_POINTS);
  const wifi = s.largestWifi === null ? null : compare(s, 'wifi', s.largestWifi);
  const targets: Target[] = [
    {
      id: TARGET_SCHOOL,
      goal: `school-uplink, N = ${SCHOOL_NS.join(' and ')}: local steps (the best of H) reach ${(s.threshold * 100).toFixed(0)} % test accuracy ≥ ${SPEEDUP_GOAL_SCHOOL}× sooner than every step, and its final accuracy is no more than ${FINAL_ACCURACY_POINTS} points below (value: the smaller speed-up; composed from measured parts)`,
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
    nonIidTarget(nonIidLines),
  ];
  return targets;
}

/** The by-class target: the product's default H (a plain 'H<n>' variant) on own data split by class, against NON_IID_GOAL. */
function nonIidTarget(lines: NonIidLine[]): Target {
  const defaultH = `H${RECIPE_DEFAULTS.localSteps}`;
  const line = lines.find((l) => l.data === 'own-by-class' && l.variant === defaultH) ?? null;
  const everyStep = lines.find((l) => l.data === 'own-by-class' && l.variant === 'every-step') ?? null;
  const value = line?.finalAccuracy ?? null;
  return {
    id: TARGET_NON_IID,
    goal: `the class's own data split by class, N = 4: the default local steps (${defaultH}) end the default run at ≥ ${pct(NON_IID_GOAL)}`,
    value,
    met: value !== null && value >= NON_IID_GOAL,
    detail: line ? `${defaultH} ${pct(value)}${everyStep ? `; every step ${pct(everyStep.finalAccuracy)}` : ''}${line.secure ? ' (masked, as own data is by default)' : ''}` : `no by-class run of ${defaultH}`,
  };
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
  const own = accuracy.filter((a) => a.plan.data !== SERVER_DATA);
  const references = accuracy.filter((a) => a.plan.data === SERVER_DATA && own.some((o) => o.plan.n === a.plan.n && o.plan.variant.id === a.plan.variant.id));
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

/** What the literature predicts, in its own terms (the report sets the measured figures beside it): the lab's data's (shared/tasks/lab-workloads.ts). */
export const NON_IID_LITERATURE: readonly string[] = LAB_DATA_WORDS.nonIidLiterature;

/** The measured slowdowns in words: by class over at random, per way of summing and threshold. */
export function nonIidSlowdowns(lines: NonIidLine[]): string[] {
  const out: string[] = [];
  for (const variant of [...new Set(lines.map((l) => l.variant))]) {
    const byClass = lines.find((l) => l.variant === variant && l.data === 'own-by-class');
    const iid = lines.find((l) => l.variant === variant && l.data === 'own-iid') ?? lines.find((l) => l.variant === variant && l.data === SERVER_DATA);
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
