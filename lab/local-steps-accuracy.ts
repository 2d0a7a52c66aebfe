/**
 * One in-process accuracy run of the lab (the local-steps section, lab/local-steps-rows.ts;
 * the class's time to accuracy, lab/class-lab.ts): N replicas of the product's own Trainer
 * train a lab workload (shared/tasks/lab-workloads.ts; the dense one unless the plan names
 * another) in this
 * process over the in-memory ring (test/support/memory-ring.ts), on the training split of
 * the lab's full dataset (60,000 examples), and rank 0's replica (every replica holds the
 * same bits after every turn) is scored on its 10,000 test examples as it goes. Accuracy
 * per example does not depend on the network: the lab times the same turns on the
 * emulated network, and the report composes the two (lab/local-steps-report.ts).
 *
 *   node --import tsx lab/local-steps-accuracy.ts '<AccuracyPlan as JSON>'
 *
 * - The config is the product's default start config of the dense workload with the plan's
 *   sync and localSteps, data 'own' for the own-data runs (which turns secure aggregation
 *   on, as a class's own data does by default), and `epochs` raised to the plan's cap so
 *   that the run may go on past the default run's end (nothing else reads it).
 * - The trainers measure time on a clock that stands still: the share balancer then sees
 *   N identical devices and keeps the shares equal, as it does for the lab's identical
 *   laptops, instead of following this one thread's order of work.
 * - Own data: each device's store holds its examples as the student's page would (features
 *   as the model takes them); a fifth of them stays out as the class's holdout, as on every device.
 * - Every step with `everyStepAsOne`: one Trainer on the global batch, which
 *   test/unit/equivalence.test.ts proves equal to N ring workers.
 */
import { selectNodeBackend } from '../node-worker/node-backend';
import { startConfigSchema } from '../shared/tasks/start-config';
import { LAB_DATASETS, LAB_TASK } from '../shared/tasks/lab-workloads';
import { featureCount, type LoadedDataset, type LoadedSplit } from '../shared/tasks/task';
import { loadDataset } from '../signaling-server/data/datasets';
import { createMemoryRing } from '../test/support/memory-ring';
import type { RingAllReduce } from '../shared/collectives/ring-allreduce';
import { createSecureMesh } from '../test/support/secure-ring';
import { Trainer } from '../shared/training/trainer';
import { inMemoryShards, type DataSource } from '../shared/data/data-source';
import { OwnDataSource } from '../shared/data/own-data';
import { MemoryOwnExamples, isHeldOut } from '../shared/data/own-examples';
import { ManualClock } from '../shared/util/clock';
import { type StartConfig } from '../shared/protocol';
import type { Collective } from '../shared/collectives/collective';
import { DONE_PREFIX, POINT_PREFIX, SERVER_DATA, classesOf, planConfig, iidDeviceOf, type AccuracyPlan, type AccuracyPoint, type AccuracyResult } from './local-steps-protocol';

/** What one example is, and how many features it has. */
const FORMAT = LAB_TASK.example;
const F = featureCount(FORMAT);

/** Test examples per forward pass. */
const SCORE_BATCH = 1_000;
/** Store keys of the own-data devices: fixed, so that the holdout (a function of key and seq) is the same every run. */
const STORE_KEY_BASE = 7_001;

interface TestSet {
  features: Float32Array;
  labels: Int32Array;
  count: number;
}

function testSet(bytes: Uint8Array, labels: Uint8Array, indices: number[]): TestSet {
  const features = new Float32Array(indices.length * F);
  const out = new Int32Array(indices.length);
  indices.forEach((idx, k) => {
    for (let p = 0; p < F; p++) features[k * F + p] = bytes[idx * F + p]! * FORMAT.byteScale;
    out[k] = labels[idx]!;
  });
  return { features, labels: out, count: indices.length };
}

async function score(trainer: Trainer, set: TestSet): Promise<number> {
  // Settles the last update: the replica then holds the class's weights.
  await trainer.weightsHash();
  let correct = 0;
  for (let start = 0; start < set.count; start += SCORE_BATCH) {
    const n = Math.min(SCORE_BATCH, set.count - start);
    const r = await trainer.replica.score({ features: set.features.subarray(start * F), labels: set.labels.subarray(start), n });
    correct += r.correct;
  }
  return correct / set.count;
}

