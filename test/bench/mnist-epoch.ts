/**
 * Whole epochs of real training through the data service: a signaling server and N Node
 * workers (separate processes, the CPU backend) on loopback, streaming the official MNIST
 * and evaluating on its 10,000 test digits, as a class would.
 *
 *   npm run bench:epoch -- --workers 4 --model cnn --global-batch 32
 *     [--epochs 1] [--lr 0.003] [--warmup 100] [--dataset mnist-60k] [--max-steps N] [--task mnist]
 *
 * The defaults are the lab's conv workload on its full dataset (shared/tasks/lab-workloads.ts).
 *
 * It prints, and adds to bench/mnist-epoch.json: the test accuracy after the run, its wall
 * time and examples/s, the share of each step the workers spent waiting for examples, and
 * the bytes the server sent against the training set's size. The regime is N processes
 * sharing this machine's cores on loopback: CPU cost and the data path, not a link.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync, existsSync } from 'node:fs';
import os from 'node:os';
import { parseArgs } from 'node:util';
import { AS_TEACHER, codeFor, startTestServer } from '../support/server';
import { createLogger } from '../../signaling-server/logger';
import { trainingSetBytes } from '../../shared/data/data-service';
import type { RoomStatus } from '../../shared/protocol';
import { datasetFacts, taskOf } from '../../shared/tasks/registry';
import { LAB_DATASETS, LAB_WORKLOADS } from '../../shared/tasks/lab-workloads';

const { values } = parseArgs({
  options: {
    workers: { type: 'string', default: '1' },
    task: { type: 'string', default: LAB_WORKLOADS.conv.task.id },
    model: { type: 'string', default: LAB_WORKLOADS.conv.model },
    'global-batch': { type: 'string', default: '32' },
    epochs: { type: 'string', default: '1' },
    lr: { type: 'string' },
    warmup: { type: 'string' },
    dataset: { type: 'string', default: LAB_DATASETS.full.id },
    'max-steps': { type: 'string' },
  },
});
const workers = Number(values.workers);
const globalBatch = Number(values['global-batch']);
const task = taskOf(values.task!);
const modelIds = task.models.map((m) => m.id);
const datasetIds = task.datasets.map((d) => d.id);
if (!modelIds.includes(values.model!)) throw new Error(`--model: one of ${modelIds.join(', ')}`);
if (!datasetIds.includes(values.dataset!)) throw new Error(`--dataset: one of ${datasetIds.join(', ')}`);
if (!Number.isInteger(globalBatch / workers)) throw new Error('--global-batch must divide evenly among --workers');
const model = values.model!;
const dataset = values.dataset!;
const facts = datasetFacts(dataset)!;

const ROOM = 'bench-epoch';
const POLL_MS = 500;
/** A step of one worker, as its status line printed it. */
const STEP_LINE = /state=training .*step=(\d+) .*step_ms=([\d.]+) data_ms=([\d.]+)/;

const server = await startTestServer({ log: createLogger('warn') });
const auth = AS_TEACHER.headers;
const status = async (): Promise<RoomStatus> => (await (await fetch(`${server.url}/api/rooms/${ROOM}`, { headers: auth })).json()) as RoomStatus;

const children: ChildProcess[] = [];
/** Per worker: data wait by step (ms). */
const dataMs: Array<Map<number, number>> = [];
for (let i = 0; i < workers; i++) {
  const child = spawn(process.execPath, ['--import', 'tsx', 'node-worker/main.ts', '--url', server.url, '--room', ROOM, '--code', codeFor(ROOM), '--name', `w${i}`, '--backend', 'cpu'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const waits = new Map<number, number>();
  dataMs.push(waits);
  let pending = '';
  child.stdout!.on('data', (d: Buffer) => {
    if (process.env.BENCH_VERBOSE) process.stdout.write(`[w${i}] ${d.toString()}`);
    pending += d.toString();
    const lines = pending.split('\n');
    pending = lines.pop()!;
    for (const line of lines) {
      const m = STEP_LINE.exec(line);
      if (m) waits.set(Number(m[1]), Number(m[3]));
    }
  });
  child.stderr!.on('data', (d: Buffer) => process.stderr.write(`[w${i}] ${d.toString()}`));
  children.push(child);
}
const stopAll = () => children.forEach((c) => c.kill('SIGKILL'));
process.on('exit', stopAll);

while ((await status()).members.length < workers) await new Promise((r) => setTimeout(r, POLL_MS));
const config = {
  task: task.id,
  model,
  dataset,
  batchSizePerWorker: globalBatch / workers,
  epochs: Number(values.epochs),
  ...(values.lr ? { learningRate: Number(values.lr) } : {}),
  ...(values.warmup ? { warmupSteps: Number(values.warmup) } : {}),
  ...(values['max-steps'] ? { maxSteps: Number(values['max-steps']) } : {}),
  // Checkpoints only at the epoch's end: the bench measures training, not uploads.
  saveEverySteps: 1_000_000,
  resumeFrom: 'none',
};
const started = await fetch(`${server.url}/api/rooms/${ROOM}/start`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify(config) });
if (!started.ok) throw new Error(`start: ${await started.text()}`);
const t0 = performance.now();
let last = await status();
let lastLine = 0;
while (last.state !== 'done' || last.metrics.accuracy === null) {
  await new Promise((r) => setTimeout(r, POLL_MS));
  last = await status();
  if (last.lastError) throw new Error(`the run failed: ${last.lastError.code} ${last.lastError.message}`);
  if (performance.now() - lastLine > 30_000) {
    lastLine = performance.now();
    console.log(`  step ${last.step}/${last.totalSteps ?? '?'} loss ${last.metrics.loss?.toFixed(4) ?? '-'} after ${((performance.now() - t0) / 1000).toFixed(0)} s`);
  }
}
const wallS = (performance.now() - t0) / 1000;
const steps = last.step;
const examples = Math.min(steps * globalBatch, Number(values.epochs) * facts.trainCount);
const stepMs = (wallS * 1000) / steps;
const waits = dataMs.flatMap((m) => [...m.values()]);
const meanWaitMs = waits.reduce((a, b) => a + b, 0) / Math.max(1, waits.length);
const row = {
  at: new Date().toISOString(),
  regime: `${workers} Node worker process(es), CPU backend, loopback, ${os.cpus().length} cores shared`,
  model,
  dataset,
  workers,
  globalBatch,
  learningRate: last.config!.learningRate,
  warmupSteps: last.config!.warmupSteps,
  epochs: Number(values.epochs),
  steps,
  testAccuracy: last.metrics.accuracy,
  wallS: Number(wallS.toFixed(1)),
  examplesPerSec: Number((examples / wallS).toFixed(1)),
  meanStepMs: Number(stepMs.toFixed(1)),
  meanDataWaitMs: Number(meanWaitMs.toFixed(2)),
  dataWaitShare: Number((meanWaitMs / stepMs).toFixed(4)),
  bytesServed: last.data.bytesServed,
  bytesPerEpochOverTrainingSet: Number((last.data.bytesServed / trainingSetBytes(facts, facts.features) / (examples / facts.trainCount)).toFixed(3)),
};
console.log(JSON.stringify(row, null, 2));
const file = 'bench/mnist-epoch.json';
const rows = existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as unknown[]) : [];
writeFileSync(file, `${JSON.stringify([...rows, row], null, 2)}\n`);
stopAll();
await server.close();
process.exit(0);
