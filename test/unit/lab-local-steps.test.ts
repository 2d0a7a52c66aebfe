/**
 * `npm run lab -- --section local-steps`'s arithmetic (lab/local-steps-report.ts, -crossover.ts and
 * -markdown.ts): the time model from the windows, the composition with the accuracy runs,
 * the two targets, the break-even of every step against local steps, the non-IID
 * slowdowns; and the accuracy runs' own
 * pieces (lab/local-steps-accuracy.ts): the devices' classes, the plans, and one short run
 * on the official MNIST with equal shares.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { classesOf, iidDeviceOf, EVERY_STEP, adamLocalStepsVariant, compressedVariant, localStepsVariant, variantConfig, type AccuracyResult, type AccuracyPlan, type SyncVariant } from '../../lab/local-steps-protocol';
import {
  composeMs,
  compare,
  everyStepModel,
  examplesTo,
  localStepsModel,
  nonIid,
  nonIidSlowdowns,
  summarize,
  TARGET_NON_IID,
  TARGET_SCHOOL,
  TARGET_WIFI,
  type LocalStepsReport,
  type LocalStepsWindow,
} from '../../lab/local-steps-report';
import { roundsAt } from '../../lab/local-steps-check';
import { breakEvenRatio, crossover } from '../../lab/local-steps-crossover';
import { localStepsTargets } from '../../lab/local-steps-targets';
import { localStepsMarkdown } from '../../lab/local-steps-markdown';
import { FULL_LOCAL_STEPS_PLAN, accuracyPlans, turnIntervals } from '../../lab/local-steps-rows';
import { busyWithout } from '../../lab/local-steps-pool';
import { runAccuracy } from '../../lab/local-steps-accuracy';

test('by class, the devices hold contiguous groups of digits, the larger first: N = 3 as the own-data E2E test holds them', () => {
  assert.deepEqual([0, 1, 2].map((r) => classesOf(r, 3)), [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]);
  assert.deepEqual([0, 1, 2, 3].map((r) => classesOf(r, 4)), [[0, 1, 2], [3, 4, 5], [6, 7], [8, 9]]);
  for (const n of [2, 3, 4, 5, 8, 10]) assert.deepEqual(Array.from({ length: n }, (_, r) => classesOf(r, n)).flat(), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  // At random: about a quarter each, the same every time.
  const counts = [0, 0, 0, 0];
  for (let i = 0; i < 60_000; i++) counts[iidDeviceOf(i, 4, 1234)]!++;
  for (const c of counts) assert.ok(Math.abs(c - 15_000) < 600, `${counts}`);
  assert.equal(iidDeviceOf(17, 4, 1234), iidDeviceOf(17, 4, 1234));
});

test('the plans: what the targets need first; every step as one Trainer on the global batch for the server\'s digits only', () => {
  const plans = accuracyPlans(FULL_LOCAL_STEPS_PLAN);
  assert.deepEqual(plans.slice(0, 3).map((p) => p.id), ['mnist N=4 every-step', 'mnist N=4 H10', 'mnist N=4 H10-powersgd16-words8']);
  const server = plans.filter((p) => p.data === 'mnist');
  // N = 16 on wifi runs every step and H10 only: the bytes target reads school-uplink's sizes.
  assert.deepEqual(server.map((p) => p.id).slice(3), ['mnist N=8 every-step', 'mnist N=8 H10', 'mnist N=8 H10-powersgd16-words8', 'mnist N=16 every-step', 'mnist N=16 H10']);
  assert.ok(server.every((p) => p.maxEpochs === 3 && p.defaultEpochs === 2));
  // Compressed sums are each device's own: N Trainers, never one on the global batch.
  assert.deepEqual(server.filter((p) => !p.everyStepAsOne).map((p) => p.id), ['mnist N=4 H10-powersgd16-words8', 'mnist N=8 H10-powersgd16-words8']);
  assert.equal(server.filter((p) => p.everyStepAsOne).length, 6);
  assert.deepEqual(variantConfig(compressedVariant(EVERY_STEP, 16, 8)), { sync: 'every-step', powerSgdRank: 16, sumWordBits: 8 });
  const own = plans.filter((p) => p.data !== 'mnist');
  assert.deepEqual(own.map((p) => p.id), ['own-by-class N=4 H10']);
  assert.ok(own.every((p) => !p.everyStepAsOne && p.maxEpochs === 2));
  assert.deepEqual(variantConfig(EVERY_STEP), { sync: 'every-step' });
  assert.deepEqual(variantConfig(localStepsVariant(20)), { sync: 'local-steps', localSteps: 20 });
  // The product before, kept for the candidates bench: the run's Adam inside, restarted every round.
  assert.deepEqual(variantConfig(adamLocalStepsVariant(20)), { sync: 'local-steps', localSteps: 20, localOptimizer: 'adam', localLearningRate: 0.003 });
});

test('turns: the chief\'s report intervals inside the window and the steps each covered', () => {
  const history = [
    { at: 0, step: 10 },
    { at: 9_000, step: 30 },
    { at: 19_000, step: 50 },
    { at: 28_000, step: 70 },
    { at: 40_000, step: 90 },
  ];
  assert.deepEqual(turnIntervals(history, 30, 70), [
    { ms: 10_000, steps: 20 },
    { ms: 9_000, steps: 20 },
  ]);
  assert.equal(roundsAt(history, 50), 3);
  assert.equal(roundsAt(history, 55), null, 'no report at that step');
});

const cpu = { mean: 0.6, peak: 0.8, cores: 2, intervals: 10 };

function win(network: 'school-uplink' | 'wifi', n: number, variant: string, turnMs: number, commMs: number, over: Partial<LocalStepsWindow> = {}): LocalStepsWindow {
  const h = variant.startsWith('every-step') ? 1 : Number.parseInt(variant.slice(1), 10);
  return {
    network, n, device: 'laptop', variant, config: {}, wire: h === 1 ? 'fp32' : 'fp16',
    fromStep: 2 * h, toStep: 5 * h, fromRound: 2, toRound: 5,
    intervalsMs: [turnMs, turnMs, turnMs], stepsPerTurn: [h, h, h], turnMs,
    startupMs: 2 * turnMs + 10_000,
    algorithm: 'halving-doubling', reason: '',
    timingMean: { dataMs: 0, computeMs: turnMs - commMs, readbackMs: 0, crossMs: 0, commMs, applyMs: 0 },
    wireBytesByDevice: [], wireBytesPerTurn: h === 1 ? 700_000 : 350_000, wireBytesPerExample: (n * (h === 1 ? 700_000 : 350_000)) / (h * 32 * n),
    reportedBytesPerTurn: n * (h === 1 ? 610_000 : 305_000), reportedBytesPerExample: (n * (h === 1 ? 610_000 : 305_000)) / (h * 32 * n),
    globalBatch: 32 * n, cpu, poolCpuSeconds: 0, machineBusyWithout: 0.6, counts: true, lost: null, ...over,
  };
}

test('the time model: every step split by the chief\'s all-reduce; local steps the line through two windows, or each window\'s split', () => {
  const es = everyStepModel(win('school-uplink', 4, 'every-step', 3_400, 3_000));
  assert.equal(es.localStepMs, 400);
  assert.equal(es.allReduceMs, 3_000);
  // Start to the window: 2 turns' worth and 10 s more: the 10 s is the start-up's own.
  assert.equal(es.startupExcessMs, 10_000);
  // Rounds of 5 and 20 steps: 5c + a = 3.5 s, 20c + a = 9.5 s, so c = 0.4 s and a = 1.5 s.
  const line = localStepsModel([win('school-uplink', 4, 'H20', 9_500, 1_400), win('school-uplink', 4, 'H5', 3_500, 1_600)])!;
  assert.ok(Math.abs(line.localStepMs - 400) < 1e-9 && Math.abs(line.allReduceMs - 1_500) < 1e-9);
  assert.deepEqual(line.from, ['H5', 'H20']);
  // A line that comes out negative (noise) falls back to the windows' own splits.
  const noisy = localStepsModel([win('school-uplink', 4, 'H5', 3_500, 1_500), win('school-uplink', 4, 'H20', 3_000, 1_000)])!;
  assert.ok(Math.abs(noisy.localStepMs - (400 + 100) / 2) < 1e-9);
  assert.equal(noisy.allReduceMs, 1_250);
  assert.equal(localStepsModel([win('school-uplink', 4, 'every-step', 3_400, 3_000)]), null);
  assert.equal(composeMs({ ...es, source: 'measured', from: [], counts: true }, 100, 100), 10_000 + 340_000);
});

function acc(n: number, variant: SyncVariant, crossed: { examples: number; steps: number; rounds: number } | null, finalAccuracy: number, over: Partial<AccuracyResult> = {}): AccuracyResult {
  const plan: AccuracyPlan = { id: `mnist N=${n} ${variant.id}`, n, variant, data: 'mnist', threshold: 0.97, defaultEpochs: 2, maxEpochs: 3, scoreEveryExamples: 6_000, screenStride: 5, screenMargin: 0.005, everyStepAsOne: true };
  return {
    plan,
    config: { sync: variant.sync, localSteps: variant.localSteps ?? 20, wire: variant.sync === 'every-step' ? 'fp32' : 'fp16', secureAggregation: false, batchSizePerWorker: 32, learningRate: 0.003, optimizer: 'adam', warmupSteps: 50, balanceShares: true, outerOptimizer: 'nesterov', outerLearningRate: 0.7, outerMomentum: 0.9, seed: 1234 },
    epochExamples: 60_000,
    points: crossed ? [{ examples: crossed.examples - 6_000, steps: 0, rounds: 0, epoch: 1, screen: 0.965, full: 0.966, wallSeconds: 1, cpuSeconds: 1 }, { ...crossed, epoch: 2, screen: 0.971, full: 0.972, wallSeconds: 2, cpuSeconds: 2 }] : [],
    crossed: crossed ? { ...crossed, accuracy: 0.972, before: { examples: crossed.examples - 6_000, steps: crossed.steps - 10, rounds: crossed.rounds - 1 } } : null,
    defaultRun: { examples: 120_000, steps: 0, rounds: 0, accuracy: finalAccuracy },
    end: crossed ? { ...crossed, accuracy: 0.972 } : { examples: 180_000, steps: 1_406, rounds: 1_406, accuracy: 0.968 },
    stoppedBy: crossed ? 'crossed' : 'max-epochs',
    error: null,
    lastShares: Array<number>(n).fill(32),
    wallSeconds: 10,
    cpuSeconds: 10,
    ...over,
  };
}

const H5 = localStepsVariant(5);
const H20 = localStepsVariant(20);
const H100 = localStepsVariant(100);

function report(over: Partial<LocalStepsReport> = {}): LocalStepsReport {
  const windows: LocalStepsWindow[] = [];
  const accuracy: AccuracyResult[] = [];
  for (const n of [4, 8]) {
    windows.push(win('school-uplink', n, 'every-step', 3_400, 3_000), win('school-uplink', n, 'H5', 3_500, 1_500), win('school-uplink', n, 'H20', 9_500, 1_500));
    accuracy.push(
      acc(n, EVERY_STEP, { examples: 150_000, steps: 1_000, rounds: 1_000 }, 0.968),
      acc(n, H5, { examples: 160_000, steps: 1_100, rounds: 220 }, 0.965),
      acc(n, H20, { examples: 170_000, steps: 1_200, rounds: 60 }, 0.966),
      acc(n, H100, null, 0.95),
    );
  }
  windows.push({ ...win('wifi', 16, 'every-step', 2_700, 2_000), device: 'chromebook' }, { ...win('wifi', 16, 'H5', 5_000, 1_000), device: 'chromebook' }, { ...win('wifi', 16, 'H20', 17_000, 1_000), device: 'chromebook' });
  accuracy.push(acc(16, EVERY_STEP, { examples: 200_000, steps: 400, rounds: 400 }, 0.97), acc(16, H20, { examples: 180_000, steps: 350, rounds: 18 }, 0.969));
  return {
    generatedAt: '2026-11-26T12:00:00.000Z', machine: { cores: 2, kernel: 'k', node: '20' }, netem: false, cfsPeriodUs: 20_000, minutes: 35, threshold: 0.97,
    profiles: { 'school-uplink': { model: 'internet', params: {} }, wifi: { model: 'wifi', params: {} } },
    plan: { accuracy: { defaultEpochs: 2, maxEpochs: 3, scoreEveryExamples: 6_000 } },
    validations: [],
    classes: [
      { network: 'school-uplink', n: 4, device: 'laptop', cores: 0.2 },
      { network: 'school-uplink', n: 8, device: 'laptop', cores: 0.2 },
      { network: 'wifi', n: 16, device: 'chromebook', cores: 0.1 },
    ],
    windows, accuracy, direct: null, targets: [], errors: [], notRun: [], ...over,
  };
}

test('composition: time to 97 % = the start-up\'s excess + steps × local step + rounds × all-reduce; H = 100 from the line; bytes a round spread over its examples', () => {
  const s = summarize(report());
  const row = (n: number, v: string) => s.rows.find((r) => r.network === 'school-uplink' && r.n === n && r.variant === v)!;
  // Every step: 10 s + 1,000 × 3.4 s.
  assert.equal(row(4, 'every-step').timeMs, 10_000 + 1_000 * 3_400);
  // H20: the line c = 0.4, a = 1.5 s; the start-up's excess of the H20 window: 19 s + 10 s − (40 steps × 0.4 + 2 × 1.5) = 10 s.
  assert.ok(Math.abs(row(4, 'H20').timeMs! - (10_000 + 1_200 * 400 + 60 * 1_500)) < 1e-6);
  assert.equal(row(4, 'H20').model!.source, 'measured');
  // H100: not timed, from the line; never crossed: no time, but the time at its end.
  const h100 = row(4, 'H100');
  assert.equal(h100.model!.source, 'fit');
  assert.equal(h100.timeMs, null);
  assert.ok(h100.timeAtEndMs! > 0);
  // Its bytes: the H20 window's bytes a round (350 kB a device, 4 devices) over 100 × 128 examples.
  assert.ok(Math.abs(h100.bytesPerExample! - (4 * 350_000) / (100 * 128)) < 1e-9);
  assert.equal(row(4, 'every-step').bytesToThreshold, row(4, 'every-step').bytesPerExample! * 150_000);
  assert.equal(row(4, 'H20').finalAccuracy, 0.966);
  // Lower accuracies: the first point at each (all 10,000 where scored), composed the same way.
  const es = row(4, 'every-step');
  assert.deepEqual(es.timeTo.map((t) => t.examples), [144_000, 144_000]);
  assert.equal(es.timeTo[0]!.ms, composeMs(es.model!, 0, 0));
  assert.deepEqual(h100.timeTo.map((t) => t.ms), [null, null], 'a run with no point at all reaches neither');
});

test('the targets when no local-steps setting reaches the threshold: no figure, not met, and where each stopped', () => {
  const r = report();
  r.accuracy = r.accuracy.map((a) => (a.plan.n === 4 && a.plan.variant.sync === 'local-steps' ? acc(4, a.plan.variant, null, 0.962) : a));
  const [school] = localStepsTargets(summarize(r));
  assert.equal(school!.value, null);
  assert.equal(school!.met, false);
  assert.match(school!.detail, /school-uplink N = 4: no local-steps setting reached the threshold within its runs \(H5 96\.80 % after 180,000 examples, H20 96\.80 % after 180,000 examples, H100 96\.80 % after 180,000 examples\); every step did in /);
});

test('the targets: the smaller speed-up of N = 4 and 8 on school-uplink (and the final accuracy within 0.3 points), and wifi at the largest class', () => {
  const s = summarize(report());
  const c4 = compare(s, 'school-uplink', 4);
  assert.equal(c4.best!.variant, 'H20');
  assert.ok(Math.abs(c4.ratio! - 3_410_000 / (10_000 + 480_000 + 90_000)) < 1e-9);
  assert.ok(Math.abs(c4.finalDiffPoints! - -0.2) < 1e-9);
  const [school, wifi] = localStepsTargets(s);
  assert.equal(school!.id, TARGET_SCHOOL);
  assert.ok(school!.value! > 3 && school!.met);
  assert.equal(wifi!.id, TARGET_WIFI);
  // wifi N = 16: every step 10 s + 400 × 2.7 s against H20's 10 s + 350 × 0.8 s + 18 × 1 s (the line through 5 and 17 s rounds).
  assert.ok(Math.abs(wifi!.value! - 1_090_000 / 308_000) < 1e-9);
  assert.equal(wifi!.met, true);
  // A variant kept for comparison (the product before) is shown, and never counts as the best of H, however soon it crosses.
  const withOld = report();
  withOld.accuracy.push(acc(4, adamLocalStepsVariant(20), { examples: 100_000, steps: 700, rounds: 35 }, 0.97));
  const old = compare(summarize(withOld), 'school-uplink', 4);
  assert.equal(old.best!.variant, 'H20');
  assert.ok(old.local.some((row) => row.variant === 'H20-adam' && row.timeMs! < old.best!.timeMs!));
  // More than 0.3 points below every step fails the school target, whatever the speed-up.
  const r = report();
  r.accuracy = r.accuracy.map((a) => (a.plan.n === 8 && a.plan.variant.id === 'H20' ? { ...a, defaultRun: { ...a.defaultRun!, accuracy: 0.955 } } : a));
  const [failed] = localStepsTargets(summarize(r));
  assert.equal(failed!.met, false);
  // Every step that never crossed: its time at its end stands in, and the figure is a lower bound.
  const slow = report();
  slow.accuracy = slow.accuracy.map((a) => (a.plan.n === 4 && a.plan.variant.sync === 'every-step' ? acc(4, EVERY_STEP, null, 0.966) : a));
  const bound = compare(summarize(slow), 'school-uplink', 4);
  assert.equal(bound.lowerBound, true);
  assert.ok(bound.ratio! > 0);
  assert.match(localStepsTargets(summarize(slow))[0]!.detail, /every step not at the threshold after/);
  // A window that did not count: the target is not met.
  const lost = report();
  lost.windows = lost.windows.map((w) => (w.n === 4 && w.variant === 'every-step' ? { ...w, counts: false } : w));
  assert.equal(localStepsTargets(summarize(lost))[0]!.met, false);
  // Nothing measured: null figures, not met.
  const none = localStepsTargets(summarize(report({ windows: [], accuracy: [] })));
  assert.deepEqual(none.map((t) => [t.value, t.met]), [[null, false], [null, false], [null, false], [null, false]]);
});

test('compressed sums: each timed in its own window, never through the line; the bytes target reads the default rounds compressed against the same rounds in fp16', () => {
  const H10 = localStepsVariant(10);
  const rounds = compressedVariant(H10, 16, 8);
  const steps = compressedVariant(EVERY_STEP, 16, 8);
  const r = report();
  for (const n of [4, 8]) {
    // The compressed round: 4 s of local steps and a 0.3 s all-reduce, a tenth of the bytes.
    r.windows.push(win('school-uplink', n, 'H10', 5_500, 1_500), win('school-uplink', n, rounds.id, 4_300, 300, { wireBytesPerTurn: 35_000, wireBytesPerExample: 35_000 / 320 }), win('school-uplink', n, steps.id, 700, 300));
    r.accuracy.push(acc(n, H10, { examples: 117_600, steps: 919, rounds: 92 }, 0.972), acc(n, rounds, { examples: 120_000, steps: 938, rounds: 94 }, 0.9702), acc(n, steps, null, 0.966));
  }
  const s = summarize(r);
  const row = (n: number, v: string) => s.rows.find((x) => x.network === 'school-uplink' && x.n === n && x.variant === v)!;
  assert.deepEqual(s.rows.filter((x) => x.network === 'school-uplink' && x.n === 4).map((x) => x.variant), ['every-step', steps.id, 'H5', 'H10', rounds.id, 'H20', 'H100']);
  const c = row(4, rounds.id);
  assert.equal(c.model!.source, 'measured');
  assert.ok(Math.abs(c.model!.localStepMs - 400) < 1e-9 && Math.abs(c.model!.allReduceMs - 300) < 1e-9, 'its own window\'s split, not the line through the whole rounds');
  assert.equal(row(4, 'H10').model!.allReduceMs, 1_500, 'the whole rounds\' line is untouched');
  const e = row(4, steps.id);
  assert.deepEqual([e.model!.localStepMs, e.model!.allReduceMs, e.timeMs], [400, 300, null]);
  assert.ok(e.timeAtEndMs! > 0);
  // A compressed variant is never the best of the product's H for the speed-up targets.
  const best = compare(s, 'school-uplink', 4).best!;
  assert.ok(best.variant === 'H10' && c.timeMs! < best.timeMs!, 'sooner, and still not the best of H');
  const bytes = localStepsTargets(s).find((t) => t.id === 'local-steps-bytes')!;
  assert.ok(Math.abs(bytes.value! - 0.1) < 1e-9, `${bytes.value}`);
  assert.equal(bytes.met, true);
  assert.match(bytes.detail, /school-uplink N = 4: H10-powersgd16-words8 109 B\/example against H10's 1094 \(0\.100\), final 97\.02 % against 97\.20 %/);
  assert.match(bytes.detail, /school-uplink N = 4: every step compressed not reached to 97 % \(final 96\.60 %\)/);
  // More than half a point below the rounds in fp16: not met, whatever the bytes.
  r.accuracy = r.accuracy.map((a) => (a.plan.n === 8 && a.plan.variant.id === rounds.id ? { ...a, defaultRun: { ...a.defaultRun!, accuracy: 0.9665 } } : a));
  assert.equal(localStepsTargets(summarize(r)).find((t) => t.id === 'local-steps-bytes')!.met, false);
});

test("the by-class target reads the product's default H on own data split by class, never the product before, against 94 %", () => {
  const byClass = (variant: SyncVariant, final: number): AccuracyResult => {
    const a = acc(4, variant, null, final);
    return { ...a, plan: { ...a.plan, id: `own-by-class N=4 ${variant.id}`, data: 'own-by-class', everyStepAsOne: false } };
  };
  const target = (runs: AccuracyResult[]) => localStepsTargets(summarize(report()), nonIid(runs)).find((t) => t.id === TARGET_NON_IID)!;
  const met = target([byClass(localStepsVariant(10), 0.9475), byClass(adamLocalStepsVariant(20), 0.9689), byClass(EVERY_STEP, 0.966)]);
  assert.equal(met.value, 0.9475);
  assert.equal(met.met, true);
  assert.match(met.detail, /^H10 94\.75 %; every step 96\.60 %/);
  // Below the goal: not met, whatever another variant reached.
  assert.equal(target([byClass(localStepsVariant(10), 0.9389), byClass(localStepsVariant(5), 0.96)]).met, false);
  const missing = target([byClass(adamLocalStepsVariant(20), 0.99)]);
  assert.deepEqual([missing.value, missing.met, missing.detail], [null, false, 'no by-class run of H10']);
});

test('the break-even: every step is the better choice while the all-reduce over the compute is below (ρ − 1)/(1 − ρq/H)', () => {
  assert.equal(breakEvenRatio(1, 0.5, 20), null, 'local steps no worse per step: they always win');
  assert.ok(Math.abs(breakEvenRatio(1.5, 0.5, 20)! - 0.5 / (1 - 0.75 / 20)) < 1e-12);
  assert.equal(breakEvenRatio(50, 0.5, 20), Number.POSITIVE_INFINITY, 'local steps that need H/q times the steps never win');
  const splits = [
    { what: 'fast wired', source: 'x', n: 4, computeMs: 400, allReduceMs: 40 },
    { what: 'slow uplink', source: 'x', n: 4, computeMs: 400, allReduceMs: 3_000 },
  ];
  const [fast, slow] = crossover(splits, report().accuracy, 0.5);
  // At N = 4: H5 needs 1.1× every step's steps, H20 1.2×.
  assert.deepEqual(fast!.byH.map((b) => b.h), [5, 20]);
  assert.ok(Math.abs(fast!.r - 0.1) < 1e-12);
  assert.equal(fast!.everyStepBetter, true);
  assert.equal(slow!.everyStepBetter, false);
  assert.ok(Math.abs(slow!.byH[1]!.predictedRatio - 8.5 / (1.2 * (1 + (0.5 * 7.5) / 20))) < 1e-9);
});

test('non-IID: examples to each threshold (the screen below the run\'s threshold, all 10,000 at it) and the slowdown by class over at random', () => {
  const own = (data: 'own-by-class' | 'own-iid', variant: SyncVariant, points: Array<[number, number]>, crossedAt: number | null): AccuracyResult => {
    const base = acc(4, variant, crossedAt === null ? null : { examples: crossedAt, steps: 0, rounds: 0 }, 0.96, { config: { ...acc(4, variant, null, 0).config, secureAggregation: true, wire: 'fp32' } });
    return { ...base, plan: { ...base.plan, data, id: `${data} N=4 ${variant.id}`, everyStepAsOne: false }, points: points.map(([examples, screen]) => ({ examples, steps: 0, rounds: 0, epoch: 0, screen, full: null, wallSeconds: 0, cpuSeconds: 0 })) };
  };
  const lines = nonIid([
    acc(4, EVERY_STEP, null, 0.9),
    own('own-by-class', H20, [[6_000, 0.85], [12_000, 0.91], [30_000, 0.95]], null),
    own('own-iid', H20, [[6_000, 0.9], [12_000, 0.95]], 60_000),
  ]);
  assert.equal(lines.length, 2, 'the server\'s digits are not part of it');
  assert.deepEqual(lines[0]!.examplesTo.map((e) => e.examples), [12_000, 30_000, null]);
  assert.deepEqual(lines[1]!.examplesTo.map((e) => e.examples), [6_000, 12_000, 60_000]);
  assert.equal(examplesTo(own('own-iid', H20, [[6_000, 0.99]], null), 0.97), null, 'the threshold itself needs all 10,000 digits');
  const [text] = nonIidSlowdowns(lines);
  assert.match(text!, /^H20, by class against at random: 90 %: 2.00× the examples; 95 %: 2.50× the examples; 97 %: by class never within its 180,000 examples \(the other after 60,000, so more than 3.0× the examples\)/);
});

test('the report\'s markdown: the targets, the composed table with its regimes, and what was not measured', () => {
  const r = report({ errors: [{ what: 'wifi, N = 16, H5 window', message: 'no turn for 180000 ms\nmore' }] });
  r.targets = localStepsTargets(summarize(r));
  const md = localStepsMarkdown(r, { otherSplits: [{ what: 'wired-lab, N = 4 laptops', source: 'bench/lab.json', n: 4, computeMs: 340, allReduceMs: 490 }] });
  assert.match(md, /composed from measured parts/);
  assert.match(md, /\| local-steps-vs-sync-school-uplink \| .* \| yes \|/);
  assert.match(md, /\| school-uplink \| 4 \| H100 \| fp16 \| 41\.50 \(fit\) \|/);
  assert.match(md, /netem absent/);
  assert.match(md, /wired-lab, N = 4 laptops \| bench\/lab.json/);
  assert.match(md, /- wifi, N = 16, H5 window: no turn for 180000 ms\n/);
});

test('busy without the accuracy runs: their CPU over the window taken out of the machine\'s share', () => {
  assert.ok(Math.abs(busyWithout({ mean: 0.95, peak: 1, cores: 2, intervals: 4 }, 10, 20_000) - 0.7) < 1e-12);
  assert.equal(busyWithout({ mean: 0.1, peak: 1, cores: 2, intervals: 4 }, 10, 20_000), 0);
});

test('an accuracy run: the product\'s Trainer in-process on the official MNIST, equal shares among identical devices, scored as it goes', { timeout: 120_000 }, async () => {
  const plan: AccuracyPlan = { id: 'smoke', n: 2, variant: localStepsVariant(3), data: 'mnist', threshold: 0.97, defaultEpochs: 2, maxEpochs: 3, scoreEveryExamples: 300, screenStride: 50, screenMargin: 0.005, everyStepAsOne: true, maxExamples: 700 };
  const r = await runAccuracy(plan);
  assert.equal(r.stoppedBy, 'max-examples');
  assert.equal(r.error, null);
  assert.equal(r.config.wire, 'fp16', 'the product\'s default wire for rounds');
  assert.equal(r.epochExamples, 60_000);
  assert.deepEqual(r.lastShares, [96, 96], 'three local steps of 32 each: the balancer kept the shares equal');
  assert.ok(r.points.length >= 2);
  assert.equal(r.points.at(-1)!.rounds * 3, r.points.at(-1)!.steps);
  assert.ok(r.end.accuracy! > 0.5, `a few hundred digits already lift the MLP well above chance: ${r.end.accuracy}`);
  // Every step as one Trainer on the global batch: a step of 64.
  const one = await runAccuracy({ ...plan, id: 'smoke-es', variant: EVERY_STEP, maxExamples: 256 });
  assert.equal(one.points.at(-1)!.steps, 4);
  assert.equal(one.points.at(-1)!.examples, 256);
  assert.deepEqual(one.lastShares, [64]);
});
