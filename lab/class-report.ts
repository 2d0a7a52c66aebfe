/**
 * The class's figures (`npm run lab -- --section class`): scaling with N laptops, time to
 * accuracy, the mixed class and the cost of a join, in bench/lab-class.json and .md
 * (class-markdown.ts), their targets in the lab's report (lab/report-store.ts). Pure:
 * lab/class-lab.ts measures, this turns rows into tables, targets and text;
 * test/unit/lab-class.test.ts checks it all against hand-made rows.
 */
import type { MetricPoint, StepTimingReport } from '../shared/protocol';
import {
  SCALING_TARGET_ID,
  type CheckpointPoint,
  type ClassReport,
  type ClassTargetId,
  type JoinRecord,
  type JoinRow,
  type Reached,
  type ScalingEntry,
  type ComposedTta,
  type Target,
  type TimeSplit,
  type TtaCheck,
  type TtaRow,
} from './report-types';
import type { AccuracyResult } from './local-steps-protocol';
import type { ModelProfile } from './network-models';
import type { TrainingNet, TrainingRow } from './training-rows';
import { boundMs } from './bounds';
import { LAB_WORKLOADS, LAB_WORKLOAD_LIST, labWorkloadOf } from '../shared/tasks/lab-workloads';

const CONV = LAB_WORKLOADS.conv;

/** The conv workload's examples/s at N = 8 against 8 × one device, on wired-lab. */
export const CONV_SCALING_GOAL = 0.8;
/** Time to the threshold at N = 8 against N = 1. */
export const TIME_TO_ACCURACY_GOAL = 1 / 3;
export const JOIN_PAUSE_GOAL_MS = 1_000;
export const JOINER_LOCKSTEP_GOAL_MS = 3_000;
/** The class size the join and scaling targets are read at. */
const TARGET_N = 8;

/**
 * Bytes of each net's gradient as the all-reduce carries it on the fp32 wire (parameters ×
 * 4; the step's small tail of loss, counts and link models left out), from its workload's
 * parameter count (shared/tasks/lab-workloads.ts). The unit test checks them against the models.
 */
export const GRADIENT_BYTES = Object.fromEntries(LAB_WORKLOAD_LIST.map((w) => [w.model, w.parameters * 4])) as Record<TrainingNet, number>;

// ---------------------------------------------------------------------------
// Scaling
// ---------------------------------------------------------------------------

/**
 * One entry per row with N > 1, plus each net's one-device row, with efficiency against
 * that one device. One device sends nothing, so its row (measured once, on any network)
 * stands for every network.
 */
export function scalingTable(rows: TrainingRow[]): ScalingEntry[] {
  const out: ScalingEntry[] = [];
  for (const r of rows) {
    const one = rows.find((x) => x.net === r.net && x.n === 1);
    const efficiency = r.n > 1 && one && one.examplesPerSec > 0 ? r.examplesPerSec / (r.n * one.examplesPerSec) : null;
    out.push({ model: r.model, net: r.net, n: r.n, examplesPerSec: r.examplesPerSec, stepMs: r.stepMs, efficiency, algorithm: r.n > 1 ? r.algorithm : 'none', counts: r.counts && (r.n === 1 || (one?.counts ?? false)) });
  }
  return out.sort((a, b) => a.net.localeCompare(b.net) || a.model.localeCompare(b.model) || a.n - b.n);
}

/** Where one row's step time goes, from the chief's timing and the network's bound. */
export function timeSplit(row: TrainingRow, profile: ModelProfile | null): TimeSplit | null {
  const t: StepTimingReport | null = row.timingMean ?? row.timing;
  if (!t || !Number.isFinite(row.stepMs)) return null;
  const named = t.dataMs + t.computeMs + t.readbackMs + t.commMs + t.applyMs;
  const algorithm = row.algorithm === 'ring' || row.algorithm === 'halving-doubling' || row.algorithm === 'hub' ? row.algorithm : null;
  const bound = row.n > 1 && profile && algorithm ? boundMs(profile, algorithm, row.n, GRADIENT_BYTES[row.net]) : null;
  return {
    stepMs: row.stepMs,
    dataMs: t.dataMs,
    computeMs: t.computeMs,
    readbackMs: t.readbackMs,
    allReduceMs: t.commMs,
    applyMs: t.applyMs,
    otherMs: Math.max(0, row.stepMs - named),
    allReduceBoundMs: bound,
  };
}

