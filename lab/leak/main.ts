/**
 * `npm run leak`: the lesson in why secure aggregation exists. Three students train the
 * dense workload (shared/tasks/lab-workloads.ts) on the lab's small dataset for one real
 * step on real drawings over in-memory links (the same collectives the tabs
 * run); everything student 1 sends is recorded, and a curious ring neighbour, halving-
 * doubling partner and hub each run the gradient-leakage attack (attack.ts) on what they
 * received from it, at shares of 1, 4 and 32 examples. Then again with secure aggregation
 * on: what they receive is noise. And the retry attack (retry.ts): a failed secure step's
 * sum minus the redo's, which the fix makes nothing. Writes bench/leak.{json,md} and the pictures in
 * docs/privacy/ (originals beside what each receiver reads back).
 *
 * The threshold: a reconstruction identifies a drawing when it is closer to it (cosine
 * over the pixels seen) than the drawing's nearest other drawing among 2,000 of the same set
 * is: then what leaked singles out that one drawing, not merely its class.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as tf from '@tensorflow/tfjs';
import type { Algorithm } from '../../shared/protocol';
import { startConfigSchema } from '../../shared/tasks/start-config';
import { LAB_WORKLOADS } from '../../shared/tasks/lab-workloads';
import { featureCount, type LoadedDataset } from '../../shared/tasks/task';
import { Trainer } from '../../shared/training/trainer';
import { inMemoryShards } from '../../shared/data/data-source';
import { COLLECTIVE_TAG, type Collective } from '../../shared/collectives/collective';
import { loadDataset } from '../../signaling-server/data/datasets';
import { createMemoryMesh } from '../../test/support/memory-ring';
import { memberIds, relayedDirectories, secureOver } from '../../test/support/secure-ring';
import { DENSE_LAYER, bestMatches, cosine, denseCandidates, toGray } from './attack';
import { VANTAGES, ownValuesSeen, type Vantage } from './views';
import { RETRY_N, RETRY_VICTIM, recordRetry } from './retry';
import { PNG } from 'pngjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
/** The model attacked, the examples it trains on, and what one of them is: a grey image of the task's shape. */
const WORKLOAD = LAB_WORKLOADS.dense;
const DATASET = WORKLOAD.datasets.small;
const FORMAT = WORKLOAD.task.example;
const PIXELS = featureCount(FORMAT);
const [IMAGE_ROWS, IMAGE_COLS, CHANNELS = 1] = FORMAT.shape as [number, number, number?];
const N = 3;
const VICTIM = 1;
const RECORDED_STEP = 1;
const SHARES = [1, 4, 32] as const;
const ALGORITHM_OF: Record<Vantage, Algorithm> = { 'ring neighbour': 'ring', 'halving-doubling partner': 'halving-doubling', hub: 'hub' };
/** Drawings each original is compared with for the threshold (its nearest stranger). */
const STRANGERS = 2_000;
/** Originals drawn in the pictures, per share. */
const PICTURED = 4;
const ZOOM = 3;
const GAP = 4;

export interface LeakRow {
  share: number;
  vantage: Vantage;
  secure: boolean;
  /** Fraction of the buffer the receiver saw of this student's own values. */
  seenFraction: number;
  /** The student's examples singled out: closer to a reconstruction than to any stranger. */
  identified: number;
  examples: number;
  meanSimilarity: number;
}

interface Recorded {
  /** The victim's outgoing gradient messages. */
  sent: Uint8Array[];
  /** Its examples in the step, as pixels 0..1. */
  originals: Float32Array[];
  length: number;
}

