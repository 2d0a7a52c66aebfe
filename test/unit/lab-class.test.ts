/**
 * The class's figures (`npm run lab -- --section class`, lab/class-report.ts) from hand-made rows:
 * scaling efficiency and where a step's time goes, the order checkpoints are scored in and
 * the time to the threshold, composed and checked, the join telemetry's parsing and the
 * chief's stall, every class target met or not, and the section's markdown.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  GRADIENT_BYTES,
  classTargets,
  convScalingTarget,
  duration,
  frontierEvaluation,
  thresholdSeen,
  composeTta,
  ttaCheck,
  joinTargets,
  nextEvaluation,
  parseJoins,
  scalingTable,
  stallAround,
  timeSplit,
  timeToAccuracyTarget,
  timeToThreshold,
  whereTimeGoes,
} from '../../lab/class-report';
import { classMarkdown } from '../../lab/class-markdown';
import { CLASS_TARGET_IDS, type CheckpointPoint, type ClassReport, type ComposedTta, type JoinRecord, type JoinRow, type TtaRow } from '../../lab/report-types';
import type { AccuracyResult } from '../../lab/local-steps-protocol';
import { cpuBudget } from '../../lab/cpu-budget';
import { wiredLab } from '../../lab/network-models';
import { boundMs } from '../../lab/bounds';
import { buildModel } from '../../shared/compute/models';
import { LAB_WORKLOAD_LIST } from '../../shared/tasks/lab-workloads';
import { featureCount } from '../../shared/tasks/task';
import type { TrainingRow } from '../../lab/training-rows';
import type { MetricPoint } from '../../shared/protocol';

const close = (a: number, b: number) => assert.ok(Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(b)), `${a} ≠ ${b}`);
const cpu = { mean: 0.5, peak: 0.7, cores: 2, intervals: 4 };
const timing = (computeMs: number, commMs: number, applyMs = 10) => ({ dataMs: 1, computeMs, readbackMs: 2, crossMs: 0, commMs, applyMs });

function row(model: TrainingRow['model'], net: TrainingRow['net'], n: number, examplesPerSec: number, extra: Partial<TrainingRow> = {}): TrainingRow {
  return {
    model,
    net,
    n,
    device: 'laptop',
    devices: Array.from({ length: n }, () => 'laptop' as const),
    config: {},
    batchShares: [],
    examplesPerSec,
    reportedExamplesPerSec: examplesPerSec,
    stepMs: (32 * n * 1000) / examplesPerSec,
    steps: 10,
    windowMs: 10_000,
    globalBatch: 32 * n,
    algorithm: n > 1 ? 'ring' : 'none',
    reason: '',
    timing: timing(100, 50),
    timingMean: null,
    computeMs: [],
    dropped: [],
    cpu,
    setupSeconds: 1,
    totalSeconds: 2,
    counts: true,
    ...extra,
  };
}

test('the gradient sizes are the models\' parameters × 4 bytes; a dense first layer is what the workload says', () => {
  for (const w of LAB_WORKLOAD_LIST) {
    const model = buildModel({ task: w.task.id, model: w.model, seed: 1, classes: [...w.task.outputs] });
    assert.equal(w.parameters, model.countParams(), w.model);
    assert.equal(GRADIENT_BYTES[w.model], model.countParams() * 4, w.model);
    if (w.denseUnits !== undefined) {
      const [kernel, bias] = model.getWeights();
      assert.deepEqual(kernel!.shape, [featureCount(w.task.example), w.denseUnits], `${w.model}: the first weights are a features × units kernel`);
      assert.deepEqual(bias!.shape, [w.denseUnits], `${w.model}: then the units' biases`);
    }
    model.dispose();
  }
  assert.deepEqual(LAB_WORKLOAD_LIST.map((w) => w.model), ['mlp', 'cnn'], 'the ids bench/*.json records');
});

test('scaling: efficiency is examples/s(N) over N × one device, and one device stands for every network', () => {
  const rows = [row('wired-lab', 'cnn', 1, 30), row('wired-lab', 'cnn', 8, 192), row('wifi', 'cnn', 8, 120), row('wired-lab', 'mlp', 1, 80), row('wired-lab', 'mlp', 4, 160, { counts: false })];
  const table = scalingTable(rows);
  const get = (model: string, net: string, n: number) => table.find((e) => e.model === model && e.net === net && e.n === n)!;
  close(get('wired-lab', 'cnn', 8).efficiency!, 192 / 240);
  close(get('wifi', 'cnn', 8).efficiency!, 0.5);
  close(get('wired-lab', 'mlp', 4).efficiency!, 0.5);
  assert.equal(get('wired-lab', 'cnn', 1).efficiency, null, 'the one-device row has no efficiency of its own');
  assert.equal(get('wired-lab', 'mlp', 4).counts, false);
  // A one-device row that did not count takes every row set against it along.
  const shaky = scalingTable([row('wired-lab', 'cnn', 1, 30, { counts: false }), row('wired-lab', 'cnn', 2, 60)]);
  assert.equal(shaky.find((e) => e.n === 2)!.counts, false);
  // No one-device row: no efficiency.
  assert.equal(scalingTable([row('wifi', 'mlp', 2, 100)])[0]!.efficiency, null);
});

test('cnn-scaling-n8: met at 0.8 of linear on wired-lab, not on wifi, not when a row does not count', () => {
  const one = row('wired-lab', 'cnn', 1, 30);
  const met = convScalingTarget(scalingTable([one, row('wired-lab', 'cnn', 8, 0.8 * 8 * 30), row('wifi', 'cnn', 8, 10)]));
  close(met.value!, 0.8);
  assert.equal(met.met, true);
  const missed = convScalingTarget(scalingTable([one, row('wired-lab', 'cnn', 8, 0.79 * 8 * 30)]));
  assert.equal(missed.met, false);
  const unCounted = convScalingTarget(scalingTable([one, row('wired-lab', 'cnn', 8, 240, { counts: false })]));
  assert.equal(unCounted.value, 1);
  assert.equal(unCounted.met, false);
  assert.deepEqual(convScalingTarget(scalingTable([row('wifi', 'cnn', 8, 240), one])).value, null, 'only wifi measured: no figure');
});

test('where the time goes: the chief\'s mean split, the rest of the step, and the all-reduce against the network\'s bound', () => {
  const profile = wiredLab({ portMbit: 20, serverMbit: 20 });
  const r = row('wired-lab', 'mlp', 8, 256, { stepMs: 1000, timing: timing(300, 50), timingMean: timing(150, 600, 40) });
  const split = timeSplit(r, profile)!;
  assert.equal(split.allReduceMs, 600, 'the mean is preferred over the last step');
  assert.equal(split.otherMs, 1000 - (1 + 150 + 2 + 600 + 40));
  close(split.allReduceBoundMs!, boundMs(profile, 'ring', 8, GRADIENT_BYTES.mlp));
  const entry = scalingTable([row('wired-lab', 'mlp', 1, 80), r]).find((e) => e.n === 8);
  const sentence = whereTimeGoes(r, entry, split);
  const bound = Math.round(boundMs(profile, 'ring', 8, GRADIENT_BYTES.mlp));
  assert.equal(
    sentence,
    `MLP on wired-lab, N = 8: 0.40 of linear; a step takes 1000 ms: all-reduce 600 ms (60 %) against a bound of ${bound} ms for 398 KiB with ring, the rest of the step 207 ms (21 %), compute 150 ms (15 %), apply 40 ms (4 %), read-back 2 ms (0 %), waiting for data 1 ms (0 %).`,
  );
  assert.equal(timeSplit(row('wired-lab', 'mlp', 1, 80), null)!.allReduceBoundMs, null, 'one device: no bound');
  assert.equal(timeSplit(row('wired-lab', 'mlp', 2, 80, { timing: null }), profile), null);
});

const pt = (step: number, ms: number, screen: number | null = null, accuracy: number | null = null): CheckpointPoint => ({ id: `c${step}`, step, ms, screen, accuracy });
const policy = { threshold: 0.97, screenMargin: 0.02, budgetMs: 600_000 };

test('scoring order: every checkpoint screened in step order, in full only within the margin, none past the first hit or the budget', () => {
  assert.deepEqual(nextEvaluation([pt(20, 20_000), pt(10, 10_000)], policy), { id: 'c10', split: 'screen' });
  assert.deepEqual(nextEvaluation([pt(10, 10_000, 0.9), pt(20, 20_000)], policy), { id: 'c20', split: 'screen' }, 'screened out: on to the next');
  assert.deepEqual(nextEvaluation([pt(10, 10_000, 0.9), pt(20, 20_000, 0.951)], policy), { id: 'c20', split: 'full' }, 'within 2 points: in full');
  assert.deepEqual(nextEvaluation([pt(10, 10_000, 0.96, 0.965), pt(20, 20_000, 0.97), pt(30, 30_000)], policy), { id: 'c20', split: 'full' });
  assert.equal(nextEvaluation([pt(10, 10_000, 0.97, 0.971), pt(20, 20_000)], policy), null, 'the first hit is known: nothing later matters');
  assert.equal(nextEvaluation([pt(10, 10_000, 0.9), pt(20, 700_000)], policy), null, 'past the budget: not scored');
  assert.equal(nextEvaluation([], policy), null);
});

test('while the row runs the newest checkpoint goes first, and any checkpoint at the threshold stops it', () => {
  const backlog = [pt(10, 10_000), pt(20, 20_000), pt(30, 30_000)];
  assert.deepEqual(frontierEvaluation(backlog, policy), { id: 'c30', split: 'screen' });
  assert.deepEqual(frontierEvaluation([pt(10, 10_000), pt(30, 30_000, 0.96)], policy), { id: 'c30', split: 'full' });
  assert.equal(frontierEvaluation([pt(10, 10_000), pt(30, 30_000, 0.9)], policy), null, 'screened out: the backlog\'s turn');
  assert.equal(frontierEvaluation([pt(10, 10_000), pt(30, 30_000, 0.98, 0.975)], policy), null);
  assert.deepEqual(frontierEvaluation([pt(10, 10_000), pt(30, 700_000)], policy), { id: 'c10', split: 'screen' }, 'past the budget does not count as newest');
  const probed = [pt(10, 10_000), pt(20, 20_000), pt(30, 30_000, 0.98, 0.975)];
  assert.equal(thresholdSeen(probed, 0.97, 600_000), true);
  assert.equal(thresholdSeen(probed, 0.97, 25_000), false);
  // The first checkpoint at the threshold is still found in order afterwards.
  assert.deepEqual(nextEvaluation(probed, policy), { id: 'c10', split: 'screen' });
  assert.equal(timeToThreshold(probed, 0.97, 600_000)!.step, 30, 'until the backlog is scored, the probed one stands');
});

test('durations read as seconds under two minutes, minutes beyond', () => {
  assert.equal(duration(75_000), '75 s');
  assert.equal(duration(720_000), '12 min');
  assert.equal(duration(150_000), '2.5 min');
});

test('time to the threshold: the first checkpoint at it within the budget, with the one before', () => {
  const points = [pt(30, 30_000, 0.975, 0.972), pt(10, 10_000, 0.9), pt(20, 20_000, 0.96, 0.968), pt(40, 40_000, 0.98, 0.98)];
  assert.deepEqual(timeToThreshold(points, 0.97, 600_000), { ms: 30_000, step: 30, accuracy: 0.972, previousMs: 20_000 });
  assert.deepEqual(timeToThreshold([pt(10, 5_000, 0.98, 0.98)], 0.97, 600_000), { ms: 5_000, step: 10, accuracy: 0.98, previousMs: 0 });
  assert.equal(timeToThreshold(points, 0.97, 25_000), null, 'the hit came after the budget');
  assert.equal(timeToThreshold(points, 0.99, 600_000), null);
});

function tta(n: number, scaleLearningRate: boolean, reachedMs: number | null, extra: Partial<TtaRow> = {}): TtaRow {
  return {
    model: 'wired-lab',
    net: 'cnn',
    n,
    scaleLearningRate,
    sameWithScaling: n === 1,
    referenceBatch: 32,
    batchSizePerWorker: 32,
    globalBatch: 32 * n,
    learningRate: 0.003,
    targetRate: scaleLearningRate ? 0.003 * n : 0.003,
    warmupSteps: 50,
    threshold: 0.97,
    budgetMs: 720_000,
    saveEverySteps: 10,
    points: [],
    reached: reachedMs === null ? null : { ms: reachedMs, step: 100, accuracy: 0.971, previousMs: reachedMs - 10_000 },
    examplesToThreshold: reachedMs === null ? null : 3200 * n,
    stoppedBy: reachedMs === null ? 'budget' : 'threshold',
    runMs: reachedMs ?? 720_000,
    steps: 100,
    examplesPerSec: 30 * n,
    runEvaluations: [],
    dropped: [],
    cpu,
    evaluator: { screens: 10, fulls: 2, cpuSeconds: 40, machineBusyWithout: 0.5 },
    counts: true,
    ...extra,
  };
}

/** An in-process run that crossed at `steps` (or never, stopping at 60,000 examples). */
function run(n: number, steps: number | null, extra: Partial<AccuracyResult> = {}): AccuracyResult {
  const end = { examples: 60_000, steps: 60_000 / (32 * n), rounds: 0, accuracy: 0.95 };
  return {
    crossed: steps === null ? null : { examples: steps * 32 * n, steps, rounds: 0, accuracy: 0.972, before: null },
    end,
    error: null,
    ...extra,
  } as AccuracyResult;
}

