/**
 * One replica's training step on this machine's GPU, through the Node worker's own backend
 * choice (WebGPU through Dawn on Vulkan, node-worker/node-backend.ts), against the CPU
 * backend: forward, backward, read-back and the optimizer's update of the MLP and the
 * small CNN at several shares of the global batch. The examples are uniform noise in
 * [0, 1] with random labels: a step's time does not depend on what the pixels show.
 *
 *   node --import tsx test/bench/gpu-step.ts [--backend webgpu|cpu] [--cnn-shares 32,128,512] [--steps 10] [--out FILE]
 *     [--md FILE --before EARLIER.json]
 *   node --import tsx test/bench/gpu-step.ts --diagnose     one line: the Vulkan adapter, or why there is none
 *
 * It is the script the lent GPU machine runs (docs/benchmarks.md, "A real GPU"), packed by
 * scripts/gpu-trip/pack.sh with node, the `webgpu` package and the Vulkan loader, so that
 * it needs nothing there; the pack bakes in the commit (WEBRING_COMMIT), since the machine
 * has no git. Prints one JSON
 * line per (model, share) and writes them all to --out, with when, the commit, the versions
 * and the machine. --md writes the split as a table, beside an earlier run's (--before:
 * the same script's --out on another commit), so a change to the update is measured
 * before and after on one machine.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { parseArgs } from 'node:util';
import * as tf from '@tensorflow/tfjs';
import { execFileSync } from 'node:child_process';
import { commitOf } from './provenance';
import { diagnoseVulkan, gatherVulkanFacts } from './vulkan-diagnosis';
import { selectNodeBackend } from '../../node-worker/node-backend';
import { LocalReplica } from '../../shared/compute/local-replica';
import { startConfigSchema } from '../../shared/tasks/start-config';
import { replicaRecipe } from '../../shared/protocol';
import { RoundLegs } from '../../shared/training/round-legs';
import { featureCount } from '../../shared/tasks/task';
import { LAB_WORKLOADS, LAB_WORKLOAD_LIST, labWorkloadOf, type LabModel } from '../../shared/tasks/lab-workloads';

const WARM_STEPS = 3;
/** Local steps a timed round takes (the default H). */
const LOCAL_ROUND_STEPS = 10;
const LOCAL_ROUNDS = 3;
const SHARES: Record<LabModel, number[]> = { [LAB_WORKLOADS.dense.model]: [32, 128, 512, 1024], [LAB_WORKLOADS.conv.model]: [32, 128, 512] };

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

interface Row {
  backend: string;
  adapter: string | null;
  model: LabModel;
  share: number;
  stepMs: number;
  computeMs: number;
  readbackMs: number;
  applyMs: number;
  /** The optimizer's update, and the new weights' hash every step reports, within applyMs. */
  optimizerMs: number;
  hashMs: number;
  examplesPerSec: number;
  tensorsFlat: boolean;
  /**
   * A local step (sync 'local-steps', its inner SGD): as before, one step at a time (gradients
   * read back, the mean, the fused update and hash), and in a round of LOCAL_ROUND_STEPS
   * (Replica.trainRound) with its updates on the host (the fused pass) and on the device
   * (tfjs's kernels; the loss read once a round, the weights once).
   */
  localStepBeforeMs: number;
  localStepHostMs: number;
  localStepDeviceMs: number;
}

async function timeSteps(model: LabModel, share: number, timedSteps: number): Promise<Omit<Row, 'backend' | 'adapter'>> {
  const w = labWorkloadOf(model);
  const replica = new LocalReplica({ config: startConfigSchema.parse({ ...w.config, batchSizePerWorker: share }) });
  const features = Float32Array.from({ length: share * featureCount(w.task.example) }, () => Math.random());
  const labels = Int32Array.from({ length: share }, () => Math.floor(Math.random() * w.task.outputs.length));
  let flat: Float32Array = new Float32Array(replica.parameterCount);
  const steps: number[] = [];
  const computes: number[] = [];
  const readbacks: number[] = [];
  const applies: number[] = [];
  const optimizer: number[] = [];
  const hashes: number[] = [];
  const tensors: number[] = [];
  for (let s = 0; s < WARM_STEPS + timedSteps; s++) {
    const t0 = performance.now();
    const g = await replica.computeGradients({ features, labels, n: share }, flat);
    const t1 = performance.now();
    const applied = await replica.applyGradients(g.flat, 0.001);
    const t2 = performance.now();
    flat = applied.flat;
    if (s < WARM_STEPS) continue;
    steps.push(t2 - t0);
    computes.push(g.computeMs);
    readbacks.push(g.readbackMs);
    applies.push(t2 - t1);
    optimizer.push(applied.appliedAt - applied.startedAt);
    hashes.push(applied.endedAt - applied.appliedAt);
    tensors.push(g.numTensors);
  }
  await replica.dispose();
  const stepMs = median(steps);
  const local = await timeLocalSteps(model, share, features, labels);
  return { model, share, stepMs, computeMs: median(computes), readbackMs: median(readbacks), applyMs: median(applies), optimizerMs: median(optimizer), hashMs: median(hashes), examplesPerSec: (share * 1000) / stepMs, tensorsFlat: tensors.every((n) => n === tensors[0]) && local.tensorsFlat, localStepBeforeMs: local.beforeMs, localStepHostMs: local.hostMs, localStepDeviceMs: local.deviceMs };
}