function ownStores(train: LoadedSplit, plan: AccuracyPlan, seed: number): MemoryOwnExamples[] {
  const stores = Array.from({ length: plan.n }, (_, r) => new MemoryOwnExamples(STORE_KEY_BASE + r));
  const byClass = Array.from({ length: LAB_TASK.outputs.length }, () => 0);
  for (let r = 0; r < plan.n; r++) for (const c of classesOf(r, plan.n)) byClass[c] = r;
  for (let i = 0; i < train.count; i++) {
    const label = train.labels[i]!;
    const device = plan.data === 'own-by-class' ? byClass[label]! : iidDeviceOf(i, plan.n, seed);
    const features = new Float32Array(F);
    for (let p = 0; p < F; p++) features[p] = train.features[i * F + p]! * FORMAT.byteScale;
    stores[device]!.add(String(label), features);
  }
  return stores;
}

export async function runAccuracy(plan: AccuracyPlan, onPoint: (p: AccuracyPoint) => void = () => undefined): Promise<AccuracyResult> {
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  const seconds = () => ({ wallSeconds: (performance.now() - t0) / 1000, cpuSeconds: ((u) => (u.user + u.system) / 1e6)(process.cpuUsage(cpu0)) });
  // WebAssembly where it loads (SIMD: about 3× the CPU backend's step on the dense workload and 4.5× on
  // the conv one here, bench/wasm-cpu.md): accuracy per example is the maths', whichever backend runs it.
  const backend = (await selectNodeBackend(plan.backend ?? 'wasm')).backend;
  const { train, test } = await loadDataset(LAB_DATASETS.full);
  const all = Array.from({ length: test.count }, (_, i) => i);
  const full = testSet(test.features, test.labels, all);
  const screen = testSet(test.features, test.labels, all.filter((i) => i % plan.screenStride === 0));

  const own = plan.data !== SERVER_DATA;
  const config: StartConfig = startConfigSchema.parse(planConfig(plan));
  const asOne = plan.everyStepAsOne && plan.variant.sync === 'every-step' && !own;
  const clock = new ManualClock();
  let trainers: Trainer[];
  /** The ranks' engines: what they sent on their links. */
  let engines: RingAllReduce[];
  let epochExamples: number;
  if (own) {
    const stores = ownStores(train, plan, config.seed);
    epochExamples = stores.reduce((s, st) => s + st.examples.filter((e) => !isHeldOut(st.key, e.seq)).length, 0);
    const mesh = config.secureAggregation ? createSecureMesh(plan.n) : null;
    engines = mesh?.rings ?? createMemoryRing(plan.n).rings;
    const collectives: Collective[] = mesh?.secure ?? engines;
    trainers = collectives.map((c, r) => new Trainer(config, new OwnDataSource(config, stores[r]!), c, { clock }));
  } else {
    // The training split alone: the test below is the run's evaluation.
    const dataset: LoadedDataset = { train, test: { count: 0, labels: new Uint8Array(0), features: new Uint8Array(0) } };
    epochExamples = train.count;
    const one = asOne ? { ...config, batchSizePerWorker: config.batchSizePerWorker * plan.n } : config;
    const sources: DataSource[] = Array.from({ length: asOne ? 1 : plan.n }, () => inMemoryShards(one, dataset, FORMAT));
    engines = createMemoryRing(sources.length).rings;
    trainers = engines.map((ring, r) => new Trainer(one, sources[r]!, ring, { clock }));
  }
  const chief = trainers[0]!;
  const result: AccuracyResult = {
    plan,
    config: {
      model: config.model,
      scaleLearningRate: config.scaleLearningRate,
      sync: config.sync,
      localSteps: config.localSteps,
      wire: config.wire,
      secureAggregation: config.secureAggregation,
      batchSizePerWorker: config.batchSizePerWorker,
      learningRate: config.learningRate,
      optimizer: config.optimizer,
      warmupSteps: config.warmupSteps,
      balanceShares: config.balanceShares,
      outerOptimizer: config.outerOptimizer,
      outerLearningRate: config.outerLearningRate,
      outerMomentum: config.outerMomentum,
      localOptimizer: config.localOptimizer,
      localLearningRate: config.localLearningRate,
      localCorrection: config.localCorrection,
      powerSgdRank: config.powerSgdRank,
      sumWordBits: config.sumWordBits,
      seed: config.seed,
    },
    epochExamples,
    points: [],
    crossed: null,
    defaultRun: null,
    end: { examples: 0, steps: 0, rounds: 0, accuracy: null },
    stoppedBy: 'max-epochs',
    error: null,
    bytesPerExample: null,
    lastShares: [],
    backend,
    wallSeconds: 0,
    cpuSeconds: 0,
  };
  let examples = 0;
  let scoredAt = 0;
  let before: { examples: number; steps: number; rounds: number } | null = null;
  try {
    // A new ring's first act: the chief's state to everyone (and own data's roster agreed).
    await Promise.all(trainers.map((t) => t.syncState()));
    while (!chief.finished) {
      const results = await Promise.all(trainers.map((t) => t.trainStep()));
      // The run's own end-of-epoch evaluation is the test below, on the full dataset's test split.
      for (const t of trainers) t.pendingEvaluation = null;
      const r = results[0]!;
      examples += r.globalBatchSize;
      if (results.every((x) => x.globalBatchSize > 0) && !r.epochEnd) result.lastShares = results.map((x) => x.examples);
      if (!Number.isFinite(r.loss)) {
        result.stoppedBy = 'diverged';
        result.error = `the loss is not finite after step ${chief.step}`;
        break;
      }
      const epoch = chief.dataCursor.epoch;
      const defaultEnd = result.defaultRun === null && epoch >= plan.defaultEpochs;
      const capped = plan.maxExamples !== undefined && examples >= plan.maxExamples;
      if (!defaultEnd && !r.epochEnd && !chief.finished && !capped && examples - scoredAt < plan.scoreEveryExamples) continue;
      scoredAt = examples;
      const s = await score(chief, screen);
      const wantFull = defaultEnd || chief.finished || capped || s >= plan.threshold - plan.screenMargin;
      const f = wantFull ? await score(chief, full) : null;
      const point: AccuracyPoint = { examples, steps: chief.step, rounds: chief.round, epoch, screen: s, full: f, ...seconds() };
      result.points.push(point);
      onPoint(point);
      const at = { examples, steps: chief.step, rounds: chief.round };
      if (defaultEnd) result.defaultRun = { ...at, accuracy: f! };
      if (result.crossed === null && f !== null && f >= plan.threshold) result.crossed = { ...at, accuracy: f, before };
      if (result.crossed === null) before = at;
      result.end = { ...at, accuracy: f };
      if (result.crossed !== null && result.defaultRun !== null) {
        result.stoppedBy = 'crossed';
        break;
      }
      if (capped) {
        result.stoppedBy = 'max-examples';
        break;
      }
    }
  } catch (err) {
    result.stoppedBy = 'error';
    result.error = (err as Error).message;
  } finally {
    await Promise.all(trainers.map((t) => t.dispose()));
  }
  // What one rank sent on its links, on average, per example the class trained (none when one replica stands for the class).
  if (engines.length > 1 && examples > 0) result.bytesPerExample = engines.reduce((b, e) => b + e.stats.bytesSent, 0) / engines.length / examples;
  Object.assign(result, seconds());
  return result;
}

async function main(): Promise<void> {
  const arg = process.argv[2];
  if (!arg) throw new Error("usage: node --import tsx lab/local-steps-accuracy.ts '<AccuracyPlan as JSON>'");
  const plan = JSON.parse(arg) as AccuracyPlan;
  const result = await runAccuracy(plan, (p) => process.stdout.write(`${POINT_PREFIX}${JSON.stringify(p)}\n`));
  process.stdout.write(`${DONE_PREFIX}${JSON.stringify(result)}\n`);
}

if (process.argv[1]?.endsWith('local-steps-accuracy.ts')) {
  main().catch((err: unknown) => {
    process.stderr.write(`local-steps-accuracy: ${(err as Error).stack ?? String(err)}\n`);
    process.exit(1);
  });
}