/** A budget or a duration in words: seconds under two minutes, minutes beyond. */
export const duration = (ms: number): string => (ms < 120_000 ? `${Math.round(ms / 1000)} s` : `${Number((ms / 60_000).toFixed(1))} min`);

const pctOf = (part: number, whole: number): string => `${Math.round((100 * part) / whole)} %`;

/** One sentence: the row's efficiency and where its step time goes, largest part first. */
export function whereTimeGoes(row: TrainingRow, entry: ScalingEntry | undefined, split: TimeSplit | null): string {
  const head = `${labWorkloadOf(row.net).name} on ${row.model}, N = ${row.n}: ${entry?.efficiency != null ? `${entry.efficiency.toFixed(2)} of linear` : 'no one-device row'}`;
  if (!split) return `${head}; the chief reported no step timing.`;
  const parts: Array<[string, number]> = [
    ['all-reduce', split.allReduceMs],
    ['compute', split.computeMs],
    ['apply', split.applyMs],
    ['read-back', split.readbackMs],
    ['waiting for data', split.dataMs],
    ['the rest of the step', split.otherMs],
  ];
  const listed = parts
    .filter(([, ms]) => ms >= 0.5)
    .sort((a, b) => b[1] - a[1])
    .map(([name, ms]) => `${name} ${Math.round(ms)} ms (${pctOf(ms, split.stepMs)})${name === 'all-reduce' && split.allReduceBoundMs !== null ? ` against a bound of ${Math.round(split.allReduceBoundMs)} ms for ${Math.round(GRADIENT_BYTES[row.net] / 1024)} KiB with ${row.algorithm}` : ''}`);
  return `${head}; a step takes ${Math.round(split.stepMs)} ms: ${listed.join(', ')}.`;
}

// ---------------------------------------------------------------------------
// Time to accuracy
// ---------------------------------------------------------------------------

export interface EvaluationPolicy {
  threshold: number;
  /** A checkpoint whose screen is more than this below the threshold is not scored in full. */
  screenMargin: number;
  /** Checkpoints captured later than this after the start do not count. */
  budgetMs: number;
}

/**
 * What to score next so that the first checkpoint at the threshold is found with the
 * fewest full evaluations: the checkpoints in step order, each screened first and scored in
 * full only when its screen is within the margin. Null when the first checkpoint at the
 * threshold is known, or nothing within the budget is left to score.
 */
export function nextEvaluation(points: CheckpointPoint[], policy: EvaluationPolicy): { id: string; split: 'screen' | 'full' } | null {
  for (const p of [...points].sort((a, b) => a.step - b.step)) {
    if (p.ms > policy.budgetMs) return null;
    if (p.accuracy !== null) {
      if (p.accuracy >= policy.threshold) return null;
      continue;
    }
    if (p.screen === null) return { id: p.id, split: 'screen' };
    if (p.screen >= policy.threshold - policy.screenMargin) return { id: p.id, split: 'full' };
  }
  return null;
}

/**
 * While the row runs: the newest checkpoint within the budget, if it still needs a score.
 * Scored before the backlog, it tells the row as early as the scorer can that the class is
 * at the threshold, so the row can stop; the backlog (nextEvaluation) is scored after.
 */
export function frontierEvaluation(points: CheckpointPoint[], policy: EvaluationPolicy): { id: string; split: 'screen' | 'full' } | null {
  const newest = points.filter((p) => p.ms <= policy.budgetMs).reduce<CheckpointPoint | null>((a, p) => (a === null || p.step > a.step ? p : a), null);
  if (!newest) return null;
  if (newest.screen === null) return { id: newest.id, split: 'screen' };
  if (newest.accuracy === null && newest.screen >= policy.threshold - policy.screenMargin) return { id: newest.id, split: 'full' };
  return null;
}

/** Whether some checkpoint within the budget scored the threshold on the whole test set: the first one is then at or before it. */
export function thresholdSeen(points: CheckpointPoint[], threshold: number, budgetMs: number): boolean {
  return points.some((p) => p.ms <= budgetMs && p.accuracy !== null && p.accuracy >= threshold);
}