const composed = (n: number, scaleLearningRate: boolean, steps: number | null, stepMs: number, extra: Partial<TrainingRow> = {}): ComposedTta =>
  composeTta(n, scaleLearningRate, 32 * n, run(n, steps), row('wired-lab', 'cnn', n, (32 * n * 1000) / stepMs, { startToFirstMs: 20_000, firstStep: 2, ...extra }));

test('a composed time to accuracy: Start to the window, then the steps beyond its first at the row\'s step; nothing without every part', () => {
  const c = composed(8, true, 92, 1000);
  assert.equal(c.composedMs, 20_000 + 90 * 1000);
  assert.deepEqual([c.steps, c.examples, c.accuracy, c.stoppedAt], [92, 92 * 256, 0.972, null]);
  assert.equal(c.counts, true);
  const never = composed(8, false, null, 1000);
  assert.equal(never.composedMs, null);
  assert.deepEqual(never.stoppedAt, { examples: 60_000, steps: 60_000 / 256, accuracy: 0.95 });
  assert.equal(composeTta(8, true, 256, run(8, 92), undefined).composedMs, null, 'no scaling row: nothing to time the steps with');
  assert.equal(composeTta(8, true, 256, undefined, row('wired-lab', 'cnn', 8, 256)).counts, false, 'no in-process run');
  assert.equal(composed(8, true, 92, 1000, { counts: false }).counts, false, 'a scaling row that did not count');
  // The direct run checks it: its first checkpoint at the threshold over the composed time.
  const direct = tta(8, true, 121_000);
  assert.deepEqual(ttaCheck(direct, c), { n: 8, scaleLearningRate: true, composedMs: 110_000, directMs: 121_000, ratio: 1.1 });
  assert.equal(ttaCheck(tta(8, true, null), c)!.ratio, null);
  assert.equal(ttaCheck(undefined, c), null);
});