/** A local step's time, one at a time (as before) and in rounds on the host and on the device: the median round's ms / its steps. */
async function timeLocalSteps(model: LabModel, share: number, features: Float32Array, labels: Int32Array): Promise<{ beforeMs: number; hostMs: number; deviceMs: number; tensorsFlat: boolean }> {
  const w = labWorkloadOf(model);
  const config = startConfigSchema.parse({ ...w.config, batchSizePerWorker: share, sync: 'local-steps', localSteps: LOCAL_ROUND_STEPS });
  const replicas = (['host', 'device'] as const).map((roundPlace) => new LocalReplica({ config: { ...config, ...replicaRecipe(config) }, roundPlace }));
  const H = LOCAL_ROUND_STEPS;
  const legs = new RoundLegs(replicas[0]!.parameterCount, features.length / share, share, H, Number.POSITIVE_INFINITY);
  for (let k = 0; k < H; k++) {
    legs.slot(k).features.set(features);
    legs.slot(k).labels.set(labels);
    legs.set(k, share, 0.01);
  }
  const times = { before: [] as number[], host: [] as number[], device: [] as number[] };
  const tensors: number[] = [];
  const [onHost, onDevice] = replicas as [LocalReplica, LocalReplica];
  let flat: Float32Array = new Float32Array(onHost.parameterCount);
  for (let round = 0; round < 1 + LOCAL_ROUNDS; round++) {
    const start = await onHost.readState();
    const t0 = performance.now();
    for (let k = 0; k < H; k++) {
      const g = await onHost.computeGradients({ features, labels, n: share }, flat);
      for (let i = 0; i < g.flat.length; i++) g.flat[i] = g.flat[i]! / share;
      flat = (await onHost.applyGradients(g.flat, 0.01)).flat;
    }
    await onHost.readWeights();
    const t1 = performance.now();
    await onHost.writeState(start);
    const t2 = performance.now();
    await legs.train(onHost, H, { first: true, last: true, drift: null });
    const t3 = performance.now();
    const done = await legs.train(onDevice, H, { first: true, last: true, drift: null });
    const t4 = performance.now();
    if (round === 0) continue;
    times.before.push((t1 - t0) / H);
    times.host.push((t3 - t2) / H);
    times.device.push((t4 - t3) / H);
    tensors.push(done.numTensors);
  }
  for (const r of replicas) await r.dispose();
  return { beforeMs: median(times.before), hostMs: median(times.host), deviceMs: median(times.device), tensorsFlat: tensors.every((n) => n === tensors[0]) };
}

interface Report {
  generatedAt: string;
  /** The commit, and "+changes" when the tree had uncommitted changes. */
  commit: string;
  versions: { node: string; tfjs: string };
  machine: { cpu: string; cores: number };
  settings: { timedSteps: number; warmSteps: number; optimizer: string };
  rows: Row[];
}


const ms = (x: number) => (x < 10 ? x.toFixed(2) : x.toFixed(1));

