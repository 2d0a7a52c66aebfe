/**
 * `npm run bench:secagg`: what secure aggregation costs, in this machine's CPU regime (one
 * Node process, in-memory links: no network time, so the figures are the masks' and the
 * fixed point's own cost, not a link's).
 *
 * - Mask generation: one rank's combined mask for one step (k pairwise AES-CTR keystreams
 *   from HKDF, summed), for the lab workloads' gradient buffers (the MLP's and the CNN's:
 *   shared/tasks/lab-workloads.ts), at the partner counts
 *   of N = 3, 8, 16 and 30 (k = min(N-1, 2⌈log2 N⌉)).
 * - A training step: N trainers on the MLP stepping together over an in-memory mesh, plain
 *   float32 against secure, N = 3 and 8; the masks for step s+1 are made while step s+1
 *   computes, so what shows is what is not hidden.
 * - Bytes one rank sends per step: fp32, fp16 and secure (32-bit words plus one check word).
 *
 * Writes bench/secagg.{json,md}.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as tf from '@tensorflow/tfjs';
import type { WireFormat } from '../../shared/protocol';
import { startConfigSchema } from '../../shared/tasks/start-config';
import { LAB_WORKLOADS, LAB_WORKLOAD_LIST } from '../../shared/tasks/lab-workloads';
import { Trainer } from '../../shared/training/trainer';
import { inMemoryShards } from '../../shared/data/data-source';
import { LocalReplica } from '../../shared/compute/local-replica';
import type { Collective } from '../../shared/collectives/collective';
import { loadDataset } from '../../signaling-server/data/datasets';
import { createMemoryMesh } from '../support/memory-ring';
import { memberIds, relayedDirectories, secureOver } from '../support/secure-ring';
import { maskPartnerCount } from '../../shared/secagg/mask-graph';
import { makeKeyPair, pairMask, pairSecret } from '../../shared/secagg/pair-keys';
import { COLLECTIVE_TAG } from '../../shared/collectives/collective';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const MASK_REPEATS = 10;
const STEPS = 12;
const WARM_STEPS = 2;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function maskMs(words: number, partners: number): Promise<number> {
  const own = await makeKeyPair();
  const secrets = await Promise.all(Array.from({ length: partners }, async () => pairSecret(own.privateKey, (await makeKeyPair()).publicKey)));
  const out = new Uint32Array(words);
  const times: number[] = [];
  for (let rep = 0; rep < MASK_REPEATS; rep++) {
    const t0 = performance.now();
    const masks = await Promise.all(secrets.map((s, i) => pairMask(s, { run: 1, generation: 1, step: rep, tag: COLLECTIVE_TAG.gradients, attempt: 0, low: 0, high: i + 1 }, words)));
    out.fill(0);
    for (const m of masks) for (let j = 0; j < words; j++) out[j]! += m[j]!;
    times.push(performance.now() - t0);
  }
  return median(times);
}

interface StepRow {
  n: number;
  mode: 'fp32' | 'fp16' | 'secure';
  stepMs: number;
  bytesPerStep: number;
}

async function stepRow(n: number, mode: StepRow['mode']): Promise<StepRow> {
  const w = LAB_WORKLOADS.dense;
  const dataset = await loadDataset(w.datasets.small);
  const wire: WireFormat = mode === 'fp16' ? 'fp16' : 'fp32';
  const config = startConfigSchema.parse({ ...w.config, dataset: w.datasets.small.id, batchSizePerWorker: 32, balanceShares: false, allreduce: 'ring', wire, secureAggregation: mode === 'secure' });
  const mesh = createMemoryMesh(n);
  const ids = memberIds(n);
  const collectives: Collective[] = mode === 'secure' ? secureOver(mesh.rings, ids, relayedDirectories(ids), 1).secure : mesh.rings;
  const trainers = collectives.map((c) => new Trainer(config, inMemoryShards(config, dataset, w.task.example), c));
  const times: number[] = [];
  const bytes: number[] = [];
  for (let s = 0; s < STEPS; s++) {
    const t0 = performance.now();
    await Promise.all(trainers.map((t) => t.trainStep()));
    if (s >= WARM_STEPS) {
      times.push(performance.now() - t0);
      bytes.push(mesh.rings[0]!.lastTransfer.bytes);
    }
  }
  await Promise.all(trainers.map((t) => t.dispose()));
  return { n, mode, stepMs: median(times), bytesPerStep: median(bytes) };
}

async function main(): Promise<void> {
  await tf.setBackend('cpu');
  const models = Object.fromEntries(LAB_WORKLOAD_LIST.map((w) => [w.model, new LocalReplica({ config: startConfigSchema.parse(w.config) })]));
  const masks: Array<{ model: string; parameters: number; n: number; partners: number; maskMs: number }> = [];
  for (const [model, replica] of Object.entries(models)) {
    for (const n of [3, 8, 16, 30]) {
      const partners = maskPartnerCount(n);
      const ms = await maskMs(replica.parameterCount + 1, partners);
      masks.push({ model, parameters: replica.parameterCount, n, partners, maskMs: ms });
      console.log(`masks: ${model} (${replica.parameterCount} parameters), N = ${n}, ${partners} partners: ${ms.toFixed(1)} ms`);
    }
    await replica.dispose();
  }
  const steps: StepRow[] = [];
  for (const n of [3, 8]) {
    for (const mode of ['fp32', 'fp16', 'secure'] as const) {
      const row = await stepRow(n, mode);
      steps.push(row);
      console.log(`step: N = ${n}, ${mode}: ${row.stepMs.toFixed(0)} ms, ${(row.bytesPerStep / 1e3).toFixed(0)} kB sent by rank 0`);
    }
  }
  mkdirSync(join(ROOT, 'bench'), { recursive: true });
  writeFileSync(join(ROOT, 'bench', 'secagg.json'), `${JSON.stringify({ regime: 'one Node process, in-memory links, 2 cores', masks, steps }, null, 2)}\n`);
  const overhead = (n: number) => steps.find((r) => r.n === n && r.mode === 'secure')!.stepMs / steps.find((r) => r.n === n && r.mode === 'fp32')!.stepMs;
  const md = [
    '# What secure aggregation costs (`npm run bench:secagg`)',
    '',
    'One Node process on this machine, in-memory links: the CPU cost of masks and fixed point, not a network.',
    '',
    '| model | parameters | N | mask partners | one rank\'s masks for a step |',
    '|---|---|---|---|---|',
    ...masks.map((m) => `| ${m.model} | ${m.parameters.toLocaleString('en')} | ${m.n} | ${m.partners} | ${m.maskMs.toFixed(1)} ms |`),
    '',
    '| N | gradients | step (all N trainers in one process) | bytes rank 0 sends |',
    '|---|---|---|---|',
    ...steps.map((r) => `| ${r.n} | ${r.mode} | ${r.stepMs.toFixed(0)} ms | ${(r.bytesPerStep / 1e3).toFixed(0)} kB |`),
    '',
    `Secure over fp32: ${overhead(3).toFixed(2)}× the step at N = 3, ${overhead(8).toFixed(2)}× at N = 8.`,
    '',
  ];
  writeFileSync(join(ROOT, 'bench', 'secagg.md'), md.join('\n'));
}

await main();
