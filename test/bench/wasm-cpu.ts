/**
 * TensorFlow.js's WASM backend against its CPU backend with this project's fast kernels
 * (shared/compute/cpu-kernels.ts), for every task's every model at its recipe's share: is
 * WASM the better fallback for a device without WebGPU or WebGL? One replica's step
 * (forward, backward, read-back, the update), median of --steps after warm-up, in Node.
 *
 *   node --import tsx test/bench/wasm-cpu.ts [--steps 10] [--out FILE] [--md FILE]
 *
 * A model the WASM backend cannot train (a gradient kernel it lacks) gets its error as the
 * row's figure. The examples are random: for a task whose examples are symbol indices
 * (byteScale 1) indices below its output count, otherwise uniform noise in [0, 1].
 */
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import { parseArgs } from 'node:util';
import * as tf from '@tensorflow/tfjs';
import { commitOf } from './provenance';
import { selectNodeBackend } from '../../node-worker/node-backend';
import { LocalReplica } from '../../shared/compute/local-replica';
import { TASKS } from '../../shared/tasks/registry';
import { defaultConfigOf, startConfigSchema } from '../../shared/tasks/start-config';
import { featureCount, type Task } from '../../shared/tasks/task';
import { mulberry32 } from '../../shared/util/random';

const WARM_STEPS = 3;
const BACKENDS = ['cpu', 'wasm'] as const;

interface Row {
  backend: (typeof BACKENDS)[number];
  task: string;
  model: string;
  share: number;
  stepMs: number | null;
  examplesPerSec: number | null;
  error: string | null;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

function examples(task: Task, n: number, random: () => number) {
  const f = featureCount(task.example);
  const indices = task.example.byteScale === 1;
  return {
    features: Float32Array.from({ length: n * f }, () => (indices ? Math.floor(random() * task.outputs.length) : random())),
    labels: Int32Array.from({ length: n }, () => Math.floor(random() * task.outputs.length)),
    n,
  };
}

async function timeModel(task: Task, model: string, steps: number): Promise<Omit<Row, 'backend'>> {
  const config = startConfigSchema.parse({ ...defaultConfigOf(task.id), model });
  const share = config.batchSizePerWorker;
  const base = { task: task.id, model, share };
  let replica: LocalReplica | null = null;
  try {
    replica = new LocalReplica({ config });
    const batch = examples(task, share, mulberry32(5));
    let flat: Float32Array = new Float32Array(replica.parameterCount);
    const times: number[] = [];
    for (let s = 0; s < WARM_STEPS + steps; s++) {
      const t0 = performance.now();
      const g = await replica.computeGradients(batch, flat);
      flat = (await replica.applyGradients(g.flat, 0.001)).flat;
      if (s >= WARM_STEPS) times.push(performance.now() - t0);
    }
    const stepMs = median(times);
    return { ...base, stepMs, examplesPerSec: (share * 1000) / stepMs, error: null };
  } catch (error) {
    // The row says what the backend could not do; the other rows still run.
    return { ...base, stepMs: null, examplesPerSec: null, error: (error as Error).message.split('\n')[0]!.slice(0, 160) };
  } finally {
    await replica?.dispose();
  }
}


async function main(): Promise<void> {
  const { values } = parseArgs({ options: { steps: { type: 'string', default: '10' }, out: { type: 'string' }, md: { type: 'string' } } });
  const steps = Number(values.steps);
  const rows: Row[] = [];
  let wasmAdapter: string | null = null;
  for (const backend of BACKENDS) {
    // The Node worker's own choice: the WASM backend with the kernels it lacks (node-backend.ts).
    const choice = await selectNodeBackend(backend);
    if (choice.backend !== backend) throw new Error(`the ${backend} backend did not start: ${choice.webgpuUnavailable}`);
    if (backend === 'wasm') wasmAdapter = choice.adapter ?? null;
    for (const task of TASKS) {
      for (const { id } of task.models) {
        const row: Row = { backend, ...(await timeModel(task, id, steps)) };
        rows.push(row);
        console.log(JSON.stringify(row));
      }
    }
  }
  const report = {
    generatedAt: new Date().toISOString(),
    commit: commitOf(),
    versions: { node: process.version, tfjs: tf.version.tfjs },
    machine: { cpu: os.cpus()[0]?.model ?? 'unknown', cores: os.availableParallelism() },
    settings: { timedSteps: steps, warmSteps: WARM_STEPS, wasm: wasmAdapter, config: 'each task\'s recipe (its share and optimizer)' },
    rows,
  };
  if (values.out) writeFileSync(values.out, `${JSON.stringify(report, null, 2)}\n`);
  if (values.md) {
    const cell = (r: Row | undefined) => (!r ? '–' : r.stepMs === null ? `cannot train: ${r.error}` : `${r.stepMs.toFixed(1)} ms (${Math.round(r.examplesPerSec!)} examples/s)`);
    const lines = [
      '# The WASM backend against the CPU backend (`npm run bench:wasm`)',
      '',
      `Measured ${report.generatedAt} on commit ${report.commit} (${report.machine.cpu}, ${report.machine.cores} cores, Node ${report.versions.node}, tfjs ${report.versions.tfjs}; WASM: ${wasmAdapter}). One replica's step (forward, backward, read-back, the update) at each task's recipe share, median of ${steps} after ${WARM_STEPS} warm-up steps. Both backends run this project's gradient kernels for a convolution's filter and an embedding (shared/compute/cpu-kernels.ts): faster ones on the CPU backend, the missing ones on WASM.`,
      '',
      '| task | model | share | CPU step | WASM step | WASM ÷ CPU time |',
      '|---|---|---|---|---|---|',
    ];
    for (const r of rows.filter((x) => x.backend === 'cpu')) {
      const w = rows.find((x) => x.backend === 'wasm' && x.task === r.task && x.model === r.model);
      const ratio = r.stepMs !== null && w?.stepMs != null ? (w.stepMs / r.stepMs).toFixed(2) : '–';
      lines.push(`| ${r.task} | ${r.model} | ${r.share} | ${cell(r)} | ${cell(w)} | ${ratio} |`);
    }
    writeFileSync(values.md, `${lines.join('\n')}\n`);
  }
}

await main();