/** The split of each row, beside the earlier run's row of the same backend, model and share. */
function markdown(report: Report, before: Report | null): string {
  const earlier = (r: Row) => before?.rows.find((b) => b.backend === r.backend && b.model === r.model && b.share === r.share);
  const lines = [
    `# One replica's step, split (\`npm run bench:gpu\`)`,
    '',
    `Measured ${report.generatedAt} on commit ${report.commit} (${report.machine.cpu}, ${report.machine.cores} cores, Node ${report.versions.node}, tfjs ${report.versions.tfjs}), median of ${report.settings.timedSteps} steps after ${report.settings.warmSteps} warm-up steps, ${report.settings.optimizer}.` +
      (before ? ` Before: ${before.generatedAt} on commit ${before.commit}, the same machine and settings.` : ''),
    '',
    'Compute: forward and backward until the loss is read; read-back: the gradients into the flat buffer; update: the optimizer\'s update and the new weights on the device; hash: the new weights\' fingerprint every step reports. Everything but compute is the step\'s fixed cost.',
    '',
    `A local step (local steps\' inner SGD, H = ${LOCAL_ROUND_STEPS}), ms a step: one at a time as before (read-back, mean, fused update, hash), and in a round (Replica.trainRound) with the updates on the host (the fused pass on a copy of the weights; the CPU and WebAssembly backends\' place) or on the device (tfjs\'s kernels, nothing read back until the round ends; WebGPU\'s and WebGL\'s).`,
    '',
    `| backend | model | share | step ms | compute | read-back | update | hash | fixed costs | local step one at a time | in a round, host | in a round, device${before ? ' | fixed costs before | update before | hash before' : ''} |`,
    `|---|---|---|---|---|---|---|---|---|---|---|---|${before ? '---|---|---|' : ''}`,
  ];
  for (const r of report.rows) {
    const fixed = r.readbackMs + r.applyMs;
    const b = earlier(r);
    const then = before ? (b ? ` | ${ms(b.readbackMs + b.applyMs)} | ${ms(b.optimizerMs)} | ${ms(b.hashMs)}` : ' | – | – | –') : '';
    lines.push(`| ${r.backend}${r.adapter ? ` (${r.adapter})` : ''} | ${r.model} | ${r.share} | ${ms(r.stepMs)} | ${ms(r.computeMs)} | ${ms(r.readbackMs)} | ${ms(r.optimizerMs)} | ${ms(r.hashMs)} | ${ms(fixed)} | ${ms(r.localStepBeforeMs)} | ${ms(r.localStepHostMs)} | ${ms(r.localStepDeviceMs)}${then} |`);
  }
  lines.push('', `Tensors stayed flat across steps: ${report.rows.every((r) => r.tensorsFlat) ? 'in every row' : `not in ${report.rows.filter((r) => !r.tensorsFlat).map((r) => `${r.model}@${r.share}`).join(', ')}`}.`, '');
  return lines.join('\n');
}

/** The libraries the dynamic loader knows by name (`ldconfig -p`); empty where there is no ldconfig. */
function knownLibraries(): string {
  try {
    return execFileSync('ldconfig', ['-p'], { encoding: 'utf8' });
  } catch (err) {
    process.stderr.write(`gpu-step: no ldconfig (${(err as Error).message.split('\n')[0]}): ICD libraries named without a path count as missing\n`);
    return '';
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      backend: { type: 'string', default: 'webgpu' },
      out: { type: 'string' },
      md: { type: 'string' },
      before: { type: 'string' },
      'cnn-shares': { type: 'string' },
      steps: { type: 'string', default: '10' },
      diagnose: { type: 'boolean', default: false },
    },
  });
  // The CPU backend takes seconds a CNN step: a baseline run can keep to the small shares.
  if (values['cnn-shares']) SHARES[LAB_WORKLOADS.conv.model] = values['cnn-shares'].split(',').map(Number);
  const timedSteps = Number(values.steps);
  const choice = await selectNodeBackend(values.backend === 'cpu' && !values.diagnose ? 'cpu' : 'webgpu');
  if (values.diagnose || (values.backend !== 'cpu' && choice.backend !== 'webgpu')) {
    const line = diagnoseVulkan(gatherVulkanFacts(choice.backend === 'webgpu' ? (choice.adapter ?? 'an unnamed adapter') : null, knownLibraries()));
    if (values.diagnose) return void console.log(line);
    throw new Error(`no WebGPU here: ${choice.webgpuUnavailable}; ${line}`);
  }
  const rows: Row[] = [];
  for (const { model } of LAB_WORKLOAD_LIST) {
    for (const share of SHARES[model]) {
      const row: Row = { backend: tf.getBackend(), adapter: choice.adapter ?? null, ...(await timeSteps(model, share, timedSteps)) };
      rows.push(row);
      console.log(JSON.stringify(row));
    }
  }
  const report: Report = {
    generatedAt: new Date().toISOString(),
    commit: process.env.WEBRING_COMMIT ?? commitOf(),
    versions: { node: process.version, tfjs: tf.version.tfjs },
    machine: { cpu: os.cpus()[0]?.model ?? 'unknown', cores: os.availableParallelism() },
    settings: { timedSteps, warmSteps: WARM_STEPS, optimizer: 'each model\'s task recipe (Adam)' },
    rows,
  };
  if (values.out) writeFileSync(values.out, `${JSON.stringify(report, null, 2)}\n`);
  if (values.md) writeFileSync(values.md, markdown(report, values.before ? (JSON.parse(readFileSync(values.before, 'utf8')) as Report) : null));
}

await main();
