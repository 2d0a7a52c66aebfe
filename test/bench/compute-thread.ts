/**
 * `npm run bench:compute`: what the compute thread costs and what it buys, before (the
 * maths on the network's thread: `--compute main`, `?compute=main`) and after (a thread of
 * its own, the default). For the lab's workloads (shared/tasks/lab-workloads.ts: the MLP and
 * the CNN), on the product's default settings:
 *
 * - node: one Node worker's trainer (a ring of one, in this process) on tfjs's CPU backend:
 *   the step's wall time, the thread crossing (its two messages and transfers beyond the
 *   maths) and its share of the step, and the longest the event loop was held, which is
 *   what the server's pings wait on;
 * - tab: one Chromium tab training in a room of the real server, on the CPU backend and on
 *   WebGPU (SwiftShader here): the chief's reported step split, the crossing, and the
 *   page's longest main-thread task while it trains.
 *
 * Writes bench/compute-thread.json and .md; asserts nothing. BENCH_PARTS=node or tab runs
 * half of it.
 */
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import * as tf from '@tensorflow/tfjs';
import { chromium, type Browser } from '@playwright/test';
import { CHROMIUM_ARGS } from '../../playwright.config';
import { buildClientIfNeeded, CLIENT_DIST } from '../../signaling-server/build-client';
import { createLogger } from '../../signaling-server/logger';
import { startServer, type RunningServer } from '../../signaling-server/server';
import { joinCodeFor } from '../../signaling-server/edge/join-codes';
import type { RoomStatus, StepTimingReport } from '../../shared/protocol';
import { startConfigSchema } from '../../shared/tasks/start-config';
import { LAB_DATASETS, LAB_WORKLOADS, LAB_WORKLOAD_LIST, type LabModel } from '../../shared/tasks/lab-workloads';
import { Trainer } from '../../shared/training/trainer';
import { inMemoryShards } from '../../shared/data/data-source';
import { loadDataset } from '../../signaling-server/data/datasets';
import { createMemoryRing } from '../support/memory-ring';
import { openNodeCompute } from '../../node-worker/node-compute';
import type { ComputePlace } from '../../shared/compute/compute';

const PARTS = new Set((process.env.BENCH_PARTS ?? 'node,tab').split(','));
const STEPS: Record<LabModel, number> = { [LAB_WORKLOADS.dense.model]: 40, [LAB_WORKLOADS.conv.model]: 12 };
const WARMUP_STEPS = 3;
const OUT_DIR = path.resolve(import.meta.dirname, '../../bench');
const TOKEN = 'bench';
const JOIN_SECRET = randomBytes(32);
const PLACES: readonly ComputePlace[] = ['main', 'thread'];

interface Row {
  where: 'node' | 'tab';
  model: LabModel;
  backend: string;
  compute: ComputePlace;
  steps: number;
  /** The step's wall time (node), or compute + read-back + crossing + all-reduce + apply as the chief reports it (tab). */
  stepMs: number;
  computeMs: number;
  /** Waiting for the step's examples (0 while the prefetch keeps ahead of the steps). */
  dataMs: number;
  crossMs: number;
  /** The crossing's share of the step. */
  crossShare: number;
  /** The longest the network's thread was held: the event loop's worst delay (node), the page's longest task (tab; 0: none over 50 ms). */
  worstBlockMs: number;
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(xs.length, 1);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function nodeRows(): Promise<Row[]> {
  await tf.setBackend('cpu');
  const dataset = await loadDataset(LAB_DATASETS.small);
  const rows: Row[] = [];
  for (const w of LAB_WORKLOAD_LIST) {
    const model = w.model;
    for (const place of PLACES) {
      const config = startConfigSchema.parse({ ...w.config, dataset: LAB_DATASETS.small.id });
      const compute = place === 'thread' ? await openNodeCompute('cpu', 'thread') : null;
      const replica = compute ? await compute.createReplica({ config }) : undefined;
      const trainer = new Trainer(config, inMemoryShards(config, dataset, w.task.example), createMemoryRing(1).rings[0]!, replica ? { replica } : {});
      for (let s = 0; s < WARMUP_STEPS; s++) await trainer.trainStep();
      const delay = monitorEventLoopDelay({ resolution: 5 });
      delay.enable();
      const wall: number[] = [];
      const computeMs: number[] = [];
      const dataMs: number[] = [];
      const crossMs: number[] = [];
      for (let s = 0; s < STEPS[model]; s++) {
        const t0 = performance.now();
        const r = await trainer.trainStep();
        wall.push(performance.now() - t0);
        computeMs.push(r.timing.computeMs + r.timing.readbackMs);
        crossMs.push(r.timing.crossMs);
        dataMs.push(r.timing.dataMs);
        // A turn of the event loop between steps, as the worker's run takes one.
        await sleep(0);
      }
      delay.disable();
      const row: Row = { where: 'node', model, backend: 'cpu', compute: place, steps: wall.length, stepMs: mean(wall), computeMs: mean(computeMs), dataMs: mean(dataMs), crossMs: mean(crossMs), crossShare: mean(crossMs) / mean(wall), worstBlockMs: delay.max / 1e6 };
      console.log(describe(row));
      rows.push(row);
      await trainer.dispose();
      await compute?.close();
    }
  }
  return rows;
}

/** Records the page's long tasks (over 50 ms) from before its first script. */
function recordLongTasks(): void {
  const tasks: number[] = [];
  (window as unknown as { __longTasks: number[] }).__longTasks = tasks;
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) tasks.push(e.duration);
  }).observe({ type: 'longtask', buffered: true });
}