test('time-to-accuracy-n8-vs-n1: the better composed N = 8 against N = 1, with the direct run\'s check in the detail', () => {
  const one = composed(1, false, 560, 900);
  const eights = [composed(8, false, null, 1000), composed(8, true, 92, 1000)];
  const check = ttaCheck(tta(8, true, 121_000), eights[1]);
  const met = timeToAccuracyTarget([one, ...eights], check, 0.97);
  close(met.value!, 110_000 / (20_000 + 558 * 900));
  assert.equal(met.met, true);
  assert.match(met.detail, /^N = 8 with scaleLearningRate 110 s \(step 92\) \/ N = 1 522 s \(step 560\); without scaling: not within 60,000 examples; the direct run \(N = 8, with scaleLearningRate\) reached it at 121 s against 110 s composed \(1\.10×\)$/);
  const slow = timeToAccuracyTarget([one, composed(8, true, 400, 1000)], null, 0.97);
  assert.equal(slow.met, false, `${slow.value} is above 1/3`);
  assert.match(slow.detail, /; no direct run$/);
  const none = timeToAccuracyTarget([one, eights[0]!], check, 0.97);
  assert.equal(none.value, null);
  assert.equal(none.met, false);
  assert.equal(timeToAccuracyTarget([one, composed(8, true, 92, 1000, { counts: false })], check, 0.97).met, false, 'a part that does not count never meets it');
  assert.equal(timeToAccuracyTarget(eights, check, 0.97).value, null, 'no N = 1: not measured');
});