/** The first checkpoint within the budget whose full-test accuracy reaches the threshold; null when none did. */
export function timeToThreshold(points: CheckpointPoint[], threshold: number, budgetMs: number): Reached | null {
  const sorted = [...points].sort((a, b) => a.step - b.step);
  for (let i = 0; i < sorted.length; i++) {
    const p = sorted[i]!;
    if (p.ms > budgetMs) return null;
    if (p.accuracy !== null && p.accuracy >= threshold) return { ms: p.ms, step: p.step, accuracy: p.accuracy, previousMs: i > 0 ? sorted[i - 1]!.ms : 0 };
  }
  return null;
}

/**
 * One composed time-to-accuracy row: the in-process run's first step at the threshold (on
 * the whole test set) and the lab's scaling row of the same network, net and N. Its time is
 * the row's Start-to-window time plus the steps beyond the window's first at the row's mean
 * step: what a class on the lab would take, bar the checkpoints a direct run writes to be scored.
 */
export function composeTta(n: number, scaleLearningRate: boolean, globalBatch: number, run: AccuracyResult | undefined, row: TrainingRow | undefined): ComposedTta {
  const crossed = run?.crossed ?? null;
  const stepMs = row && Number.isFinite(row.stepMs) ? row.stepMs : null;
  const startToFirstMs = row?.startToFirstMs ?? null;
  const firstStep = row?.firstStep ?? null;
  const composedMs = crossed && stepMs !== null && startToFirstMs !== null && firstStep !== null ? startToFirstMs + Math.max(0, crossed.steps - firstStep) * stepMs : null;
  return {
    n,
    scaleLearningRate,
    globalBatch,
    steps: crossed?.steps ?? null,
    examples: crossed?.examples ?? null,
    accuracy: crossed?.accuracy ?? null,
    stoppedAt: run && !crossed ? { examples: run.end.examples, steps: run.end.steps, accuracy: run.end.accuracy } : null,
    stepMs,
    startToFirstMs,
    firstStep,
    composedMs,
    counts: !!row?.counts && !!run && run.error === null,
  };
}

/** The direct run of (n, setting) against its composed row: the first checkpoint at the threshold over the composed time. */
export function ttaCheck(direct: TtaRow | undefined, composed: ComposedTta | undefined): TtaCheck | null {
  if (!direct) return null;
  const directMs = direct.reached?.ms ?? null;
  const composedMs = composed?.composedMs ?? null;
  return { n: direct.n, scaleLearningRate: direct.scaleLearningRate, composedMs, directMs, ratio: directMs !== null && composedMs !== null ? directMs / composedMs : null };
}

const composedLabel = (r: ComposedTta) => (r.scaleLearningRate ? 'with scaleLearningRate' : 'without scaling');
const composedText = (r: ComposedTta) => (r.composedMs !== null ? `${(r.composedMs / 1000).toFixed(0)} s (step ${r.steps})` : r.stoppedAt ? `not within ${r.stoppedAt.examples.toLocaleString('en-US')} examples` : 'not composed');

/**
 * `time-to-accuracy-n8-vs-n1`: the better of N = 8 with and without scaleLearningRate
 * against N = 1, each composed (composeTta); the direct run's check against its composition
 * is in the detail.
 */