/** One real step of three trainers on `algorithm`; what student VICTIM sent, and its examples. */
async function recordStep(dataset: LoadedDataset, share: number, algorithm: Algorithm, secure: boolean): Promise<Recorded> {
  const config = startConfigSchema.parse({ ...WORKLOAD.config, dataset: DATASET.id, batchSizePerWorker: share, balanceShares: false, allreduce: algorithm, seed: 7, secureAggregation: secure, data: 'dataset' });
  const mesh = createMemoryMesh(N, { hub: true });
  const ids = memberIds(N);
  const collectives: Collective[] = secure ? secureOver(mesh.rings, ids, relayedDirectories(ids), 1).secure : mesh.rings;
  const sent: Uint8Array[] = [];
  const keep = (bytes: Uint8Array) => {
    if (bytes[2] === COLLECTIVE_TAG.gradients) sent.push(bytes.slice());
  };
  const outgoing = [...mesh.links[VICTIM]!.filter((_, to) => to !== VICTIM), mesh.hub!.up[VICTIM]!];
  for (const link of outgoing) {
    const deliver = link.deliver;
    link.deliver = (bytes) => {
      keep(bytes);
      deliver(bytes);
    };
  }
  const originals: Float32Array[] = [];
  const trainers = collectives.map((c, r) => {
    const data = inMemoryShards(config, dataset, FORMAT);
    if (r === VICTIM) {
      const read = data.readShard.bind(data);
      data.readShard = async (batch, rank, features, labels) => {
        const n = await read(batch, rank, features, labels);
        for (let e = 0; e < n; e++) originals.push(features.slice(e * PIXELS, (e + 1) * PIXELS));
        return n;
      };
    }
    return new Trainer(config, data, c);
  });
  // The first step takes the ring while the class votes its mesh and hub links open; the
  // second takes `algorithm`. Every receiver's record is of that same second step.
  for (let step = 0; step < RECORDED_STEP + 1; step++) {
    sent.length = 0;
    originals.length = 0;
    const results = await Promise.all(trainers.map((t) => t.trainStep({ meshReady: true, hubReady: true })));
    if (step === RECORDED_STEP && results[0]!.algorithm !== algorithm) throw new Error(`step ${step} took ${results[0]!.algorithm}, not ${algorithm}`);
  }
  const length = trainers[0]!.parameterCount + (secure ? 1 : 0) + (trainers[0]! as unknown as { tail: { length: number } }).tail.length;
  await Promise.all(trainers.map((t) => t.dispose()));
  return { sent, originals, length };
}

/** Each original's best similarity to any of STRANGERS other drawings of the training split. */
function nearestStrangers(dataset: LoadedDataset, originals: readonly Float32Array[]): number[] {
  const others: Float32Array[] = [];
  for (let i = 0; others.length < STRANGERS && i < dataset.train.count; i += 3) {
    others.push(Float32Array.from(dataset.train.features.subarray(i * PIXELS, (i + 1) * PIXELS), (p) => p * FORMAT.byteScale));
  }
  return originals.map((x) => Math.max(...others.filter((o) => cosine(o, x) < 0.999_999).map((o) => cosine(o, x))));
}

function picture(columns: Float32Array[][]): { png: Buffer; width: number; height: number } {
  const rows = columns[0]!.length;
  const cellWidth = IMAGE_COLS * ZOOM;
  const cellHeight = IMAGE_ROWS * ZOOM;
  const width = columns.length * (cellWidth + GAP) + GAP;
  const height = rows * (cellHeight + GAP) + GAP;
  const pixels = new Uint8Array(width * height).fill(255);
  columns.forEach((column, c) =>
    column.forEach((image, r) => {
      const gray = toGray(image);
      for (let y = 0; y < cellHeight; y++) {
        for (let x = 0; x < cellWidth; x++) {
          pixels[(GAP + r * (cellHeight + GAP) + y) * width + GAP + c * (cellWidth + GAP) + x] = gray[Math.floor(y / ZOOM) * IMAGE_COLS + Math.floor(x / ZOOM)]!;
        }
      }
    }),
  );
  const png = new PNG({ width, height });
  pixels.forEach((v, i) => png.data.set([v, v, v, 255], i * 4));
  return { png: PNG.sync.write(png, { colorType: 0 }), width, height };
}