test('join telemetry: absent is null, entries are checked, a malformed one throws', () => {
  assert.equal(parseJoins({ room: 'r', members: [] }), null);
  assert.equal(parseJoins(null), null);
  const entry: JoinRecord = { generation: 3, joiners: ['lab-join-1'], atStep: 40, pauseMs: 850, lockStepMs: null };
  assert.deepEqual(parseJoins({ joins: [entry] }), [entry]);
  assert.deepEqual(parseJoins({ joins: [] }), []);
  assert.throws(() => parseJoins({ joins: {} }), /not an array/);
  assert.throws(() => parseJoins({ joins: [{ ...entry, pauseMs: -1 }] }), /joins\[0\]/);
  assert.throws(() => parseJoins({ joins: [{ ...entry, joiners: 'lab-join-1' }] }), /joins\[0\]/);
});

test('the chief\'s stall around a join: the largest report interval over the median step, from the admission to the joiner in lock-step', () => {
  // 400 ms steps (one of 500 ms, which the median ignores); admitted at step 21, the switch
  // stalls step 27 → 28 for 2.9 s, the joiner is in step with the class at step 29.
  const history: MetricPoint[] = [];
  let at = 1_000;
  for (let step = 1; step <= 40; step++) {
    at += step === 28 ? 2_900 : step === 15 ? 500 : 400;
    history.push({ at, step, loss: 1, trainAccuracy: 0.5 });
  }
  const seen = stallAround(history, 21, 30, 10)!;
  assert.equal(seen.typicalStepMs, 400);
  assert.equal(seen.stallMs, 2_500);
  assert.equal(stallAround(history, 21, 26, 10)!.stallMs, 0, 'a window that ends before the switch sees no stall');
  // A report that skipped steps counts as that many steps.
  const sparse = history.filter((p) => p.step !== 29 && p.step !== 30);
  assert.equal(stallAround(sparse, 21, 31, 10)!.stallMs, 2_500);
  assert.equal(stallAround(history.slice(0, 5), 21, 30, 10), null, 'the history does not reach the join');
  assert.equal(stallAround(history.slice(0, 29), 21, 30, 10), null, 'nor the step the joiner was seen in step');
});

