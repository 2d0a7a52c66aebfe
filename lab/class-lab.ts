/**
 * `npm run lab -- --class`: the class's questions in one run, side by side (issue 16).
 *
 *  1. scaling: examples/s and step time of N = 1, 2, 4 and 8 laptops, the dense and the conv
 *     workload (shared/tasks/lab-workloads.ts), on wired-lab and wifi, allreduce 'auto'
 *     (lab/training-rows.ts);
 *  2. time to accuracy: the conv model on wired-lab from scratch to 97 % on the official test set,
 *     N = 1, 2, 4 and 8, with and without scaleLearningRate (lab/tta-rows.ts);
 *  3. the mixed class: three laptops and a phone, with and without balanceShares
 *     (lab/mixed-class.ts);
 *  4. joins: the class's pause and the joiner's time to lock-step at N = 4 and 8
 *     (lab/join-rows.ts).
 *
 * Each row builds its own lab (a lab's CPU caps stay booked until it is removed) and is
 * checked against the machine first (lab/cpu-budget.ts). A row that fails is recorded with
 * its coded error and the run goes on with the next; the report is handed out after every
 * row, so a long run that dies late keeps what it measured.
 */
import os from 'node:os';
import { defaultConfigOf } from '../shared/tasks/start-config';
import { LAB_WORKLOADS, labWorkloadOf } from '../shared/tasks/lab-workloads';
import { globalBatchSize } from '../shared/data/batch-plan';
import { LabError } from './lab-error';
import { withLab } from './netlab';
import { CFS_PERIOD_US, type DeviceProfile } from './cpu-caps';
import { cpuBudget, RESERVED_CORES } from './cpu-budget';
import type { ModelName, ModelProfile } from './network-models';
import type { LabCapabilities } from './preconditions';
import { TRAINING_ROW_OPTIONS, trainingRow, type TrainingNet, type TrainingRow, type TrainingRowOptions } from './training-rows';
import { mixedClassRows } from './mixed-class';
import { CheckpointScorer, timeToAccuracyRow } from './tta-rows';
import { joinRow } from './join-rows';
import { classTargets, scalingTable, timeSplit, whereTimeGoes } from './class-report';
import type { ClassReport, ClassSection, JoinRow, TtaRow } from './report-types';
import { progress } from './progress';

export interface ClassPlan {
  quick: boolean;
  /** The sections to run (`--only`); all of them by default. */
  sections?: readonly ClassSection[];
  scaling: { networks: ModelName[]; nets: TrainingNet[]; ns: number[]; options: Record<TrainingNet, TrainingRowOptions> };
  timeToAccuracy: { network: ModelName; net: TrainingNet; ns: number[]; scalings: boolean[]; threshold: number; screenMargin: number; budgetMs: number; saveEverySteps: number };
  mixed: boolean;
  joins: { network: ModelName; net: TrainingNet; ns: number[]; repetitions: number; warmupSteps: number; settleSteps: number };
}

const DENSE = LAB_WORKLOADS.dense.model;
const CONV = LAB_WORKLOADS.conv.model;

/** The measurement: about 75 minutes, at most about two and a half hours (docs/lab.md). */
export const FULL_CLASS_PLAN: ClassPlan = {
  quick: false,
  scaling: { networks: ['wired-lab', 'wifi'], nets: [DENSE, CONV], ns: [1, 2, 4, 8], options: TRAINING_ROW_OPTIONS },
  // 97 % on the official test set. One laptop trains the conv model at about 1 s a step, and one
  // epoch (1,875 steps) scores 98.4 % (`npm run bench:epoch`): 15 minutes give it a fair chance.
  // A checkpoint every 10 steps is one every 10-15 s.
  timeToAccuracy: { network: 'wired-lab', net: CONV, ns: [1, 2, 4, 8], scalings: [false, true], threshold: 0.97, screenMargin: 0.02, budgetMs: 15 * 60_000, saveEverySteps: 10 },
  mixed: true,
  joins: { network: 'wired-lab', net: DENSE, ns: [4, 8], repetitions: 3, warmupSteps: 10, settleSteps: 10 },
};

/**
 * A smoke test of every path, in about 5 minutes: N = 1 and 2, the dense model, short
 * windows, an 85 % threshold it reaches in a minute, one join at N = 2, no mixed class (it
 * needs four devices). Its figures are not the measurement.
 */