export function timeToAccuracyTarget(composed: ComposedTta[], check: TtaCheck | null, threshold: number): Target {
  const goal = `time to ${Math.round(threshold * 1000) / 10} % test accuracy at N = 8 (the better of the settings run; scaleLearningRate, the recipe for a large class) ≤ ${TIME_TO_ACCURACY_GOAL.toFixed(3)} of N = 1; composed from steps in-process × the lab's step, checked by a direct run`;
  const id = 'time-to-accuracy-n8-vs-n1';
  const one = composed.find((r) => r.n === 1);
  const eights = composed.filter((r) => r.n === TARGET_N);
  if (!one || eights.length === 0) return { id, goal, value: null, met: false, detail: 'not measured in this run' };
  const best = eights.reduce((b, r) => ((r.composedMs ?? Infinity) < (b.composedMs ?? Infinity) ? r : b));
  const others = eights.filter((r) => r !== best).map((r) => `${composedLabel(r)}: ${composedText(r)}`);
  const checkText = check ? `; the direct run (N = ${check.n}, ${check.scaleLearningRate ? 'with scaleLearningRate' : 'without scaling'}) ${check.directMs !== null ? `reached it at ${(check.directMs / 1000).toFixed(0)} s` : 'did not reach it'} against ${check.composedMs !== null ? `${(check.composedMs / 1000).toFixed(0)} s` : 'none'} composed${check.ratio !== null ? ` (${check.ratio.toFixed(2)}×)` : ''}` : '; no direct run';
  if (best.composedMs === null || one.composedMs === null) {
    return { id, goal, value: null, met: false, detail: `N = 8 ${composedLabel(best)}: ${composedText(best)}; N = 1: ${composedText(one)}${others.length ? `; ${others.join('; ')}` : ''}${checkText}` };
  }
  const value = best.composedMs / one.composedMs;
  const counted = best.counts && one.counts;
  return {
    id,
    goal,
    value,
    met: counted && value <= TIME_TO_ACCURACY_GOAL,
    detail: `N = 8 ${composedLabel(best)} ${composedText(best)} / N = 1 ${composedText(one)}${others.length ? `; ${others.join('; ')}` : ''}${checkText}${counted ? '' : '; a part did not count'}`,
  };
}

// ---------------------------------------------------------------------------
// Joins
// ---------------------------------------------------------------------------

const nullableMs = (v: unknown): v is number | null => v === null || (typeof v === 'number' && Number.isFinite(v) && v >= 0);

/**
 * The room's `joins`, checked entry by entry; null when the server does not send the field
 * at all (a server without the join telemetry). A malformed entry throws: the lab must not
 * read a figure it does not understand.
 */
export function parseJoins(room: unknown): JoinRecord[] | null {
  if (typeof room !== 'object' || room === null || !('joins' in room)) return null;
  const joins = (room as { joins: unknown }).joins;
  if (!Array.isArray(joins)) throw new TypeError(`RoomStatus.joins is ${JSON.stringify(joins)}, not an array`);
  return joins.map((j: unknown, i) => {
    const e = j as Partial<JoinRecord> | null;
    if (
      typeof e !== 'object' ||
      e === null ||
      !Number.isInteger(e.generation) ||
      !Array.isArray(e.joiners) ||
      !e.joiners.every((n) => typeof n === 'string') ||
      !Number.isInteger(e.atStep) ||
      !nullableMs(e.pauseMs) ||
      !nullableMs(e.lockStepMs)
    ) {
      throw new TypeError(`RoomStatus.joins[${i}] is not {generation, joiners, atStep, pauseMs, lockStepMs}: ${JSON.stringify(j)}`);
    }
    return { generation: e.generation!, joiners: [...e.joiners], atStep: e.atStep!, pauseMs: e.pauseMs ?? null, lockStepMs: e.lockStepMs ?? null };
  });
}

/**
 * The chief's stall around a join, from its reports on the server's clock: the median step
 * time over the `span` steps before `fromStep` (the admission), and the largest excess
 * over it of any report interval from one step before the admission to `toStep` (a step
 * the class reached with the joiner in lock-step). A cross-check of the telemetry's
 * pauseMs; null when the history does not cover the join.
 */
export function stallAround(history: MetricPoint[], fromStep: number, toStep: number, span = 10): { stallMs: number; typicalStepMs: number } | null {
  const pts = [...history].sort((a, b) => a.step - b.step).filter((p, i, all) => i === 0 || p.step !== all[i - 1]!.step);
  const intervals: Array<{ from: number; to: number; perStep: number; ms: number; steps: number }> = [];
  for (let i = 1; i < pts.length; i++) {
    const a = pts[i - 1]!;
    const b = pts[i]!;
    intervals.push({ from: a.step, to: b.step, ms: b.at - a.at, steps: b.step - a.step, perStep: (b.at - a.at) / (b.step - a.step) });
  }
  const before = intervals.filter((x) => x.to <= fromStep - 1 && x.from >= fromStep - 1 - span).map((x) => x.perStep).sort((a, b) => a - b);
  const around = intervals.filter((x) => x.from >= fromStep - 1 && x.to <= toStep);
  if (before.length === 0 || around.length === 0 || (pts.at(-1)?.step ?? 0) < toStep) return null;
  const mid = before.length >> 1;
  const typicalStepMs = before.length % 2 === 1 ? before[mid]! : (before[mid - 1]! + before[mid]!) / 2;
  const stallMs = Math.max(0, ...around.map((x) => x.ms - x.steps * typicalStepMs));
  return { stallMs, typicalStepMs };
}

