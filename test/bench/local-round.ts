/**
 * `npm run bench:local-round`: a local-steps round as a Node worker trains it, its maths in
 * a compute thread (worker_threads, tfjs's CPU backend), for the lab's MLP and CNN on the
 * local-steps defaults (H = 10, inner SGD): the round's wall time a local step, the maths
 * in the thread, the crossing (messages and transfers beyond the maths), and the longest
 * the network's event loop was held. One trainer in a ring of one, so the all-reduce costs
 * nothing and the figure is the round's own.
 *
 *   node --import tsx test/bench/local-round.ts [--out FILE.json] [--md FILE.md --before EARLIER.json]
 *
 * --before: the same script's --out run on another commit (a worktree), so the round is
 * measured before and after on one machine. Asserts nothing.
 */
import os from 'node:os';
import { readFileSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import * as tf from '@tensorflow/tfjs';
import { startConfigSchema } from '../../shared/tasks/start-config';
import { replicaRecipe } from '../../shared/protocol';
import { LAB_DATASETS, LAB_WORKLOAD_LIST, LAB_WORKLOADS, type LabModel } from '../../shared/tasks/lab-workloads';
import { Trainer } from '../../shared/training/trainer';
import { inMemoryShards } from '../../shared/data/data-source';
import { loadDataset } from '../../signaling-server/data/datasets';
import { createMemoryRing } from '../support/memory-ring';
import { openNodeCompute } from '../../node-worker/node-compute';
import { commitOf } from './provenance';

const LOCAL_STEPS = 10;
const ROUNDS: Record<LabModel, number> = { [LAB_WORKLOADS.dense.model]: 8, [LAB_WORKLOADS.conv.model]: 3 };
const WARMUP_ROUNDS = 1;

interface Row {
  model: LabModel;
  rounds: number;
  /** A round's wall time over its local steps. */
  stepMs: number;
  /** The maths in the thread (forward, backward, read-back) a local step. */
  computeMs: number;
  /** Messages and transfers beyond the maths, a local step. */
  crossMs: number;
  /** The longest the network's event loop was held while the rounds trained. */
  worstBlockMs: number;
}

interface Report {
  generatedAt: string;
  commit: string;
  versions: { node: string; tfjs: string };
  machine: { cpu: string; cores: number };
  settings: { localSteps: number; backend: 'cpu'; compute: 'thread'; ring: 1 };
  rows: Row[];
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(xs.length, 1);
const ms = (x: number) => (x < 10 ? x.toFixed(2) : x.toFixed(1));

async function rows(): Promise<Row[]> {
  await tf.setBackend('cpu');
  const dataset = await loadDataset(LAB_DATASETS.small);
  const out: Row[] = [];
  for (const w of LAB_WORKLOAD_LIST) {
    const config = startConfigSchema.parse({ ...w.config, dataset: LAB_DATASETS.small.id, sync: 'local-steps', localSteps: LOCAL_STEPS });
    const compute = await openNodeCompute('cpu', 'thread');
    const replica = await compute.createReplica({ config: { ...config, ...replicaRecipe(config) } });
    const trainer = new Trainer(config, inMemoryShards(config, dataset, w.task.example), createMemoryRing(1).rings[0]!, { replica });
    for (let r = 0; r < WARMUP_ROUNDS; r++) await trainer.trainStep();
    const delay = monitorEventLoopDelay({ resolution: 5 });
    delay.enable();
    const step: number[] = [];
    const maths: number[] = [];
    const cross: number[] = [];
    for (let r = 0; r < ROUNDS[w.model]; r++) {
      const t0 = performance.now();
      const result = await trainer.trainStep();
      step.push((performance.now() - t0) / result.steps);
      maths.push((result.timing.computeMs + result.timing.readbackMs) / result.steps);
      cross.push(result.timing.crossMs / result.steps);
      await new Promise((resolve) => setTimeout(resolve, 0));
    }
    delay.disable();
    const row: Row = { model: w.model, rounds: step.length, stepMs: mean(step), computeMs: mean(maths), crossMs: mean(cross), worstBlockMs: delay.max / 1e6 };
    console.log(JSON.stringify(row));
    out.push(row);
    await trainer.dispose();
    await compute.close();
  }
  return out;
}

function markdown(report: Report, before: Report | null): string {
  const earlier = (r: Row) => before?.rows.find((b) => b.model === r.model);
  const lines = [
    '# A local-steps round in a compute thread (`npm run bench:local-round`)',
    '',
    `Measured ${report.generatedAt} on commit ${report.commit} (${report.machine.cpu}, ${report.machine.cores} cores, Node ${report.versions.node}, tfjs ${report.versions.tfjs}): one Node worker's trainer in a ring of one, its maths in a worker thread on tfjs's CPU backend, H = ${report.settings.localSteps}, inner SGD, the lab's small dataset; mean over the rounds after ${WARMUP_ROUNDS} warm-up round.` +
      (before ? ` Before: ${before.generatedAt} on commit ${before.commit}, the same machine and settings.` : ''),
    '',
    'Per local step: the round\'s wall time, the maths in the thread (forward, backward, read-back), and the crossing (messages and transfers beyond the maths); and the longest the network\'s event loop was held.',
    '',
    `| model | local step ms | maths | crossing | worst event-loop block ms${before ? ' | local step before | crossing before | worst block before' : ''} |`,
    `|---|---|---|---|---|${before ? '---|---|---|' : ''}`,
  ];
  for (const r of report.rows) {
    const b = earlier(r);
    const then = before ? (b ? ` | ${ms(b.stepMs)} | ${ms(b.crossMs)} | ${ms(b.worstBlockMs)}` : ' | – | – | –') : '';
    lines.push(`| ${r.model} | ${ms(r.stepMs)} | ${ms(r.computeMs)} | ${ms(r.crossMs)} | ${ms(r.worstBlockMs)}${then} |`);
  }
  return `${lines.join('\n')}\n`;
}

const { values } = parseArgs({ options: { out: { type: 'string' }, md: { type: 'string' }, before: { type: 'string' } } });
const report: Report = {
  generatedAt: new Date().toISOString(),
  commit: commitOf(),
  versions: { node: process.version, tfjs: tf.version.tfjs },
  machine: { cpu: os.cpus()[0]?.model ?? 'unknown', cores: os.availableParallelism() },
  settings: { localSteps: LOCAL_STEPS, backend: 'cpu', compute: 'thread', ring: 1 },
  rows: await rows(),
};
if (values.out) writeFileSync(values.out, `${JSON.stringify(report, null, 2)}\n`);
if (values.md) writeFileSync(values.md, markdown(report, values.before ? (JSON.parse(readFileSync(values.before, 'utf8')) as Report) : null));