async function main(): Promise<void> {
  // Read before this run writes its pictures into the tree.
  const made = provenance();
  await tf.setBackend('cpu');
  if (FORMAT.shape.length !== 3 || CHANNELS !== 1 || DENSE_LAYER.inputs !== PIXELS) {
    throw new Error(`the leak demo pictures grey images read back from a dense first layer: the ${WORKLOAD.name} takes examples of shape [${FORMAT.shape.join(', ')}]`);
  }
  const dataset = await loadDataset(DATASET);
  const rows: LeakRow[] = [];
  for (const share of SHARES) {
    const columns: Float32Array[][] = [];
    let originalsShown: Float32Array[] = [];
    for (const secure of [false, true]) {
      for (const vantage of VANTAGES) {
        const { sent, originals, length } = await recordStep(dataset, share, ALGORITHM_OF[vantage], secure);
        const seen = ownValuesSeen(sent, vantage, VICTIM, N);
        if (seen === null) throw new Error(`${vantage} receives no lone values from rank ${VICTIM} of ${N}`);
        if (seen.length !== length) throw new Error(`${vantage}: a length of ${seen.length} read from the messages, the buffer has ${length}`);
        const strangers = nearestStrangers(dataset, originals);
        const matches = bestMatches(originals, denseCandidates(seen, DENSE_LAYER));
        const identified = matches.filter((m, i) => m.similarity > strangers[i]!).length;
        const finite = seen.reduce((a, v) => a + (Number.isFinite(v) ? 1 : 0), 0);
        rows.push({
          share,
          vantage,
          secure,
          seenFraction: finite / length,
          identified,
          examples: originals.length,
          meanSimilarity: matches.reduce((a, m) => a + m.similarity, 0) / matches.length,
        });
        console.log(`share ${share}, ${vantage}${secure ? ', secure' : ''}: ${identified} of ${originals.length} drawings identified, mean similarity ${rows.at(-1)!.meanSimilarity.toFixed(3)} (nearest stranger ${(strangers.reduce((a, b) => a + b, 0) / strangers.length).toFixed(3)}), ${(100 * finite / length).toFixed(0)} % of the buffer seen`);
        originalsShown = originals.slice(0, PICTURED);
        if (!secure || vantage === 'hub') {
          columns.push(matches.slice(0, PICTURED).map((m) => m.candidate?.pixels ?? new Float32Array(PIXELS).fill(Number.NaN)));
        }
      }
    }
    const { png } = picture([originalsShown, ...columns]);
    const out = join(ROOT, 'docs', 'privacy', `leak-${WORKLOAD.model}-share${share}.png`);
    mkdirSync(dirname(out), { recursive: true });
    writeFileSync(out, png);
  }
  const retries: RetryRow[] = [];
  for (const share of SHARES) {
    const config = startConfigSchema.parse({ ...WORKLOAD.config, dataset: DATASET.id, batchSizePerWorker: share, balanceShares: false, allreduce: 'ring', seed: 7, secureAggregation: true, data: 'dataset' });
    const { sum, difference, redoSummed, originals } = await recordRetry(config, (rank, record) => {
      const data = inMemoryShards(config, dataset, FORMAT);
      if (record) {
        const read = data.readShard.bind(data);
        data.readShard = async (batch, r, features, labels) => {
          const n = await read(batch, r, features, labels);
          for (let e = 0; e < n; e++) record(features.slice(e * PIXELS, (e + 1) * PIXELS));
          return n;
        };
      }
      return data;
    });
    const strangers = nearestStrangers(dataset, originals);
    const fromSum = bestMatches(originals, denseCandidates(sum, DENSE_LAYER)).map((m, i) => m.similarity > strangers[i]!);
    const matches = bestMatches(originals, denseCandidates(difference, DENSE_LAYER));
    const fromDifference = matches.map((m, i) => m.similarity > strangers[i]!);
    const row: RetryRow = {
      share,
      examples: originals.length,
      redoSummed,
      identifiedFromSum: fromSum.filter(Boolean).length,
      identified: fromDifference.filter(Boolean).length,
      beyondSum: fromDifference.filter((hit, i) => hit && !fromSum[i]).length,
      meanSimilarity: matches.reduce((a, m) => a + m.similarity, 0) / matches.length,
    };
    retries.push(row);
    console.log(`share ${share}, retry attack (spoiled check word, eviction), secure: the redo ${redoSummed ? 'summed' : 'summed nothing'}; ${row.identified} of ${row.examples} drawings identified from the difference, ${row.identifiedFromSum} from the step's sum alone, ${row.beyondSum} beyond it`);
  }
  writeReport(made, rows, retries);
}