function joins(n: number, values: Array<[number | null, number | null]>, counts = true): JoinRow {
  return {
    model: 'wired-lab',
    net: 'mlp',
    n,
    measurements: values.map(([pauseMs, lockStepMs], i) => ({
      repetition: i + 1,
      name: `lab-join-${i + 1}`,
      record: { generation: i + 2, joiners: [`lab-join-${i + 1}`], atStep: 10 * (i + 1), pauseMs, lockStepMs },
      observedStallMs: null,
      observedLockStepMs: null,
      waitedMs: 1,
      error: null,
    })),
    dropped: [],
    error: null,
    cpu,
    counts,
  };
}

test('join targets: the worst join at N = 8 against 1 s and 3 s; one unmeasured join leaves no figure', () => {
  const [pause, lock] = joinTargets([joins(4, [[5_000, 9_000]]), joins(8, [[400, 2_000], [900, 2_900], [700, 1_000]])]);
  assert.equal(pause!.id, 'join-pause-n8');
  assert.equal(pause!.value, 900);
  assert.equal(pause!.met, true);
  assert.equal(lock!.value, 2_900);
  assert.equal(lock!.met, true);
  assert.match(pause!.detail, /3 joins: 400 ms, 900 ms, 700 ms/);
  const [slow, slowLock] = joinTargets([joins(8, [[1_200, 3_100]])]);
  assert.deepEqual([slow!.met, slowLock!.met], [false, false]);
  const [unmeasured] = joinTargets([joins(8, [[400, 2_000], [null, 2_000]])]);
  assert.equal(unmeasured!.value, null);
  assert.equal(unmeasured!.met, false);
  assert.equal(joinTargets([joins(8, [[400, 2_000]], false)])[0]!.met, false, 'a row that does not count');
  assert.equal(joinTargets([joins(4, [[400, 2_000]])])[0]!.value, null, 'no N = 8 row: not measured');
});