export const QUICK_CLASS_PLAN: ClassPlan = {
  quick: true,
  scaling: { networks: ['wired-lab'], nets: [DENSE], ns: [1, 2], options: { ...TRAINING_ROW_OPTIONS, [DENSE]: { warmupSteps: 3, windowSeconds: 5, minSteps: 3 } } },
  timeToAccuracy: { network: 'wired-lab', net: DENSE, ns: [1, 2], scalings: [false, true], threshold: 0.85, screenMargin: 0.03, budgetMs: 75_000, saveEverySteps: 10 },
  mixed: false,
  joins: { network: 'wired-lab', net: DENSE, ns: [2], repetitions: 1, warmupSteps: 5, settleSteps: 5 },
};

/** Throws ERR_LAB_CPU_OVERCOMMIT when `devices` and the reserved share do not fit the machine. */
function assertFits(devices: DeviceProfile[], what: string): void {
  const b = cpuBudget(devices, os.availableParallelism());
  if (!b.fits) {
    throw new LabError(
      'ERR_LAB_CPU_OVERCOMMIT',
      `${what}: ${devices.length} devices capped at ${b.capsCores.toFixed(2)} cores and ${b.reservedCores} kept for the server and its hub exceed the machine's ${b.cores} cores`,
    );
  }
}

/** The sizes a plan runs, for the CPU check before anything is measured. */
function largestClass(plan: ClassPlan): number {
  return Math.max(...plan.scaling.ns, ...plan.timeToAccuracy.ns, ...plan.joins.ns, plan.mixed ? 4 : 0);
}

/**
 * The full plan cut to `sections` and, where given, to the class sizes `ns` (`--only`,
 * `--ns`): re-measuring one section, or one size, without an hour of the others.
 */
export function narrowPlan(plan: ClassPlan, sections: readonly ClassSection[] | null, ns: readonly number[] | null): ClassPlan {
  const keep = (xs: number[]) => (ns ? xs.filter((n) => ns.includes(n)) : xs);
  return {
    ...plan,
    sections: sections ?? plan.sections,
    scaling: { ...plan.scaling, ns: keep(plan.scaling.ns) },
    timeToAccuracy: { ...plan.timeToAccuracy, ns: keep(plan.timeToAccuracy.ns) },
    joins: { ...plan.joins, ns: keep(plan.joins.ns) },
  };
}

const laptops = (n: number): DeviceProfile[] => Array.from({ length: n }, () => 'laptop' as const);

/**
 * Runs `plan` section by section; `onSection` gets the report so far after each row (and
 * the final report is returned). `profiles` are the lab's rates per network model.
 */