function worstOf(rows: JoinRow[], pick: (r: JoinRecord) => number | null): { value: number | null; all: Array<number | null> } {
  const all = rows.flatMap((r) => r.measurements.map((m) => (m.record ? pick(m.record) : null)));
  if (all.length === 0 || all.some((v) => v === null)) return { value: null, all };
  return { value: Math.max(...(all as number[])), all };
}

/** `join-pause-n8` and `joiner-lockstep-n8`: the worst join at N = 8 against 1 s and 3 s. */
export function joinTargets(rows: JoinRow[]): Target[] {
  const at8 = rows.filter((r) => r.n === TARGET_N);
  const counted = at8.length > 0 && at8.every((r) => r.counts);
  const make = (id: ClassTargetId, goalMs: number, what: string, pick: (r: JoinRecord) => number | null): Target => {
    const { value, all } = worstOf(at8, pick);
    const goal = `N = 8: ${what} ≤ ${goalMs / 1000} s at every join (the figure: the worst)`;
    if (at8.length === 0) return { id, goal, value: null, met: false, detail: 'not measured in this run' };
    const listed = all.map((v) => (v === null ? 'not measured' : `${Math.round(v)} ms`)).join(', ');
    return { id, goal, value, met: counted && value !== null && value <= goalMs, detail: `${all.length} joins: ${listed}${counted ? '' : '; a row did not count'}` };
  };
  return [
    make('join-pause-n8', JOIN_PAUSE_GOAL_MS, 'the class\'s pause per join', (r) => r.pauseMs),
    make('joiner-lockstep-n8', JOINER_LOCKSTEP_GOAL_MS, 'the joiner in lock-step after its admission', (r) => r.lockStepMs),
  ];
}

// ---------------------------------------------------------------------------
// The section and its targets
// ---------------------------------------------------------------------------

/** `<conv model>-scaling-n8` (SCALING_TARGET_ID) from the scaling table. */
export function convScalingTarget(table: ScalingEntry[]): Target {
  const e = table.find((x) => x.net === CONV.model && x.model === 'wired-lab' && x.n === TARGET_N);
  const one = table.find((x) => x.net === CONV.model && x.n === 1);
  const goal = `wired-lab: ${CONV.name} examples/s at N = 8 ≥ ${CONV_SCALING_GOAL} × 8 × one device`;
  if (!e || e.efficiency === null || !one) return { id: SCALING_TARGET_ID, goal, value: null, met: false, detail: 'not measured in this run' };
  return {
    id: SCALING_TARGET_ID,
    goal,
    value: e.efficiency,
    met: e.counts && e.efficiency >= CONV_SCALING_GOAL,
    detail: `${e.examplesPerSec.toFixed(1)} examples/s at N = 8 (${e.algorithm}) against 8 × ${one.examplesPerSec.toFixed(1)}${e.counts ? '' : '; a row did not count'}`,
  };
}

/** Every class target, in CLASS_TARGET_IDS order; what this run did not measure has a null figure. */
export function classTargets(c: Pick<ClassReport, 'scaling' | 'timeToAccuracy' | 'mixed' | 'joins'>): Target[] {
  const notMeasured = (id: ClassTargetId, goal: string): Target => ({ id, goal, value: null, met: false, detail: 'not measured in this run' });
  const mixed: Target = c.mixed ? c.mixed.target : notMeasured('mixed-class-phone', '≥ 0.85 of (summed device speed ÷ four laptops) × the all-laptop examples/s');
  return [
    convScalingTarget(c.scaling?.table ?? []),
    timeToAccuracyTarget(c.timeToAccuracy?.composed ?? [], c.timeToAccuracy?.check ?? null, c.timeToAccuracy?.threshold ?? 0.97),
    mixed,
    ...joinTargets(c.joins?.rows ?? []),
  ];
}