test('class targets: all five, in order, unmeasured ones without a figure', () => {
  const none = classTargets({ scaling: null, timeToAccuracy: null, mixed: null, joins: null });
  assert.deepEqual(none.map((t) => t.id), [...CLASS_TARGET_IDS]);
  assert.ok(none.every((t) => t.value === null && !t.met));
});

test('the CPU budget: 8 laptops and the server\'s share fill 2 cores exactly; a ninth does not fit', () => {
  const laptops = (n: number) => Array.from({ length: n }, () => 'laptop' as const);
  const eight = cpuBudget(laptops(8), 2);
  close(eight.capsCores, 1.6);
  assert.equal(eight.fits, true);
  assert.equal(cpuBudget(laptops(9), 2).fits, false);
  assert.equal(cpuBudget(laptops(8), 2, 0.5).fits, false, 'a larger reserve would not leave room');
  close(cpuBudget(['laptop', 'laptop', 'laptop', 'phone'], 2).capsCores, 0.65);
});

function classReport(extra: Partial<ClassReport> = {}): ClassReport {
  const base = {
    generatedAt: '2026-11-24T10:00:00.000Z',
    machine: { cores: 2, kernel: 'k', node: '20' },
    quick: false,
    minutes: 90,
    cpuBudget: cpuBudget(Array.from({ length: 8 }, () => 'laptop' as const), 2),
    sectionMinutes: { joins: 8 },
    scaling: null,
    timeToAccuracy: { threshold: 0.97, budgetMs: 300_000, screenMargin: 0.02, rows: [tta(8, true, 90_000)], composed: [composed(1, false, 500, 900), composed(8, true, 80, 1000)], check: null },
    mixed: null,
    joins: { rows: [joins(8, [[400, 2_000]])] },
    errors: [],
    targets: [],
    ...extra,
  };
  return { ...base, targets: classTargets(base) };
}

test("the class's markdown: the composed time to accuracy with its direct check, the direct run, the joins", () => {
  const c = classReport();
  c.timeToAccuracy!.check = ttaCheck(c.timeToAccuracy!.rows[0], c.timeToAccuracy!.composed![1]);
  const md = classMarkdown(c).join('\n');
  assert.match(md, /^# The class \(`npm run lab -- --section class`\)/);
  assert.match(md, /### Time to 97 % test accuracy/);
  assert.match(md, /\| 8 \| 256 \| on \| 80 \| 20480 \| 97\.20 % \| 1000 \| 20000 \| \*\*98 s\*\* \| {2}\|/);
  assert.match(md, /The direct run, N = 8 with scaleLearningRate: 90 s against 98 s composed \(0\.92×\)\./);
  assert.match(md, /\| cnn \| 8 \| 256 \| on \| 0\.003 → 0\.0240 \| \*\*90 s\*\* \(80 s–\)/);
  assert.match(md, /\| wired-lab \| 8 \| 1 \(lab-join-1\) \| 2 \| 10 \| 400 ms \| 2000 ms \|/);
  assert.equal(c.targets.find((t) => t.id === 'time-to-accuracy-n8-vs-n1')!.value, 98_000 / (20_000 + 498 * 900));
});
