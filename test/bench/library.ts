/**
 * `npm run bench:library`: what the library costs a step at N = 1, against plain tfjs. One
 * model (an MLP of 784 → 128 → 10, softmax cross-entropy, SGD), one synthetic dataset of
 * 4,096 examples, a batch of 64, on the CPU backend; first model.fitDataset in this
 * process, then webring's fitDataset with one member on an embedded server, its maths in a
 * compute thread (the default) and in this thread. Each is timed from its first step to its
 * last; the library's start (join, description, counting the dataset) is reported apart.
 * Writes bench/library.json and bench/library.md: when, the commit, the versions, the
 * settings and the regime.
 */
import * as tf from '@tensorflow/tfjs';
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import { startServer } from '../../signaling-server/library';
import { fitDataset, joinRoom, type ComputePlace } from '../../node-worker/library';

const EXAMPLES = 4_096;
const BATCH = 64;
const EPOCHS = 2;
const FEATURES = 784;
const CLASSES = 10;
const STEPS = (EXAMPLES / BATCH) * EPOCHS;

const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], { encoding: 'utf8' }).trim() !== '';

function model(): tf.LayersModel {
  const m = tf.sequential({ layers: [tf.layers.dense({ inputShape: [FEATURES], units: 128, activation: 'relu', kernelInitializer: tf.initializers.glorotUniform({ seed: 1 }) }), tf.layers.dense({ units: CLASSES, activation: 'softmax', kernelInitializer: tf.initializers.glorotUniform({ seed: 2 }) })] });
  m.compile({ optimizer: tf.train.sgd(0.05), loss: 'categoricalCrossentropy' });
  return m;
}

function examples(): tf.data.Dataset<tf.TensorContainer> {
  return tf.data.array(Array.from({ length: EXAMPLES }, (_, i) => i)).map((i) => {
    const n = i as number;
    return { xs: tf.tensor1d(Array.from({ length: FEATURES }, (_, p) => ((n * 31 + p * 7) % 255) / 255)), ys: tf.oneHot(n % CLASSES, CLASSES) };
  });
}

async function plain(): Promise<number> {
  const m = model();
  let first = 0;
  let last = 0;
  await m.fitDataset(examples().batch(BATCH) as unknown as tf.data.Dataset<tf.TensorContainerObject>, {
    epochs: EPOCHS,
    verbose: 0,
    callbacks: { onBatchEnd: async () => void (first ||= performance.now(), (last = performance.now())) },
  });
  m.dispose();
  // From the first step's end to the last's: STEPS − 1 steps.
  return (last - first) / (STEPS - 1);
}

async function library(place: ComputePlace): Promise<{ msPerStep: number; startMs: number; steps: number }> {
  const server = await startServer({ host: '127.0.0.1', logLevel: 'silent' });
  const room = `bench-${place}`;
  const t0 = performance.now();
  const member = await joinRoom({ url: server.url, room, code: server.joinCode(room), name: 'bench', backend: 'cpu', compute: place, teacherToken: server.teacherToken });
  const m = model();
  let first = 0;
  let last = 0;
  let batches = 0;
  await fitDataset(member, m, examples(), { epochs: EPOCHS, batchSize: BATCH, resumeFrom: 'none', saveEverySteps: 1_000_000, callbacks: { onBatchEnd: async () => void (batches++, (first ||= performance.now()), (last = performance.now())) } });
  await member.leave();
  await server.close();
  m.dispose();
  return { msPerStep: (last - first) / (batches - 1), startMs: first - t0, steps: batches };
}

await tf.setBackend('cpu');
await plain(); // warm-up: the kernels' first use
const baseline = await plain();
const thread = await library('thread');
const main = await library('main');
const report = {
  when: new Date().toISOString(),
  commit: dirty ? `${commit} with uncommitted changes` : commit,
  versions: { node: process.version, tfjs: tf.version['tfjs-core'] },
  regime: `one process on the CPU backend, ${os.cpus().length} cores (${os.cpus()[0]?.model ?? 'unknown CPU'}); N = 1 on loopback: the library's own cost, no link`,
  settings: { model: `MLP ${FEATURES}-128-${CLASSES}, softmax cross-entropy, SGD 0.05`, examples: EXAMPLES, batch: BATCH, epochs: EPOCHS },
  plainMsPerStep: Number(baseline.toFixed(2)),
  webring: {
    thread: { msPerStep: Number(thread.msPerStep.toFixed(2)), ratio: Number((thread.msPerStep / baseline).toFixed(3)), startMs: Math.round(thread.startMs), steps: thread.steps },
    main: { msPerStep: Number(main.msPerStep.toFixed(2)), ratio: Number((main.msPerStep / baseline).toFixed(3)), startMs: Math.round(main.startMs), steps: main.steps },
  },
};
writeFileSync('bench/library.json', `${JSON.stringify(report, null, 2)}\n`);
const md = [
  `# The library's cost at N = 1 (bench:library)`,
  '',
  `${report.when}, commit ${report.commit}, Node ${report.versions.node}, tfjs ${report.versions.tfjs}. ${report.regime}.`,
  `${report.settings.model}; ${EXAMPLES} examples, batch ${BATCH}, ${EPOCHS} epochs.`,
  '',
  '| | ms per step | × plain tfjs | start (ms) |',
  '|---|---|---|---|',
  `| plain model.fitDataset | ${report.plainMsPerStep} | 1 | |`,
  `| webring fitDataset, maths in a thread | ${report.webring.thread.msPerStep} | ${report.webring.thread.ratio} | ${report.webring.thread.startMs} |`,
  `| webring fitDataset, maths in this thread | ${report.webring.main.msPerStep} | ${report.webring.main.ratio} | ${report.webring.main.startMs} |`,
  '',
].join('\n');
writeFileSync('bench/library.md', md);
console.log(md);