/** The retry attack (retry.ts) on one share. */
export interface RetryRow {
  share: number;
  examples: number;
  /** Whether the redo summed anything (it must not: the failed turn is skipped). */
  redoSummed: boolean;
  /** The victim's drawings identified from the failed step's sum: the class's sum, which every member holds of every step. */
  identifiedFromSum: number;
  /** Identified from the difference of the two sums. */
  identified: number;
  /** Identified from the difference and not from the sum: what the retry attack adds. */
  beyondSum: number;
  meanSimilarity: number;
}

/** When, on which commit (and whether the tree had changes), with which versions: the report's first line. */
function provenance(): { when: string; commit: string; versions: { node: string; tfjs: string } } {
  const git = (...args: string[]) => execFileSync('git', args, { cwd: ROOT, encoding: 'utf8' }).trim();
  const dirty = git('status', '--porcelain', '--untracked-files=no') !== '';
  const commit = git('rev-parse', '--short', 'HEAD');
  return { when: new Date().toISOString(), commit: dirty ? `${commit} with uncommitted changes` : commit, versions: { node: process.version, tfjs: tf.version['tfjs-core'] } };
}

function writeReport(made: ReturnType<typeof provenance>, rows: LeakRow[], retries: RetryRow[]): void {
  mkdirSync(join(ROOT, 'bench'), { recursive: true });
  writeFileSync(join(ROOT, 'bench', 'leak.json'), `${JSON.stringify({ ...made, n: N, victim: VICTIM, model: WORKLOAD.model, rows, retry: { n: RETRY_N, victim: RETRY_VICTIM, rows: retries } }, null, 2)}\n`);
  const lines = [
    `# What one step leaks of a student's drawings (${WORKLOAD.name}, ${N} students, \`npm run leak\`)`,
    '',
    `${made.when}, commit ${made.commit}, Node ${made.versions.node}, tfjs ${made.versions.tfjs}; one process on the CPU backend, in-memory links, seed 7.`,
    '',
    '| share | receiver | secure aggregation | buffer seen | drawings identified | mean similarity |',
    '|---|---|---|---|---|---|',
    ...rows.map((r) => `| ${r.share} | ${r.vantage} | ${r.secure ? 'on' : 'off'} | ${(100 * r.seenFraction).toFixed(0)} % | ${r.identified} of ${r.examples} | ${r.meanSimilarity.toFixed(3)} |`),
    '',
    `## The retry attack (${RETRY_N} students, secure aggregation on)`,
    '',
    'A student spoils the check word of a secure step, so it holds the failed sum of all four; it has a classmate evicted, and subtracts the sum of the redo. Before issue 38 that difference was the evicted classmate\'s gradient; now the failed step is skipped and the redo sums nothing, so the difference is the step\'s sum, which every member holds of every step anyway. "From the sum" is that baseline: what the class\'s sum of four shares gives away by itself (the sum is public, by design).',
    '',
    '| share | the redo summed | identified from the difference | from the sum alone | beyond the sum |',
    '|---|---|---|---|---|',
    ...retries.map((r) => `| ${r.share} | ${r.redoSummed ? 'yes' : 'nothing'} | ${r.identified} of ${r.examples} | ${r.identifiedFromSum} of ${r.examples} | ${r.beyondSum} |`),
    '',
  ];
  writeFileSync(join(ROOT, 'bench', 'leak.md'), lines.join('\n'));
}

await main();