export async function runClassLab(plan: ClassPlan, profiles: Record<ModelName, ModelProfile>, capabilities: LabCapabilities, onSection: (report: ClassReport) => void): Promise<ClassReport> {
  const startedAt = Date.now();
  const largest = largestClass(plan);
  const report: ClassReport = {
    generatedAt: new Date().toISOString(),
    machine: { cores: os.availableParallelism(), kernel: os.release(), node: process.versions.node },
    quick: plan.quick,
    minutes: 0,
    cpuBudget: cpuBudget(laptops(largest), os.availableParallelism(), RESERVED_CORES),
    sectionMinutes: {},
    sectionCfsPeriodUs: {},
    scaling: null,
    timeToAccuracy: null,
    mixed: null,
    joins: null,
    errors: [],
    targets: [],
  };
  // Before an hour of rows: the largest class must fit (8 laptops: 1.6 + 0.4 = 2 cores here).
  assertFits(laptops(largest), `the largest class (${largest} laptops)`);
  const finish = () => {
    report.minutes = (Date.now() - startedAt) / 60_000;
    report.targets = classTargets(report);
    onSection(report);
  };
  const record = (name: ClassSection, err: unknown) => {
    const code = err instanceof LabError ? err.code : 'ERR_UNEXPECTED';
    progress(`${name}: could not be measured: ${code}: ${(err as Error).stack ?? (err as Error).message}`);
    report.errors.push({ section: name, code, message: (err as Error).message });
  };
  const section = async (name: ClassSection, run: () => Promise<void>) => {
    if (plan.sections && !plan.sections.includes(name)) return;
    const t0 = Date.now();
    try {
      await run();
    } catch (err) {
      record(name, err);
    }
    report.sectionMinutes[name] = (Date.now() - t0) / 60_000;
    report.sectionCfsPeriodUs![name] = CFS_PERIOD_US;
    finish();
  };
  /** One row; a row that fails is recorded and the section goes on with the next. */
  const attempt = async <T>(name: ClassSection, run: () => Promise<T>): Promise<T | null> => {
    try {
      return await run();
    } catch (err) {
      record(name, err);
      return null;
    }
  };

  // Joins first: a server without the join telemetry fails in a minute, not after the rest.
  await section('joins', async () => {
    const j = plan.joins;
    const rows: JoinRow[] = [];
    report.joins = { rows };
    for (const n of j.ns) {
      assertFits(laptops(n), `joins at N = ${n}`);
      const r = await attempt('joins', () =>
        withLab(profiles[j.network], n, (lab) => joinRow(lab, { net: j.net, n, repetitions: j.repetitions, hub: true, warmupSteps: j.warmupSteps, settleSteps: j.settleSteps }), capabilities),
      );
      if (r) rows.push(r);
      finish();
    }
  });

  await section('scaling', async () => {
    const sc = plan.scaling;
    const rows: TrainingRow[] = [];
    const update = () => {
      const table = scalingTable(rows);
      const splits = rows.map((r) => {
        const split = timeSplit(r, r.n > 1 ? profiles[r.model] : null);
        return { model: r.model, net: r.net, n: r.n, split, sentence: whereTimeGoes(r, table.find((e) => e.net === r.net && e.n === r.n && e.model === r.model), split) };
      });
      report.scaling = { rows, table, splits };
    };
    // One device sends nothing: measured once, on the first network.
    const rowOf = async (network: ModelName, net: TrainingNet, n: number) => {
      assertFits(laptops(n), `scaling at N = ${n}`);
      const r = await attempt('scaling', () => withLab(profiles[network], n, (lab) => trainingRow(lab, net, 'laptop', { ...sc.options[net], n, hub: n > 1 }), capabilities));
      if (r) rows.push(r);
      update();
      finish();
    };
    for (const net of sc.nets) if (sc.ns.includes(1)) await rowOf(sc.networks[0]!, net, 1);
    for (const network of sc.networks) {
      for (const net of sc.nets) {
        for (const n of sc.ns.filter((x) => x > 1)) await rowOf(network, net, n);
      }
    }
  });

  if (plan.mixed) {
    await section('mixed', async () => {
      report.mixed = await mixedClassRows(profiles['wired-lab'], capabilities);
    });
  }

  await section('timeToAccuracy', async () => {
    const t = plan.timeToAccuracy;
    const rows: TtaRow[] = [];
    report.timeToAccuracy = { threshold: t.threshold, budgetMs: t.budgetMs, screenMargin: t.screenMargin, rows };
    // The recipe the rows start: the defaults of the net's task.
    const defaults = defaultConfigOf(labWorkloadOf(t.net).task.id);
    const scorer = await CheckpointScorer.start();
    try {
      for (const n of t.ns) {
        assertFits(laptops(n), `time to accuracy at N = ${n}`);
        for (const scaleLearningRate of t.scalings) {
          // Scaling multiplies the rate by globalBatch / referenceBatch: 1 when they are equal, so the row without it stands for both.
          if (scaleLearningRate && t.scalings.includes(false) && globalBatchSize(defaults.batchSizePerWorker, n) === defaults.referenceBatch) continue;
          const rowPlan = { net: t.net, n, scaleLearningRate, threshold: t.threshold, screenMargin: t.screenMargin, budgetMs: t.budgetMs, saveEverySteps: t.saveEverySteps, hub: n > 1 };
          const r = await attempt('timeToAccuracy', () => withLab(profiles[t.network], n, (lab) => timeToAccuracyRow(lab, rowPlan, scorer), capabilities));
          if (r) rows.push(r);
          finish();
        }
      }
    } finally {
      await scorer.close();
    }
  });

  report.minutes = (Date.now() - startedAt) / 60_000;
  report.targets = classTargets(report);
  return report;
}