async function tabRows(browser: Browser, server: RunningServer): Promise<Row[]> {
  const rows: Row[] = [];
  let counter = 0;
  for (const backend of ['cpu', 'webgpu'] as const) {
    for (const w of LAB_WORKLOAD_LIST) {
      const model = w.model;
      for (const place of PLACES) {
        const room = `bench-compute-${counter++}`;
        const context = await browser.newContext();
        await context.addInitScript(recordLongTasks);
        const page = await context.newPage();
        await page.goto(`${server.url}/?room=${room}&code=${joinCodeFor(JOIN_SECRET, room)}&name=tab&backend=${backend}&compute=${place}`);
        await page.getByRole('button', { name: 'Join' }).click();
        await page.waitForFunction(() => /^\d+$/.test(document.querySelector<HTMLElement>('[data-testid="worker-status"]')?.dataset.rank ?? ''), null, { timeout: 120_000 });
        await page.evaluate(() => ((window as unknown as { __longTasks: number[] }).__longTasks.length = 0));
        const res = await fetch(`${server.url}/api/rooms/${room}/start`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` }, body: JSON.stringify({ ...w.config, dataset: LAB_DATASETS.small.id, maxSteps: STEPS[model] + WARMUP_STEPS, resumeFrom: 'none' }) });
        if (!res.ok) throw new Error(`start: ${res.status} ${await res.text()}`);
        const samples = new Map<number, StepTimingReport>();
        for (;;) {
          const status = (await (await fetch(`${server.url}/api/rooms/${room}`, { headers: { authorization: `Bearer ${TOKEN}` } })).json()) as RoomStatus;
          const chief = status.members[0];
          if (chief?.collective && chief.step > WARMUP_STEPS) samples.set(chief.step, chief.collective.timing);
          if (status.state === 'done' || status.state === 'idle') break;
          await sleep(100);
        }
        const t = [...samples.values()];
        const longTasks = await page.evaluate(() => (window as unknown as { __longTasks: number[] }).__longTasks);
        const stepMs = mean(t.map((x) => x.dataMs + x.computeMs + x.readbackMs + x.crossMs + x.commMs + x.applyMs));
        const crossMs = mean(t.map((x) => x.crossMs));
        const row: Row = { where: 'tab', model, backend, compute: place, steps: t.length, stepMs, computeMs: mean(t.map((x) => x.computeMs + x.readbackMs)), dataMs: mean(t.map((x) => x.dataMs)), crossMs, crossShare: crossMs / stepMs, worstBlockMs: Math.max(0, ...longTasks) };
        console.log(describe(row));
        rows.push(row);
        await context.close();
      }
    }
  }
  return rows;
}

function describe(r: Row): string {
  return `${r.where} ${r.model} ${r.backend} compute=${r.compute}: ${r.steps} steps, step ${r.stepMs.toFixed(1)} ms, maths ${r.computeMs.toFixed(1)} ms, waiting for data ${r.dataMs.toFixed(2)} ms, crossing ${r.crossMs.toFixed(2)} ms (${(100 * r.crossShare).toFixed(2)} %), network thread held at most ${r.worstBlockMs.toFixed(0)} ms`;
}

function markdown(rows: Row[], machine: string): string {
  const lines = [
    '# The compute thread: before (maths on the network thread) and after',
    '',
    `\`npm run bench:compute\` on ${machine}. Default settings throughout (batch 32 per worker, the server's default liveness).`,
    '"held at most": the event loop\'s worst delay (Node) or the page\'s longest task (tab, 0 when none reached the browser\'s 50 ms threshold): what the server\'s pings, the data channels and the pad wait on.',
    '',
    '| where | model | backend | compute | steps | step ms | maths ms | waiting for data ms | crossing ms | crossing share | network thread held at most |',
    '|---|---|---|---|---|---|---|---|---|---|---|',
    ...rows.map((r) => `| ${r.where} | ${r.model} | ${r.backend} | ${r.compute} | ${r.steps} | ${r.stepMs.toFixed(1)} | ${r.computeMs.toFixed(1)} | ${r.dataMs.toFixed(2)} | ${r.crossMs.toFixed(2)} | ${(100 * r.crossShare).toFixed(2)} % | ${r.worstBlockMs.toFixed(0)} ms |`),
    '',
  ];
  return lines.join('\n');
}

async function main(): Promise<void> {
  const machine = `${os.cpus().length} × ${os.cpus()[0]?.model ?? 'unknown CPU'}, Node ${process.version}, ${new Date().toISOString().slice(0, 10)}`;
  const rows: Row[] = [];
  if (PARTS.has('node')) rows.push(...(await nodeRows()));
  if (PARTS.has('tab')) {
    await buildClientIfNeeded((m) => console.log(m));
    // The product's defaults, liveness included.
    const server = await startServer({ port: 0, host: '127.0.0.1', dataDir: mkdtempSync(path.join(os.tmpdir(), 'webring-bench-compute-')), teacherToken: TOKEN, joinSecret: JOIN_SECRET, clientDir: CLIENT_DIST, log: createLogger('warn') });
    const browser = await chromium.launch({ executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium', args: CHROMIUM_ARGS });
    try {
      rows.push(...(await tabRows(browser, server)));
    } finally {
      await browser.close();
      await server.close();
    }
  }
  mkdirSync(OUT_DIR, { recursive: true });
  writeFileSync(path.join(OUT_DIR, 'compute-thread.json'), `${JSON.stringify({ machine, rows }, null, 2)}\n`);
  writeFileSync(path.join(OUT_DIR, 'compute-thread.md'), markdown(rows, machine));
  console.log(`wrote bench/compute-thread.json and bench/compute-thread.md`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
