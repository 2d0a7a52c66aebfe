/**
 * `npm run bench:tab-step`: one Chromium tab's training step, split as the chief reports it
 * (compute, read-back, the crossing to the compute thread, the optimizer's update with the
 * weights' hash), on each backend a tab can pick: WebGL (SwiftShader GL here), WebGPU
 * (SwiftShader) and the CPU. A room of one tab on the real server, the product's defaults,
 * the lab's MLP and CNN. It is the browser's half of `npm run bench:gpu` (which runs in
 * Node, where there is no WebGL).
 *
 *   node --import tsx test/bench/tab-step.ts [--out FILE.json] [--md FILE.md --before EARLIER.json]
 *
 * --before: the same script's --out on another commit (a worktree), the same machine.
 * Asserts nothing.
 */
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { chromium } from '@playwright/test';
import { CHROMIUM_ARGS } from '../../playwright.config';
import { buildClientIfNeeded, CLIENT_DIST } from '../../signaling-server/build-client';
import { createLogger } from '../../signaling-server/logger';
import { startServer } from '../../signaling-server/server';
import { joinCodeFor } from '../../signaling-server/edge/join-codes';
import type { RoomStatus, StepTimingReport } from '../../shared/protocol';
import { LAB_DATASETS, LAB_WORKLOADS, LAB_WORKLOAD_LIST, type LabModel } from '../../shared/tasks/lab-workloads';
import { commitOf } from './provenance';

const BACKENDS = ['webgl', 'webgpu', 'cpu'] as const;
const STEPS: Record<LabModel, number> = { [LAB_WORKLOADS.dense.model]: 30, [LAB_WORKLOADS.conv.model]: 8 };
const WARMUP_STEPS = 3;
const TOKEN = 'bench';
const JOIN_SECRET = randomBytes(32);
const POLL_MS = 100;

interface Row {
  backend: string;
  /** The backend the tab reported it trained on (a fallback shows here). */
  trainedOn: string;
  model: LabModel;
  steps: number;
  computeMs: number;
  readbackMs: number;
  crossMs: number;
  /** The update and the new weights' hash in the compute thread, as the chief reports it. */
  applyMs: number;
  /** Everything but compute: read-back, crossing, update and hash. */
  fixedMs: number;
}

interface Report {
  generatedAt: string;
  commit: string;
  versions: { node: string; chromium: string };
  machine: { cpu: string; cores: number };
  settings: { warmupSteps: number; batchSizePerWorker: 'the workload default'; room: 'one tab' };
  rows: Row[];
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(xs.length, 1);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const ms = (x: number) => (x < 10 ? x.toFixed(2) : x.toFixed(1));

async function measure(): Promise<Report> {
  await buildClientIfNeeded((m) => console.log(m));
  const server = await startServer({ port: 0, host: '127.0.0.1', dataDir: mkdtempSync(path.join(os.tmpdir(), 'webring-bench-tab-step-')), teacherToken: TOKEN, joinSecret: JOIN_SECRET, clientDir: CLIENT_DIST, log: createLogger('warn') });
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium', args: CHROMIUM_ARGS });
  const rows: Row[] = [];
  let counter = 0;
  try {
    for (const backend of BACKENDS) {
      for (const w of LAB_WORKLOAD_LIST) {
        const room = `bench-tab-step-${counter++}`;
        const context = await browser.newContext();
        const page = await context.newPage();
        await page.goto(`${server.url}/?room=${room}&code=${joinCodeFor(JOIN_SECRET, room)}&name=tab&backend=${backend}`);
        await page.getByRole('button', { name: 'Join' }).click();
        await page.waitForFunction(() => /^\d+$/.test(document.querySelector<HTMLElement>('[data-testid="worker-status"]')?.dataset.rank ?? ''), null, { timeout: 120_000 });
        const auth = { authorization: `Bearer ${TOKEN}` };
        const res = await fetch(`${server.url}/api/rooms/${room}/start`, { method: 'POST', headers: { 'content-type': 'application/json', ...auth }, body: JSON.stringify({ ...w.config, dataset: LAB_DATASETS.small.id, maxSteps: STEPS[w.model] + WARMUP_STEPS, resumeFrom: 'none' }) });
        if (!res.ok) throw new Error(`start: ${res.status} ${await res.text()}`);
        const samples = new Map<number, StepTimingReport>();
        let trainedOn = '';
        for (;;) {
          const status = (await (await fetch(`${server.url}/api/rooms/${room}`, { headers: auth })).json()) as RoomStatus;
          const chief = status.members[0];
          if (chief) trainedOn = chief.backend;
          if (chief?.collective && chief.step > WARMUP_STEPS) samples.set(chief.step, chief.collective.timing);
          if (status.state === 'done' || status.state === 'idle') break;
          await sleep(POLL_MS);
        }
        const t = [...samples.values()];
        const row: Row = {
          backend,
          trainedOn,
          model: w.model,
          steps: t.length,
          computeMs: mean(t.map((x) => x.computeMs)),
          readbackMs: mean(t.map((x) => x.readbackMs)),
          crossMs: mean(t.map((x) => x.crossMs)),
          applyMs: mean(t.map((x) => x.applyMs)),
          fixedMs: mean(t.map((x) => x.readbackMs + x.crossMs + x.applyMs)),
        };
        console.log(JSON.stringify(row));
        rows.push(row);
        await context.close();
      }
    }
  } finally {
    await server.close();
  }
  const version = browser.version();
  await browser.close();
  return {
    generatedAt: new Date().toISOString(),
    commit: commitOf(),
    versions: { node: process.version, chromium: version },
    machine: { cpu: os.cpus()[0]?.model ?? 'unknown', cores: os.availableParallelism() },
    settings: { warmupSteps: WARMUP_STEPS, batchSizePerWorker: 'the workload default', room: 'one tab' },
    rows,
  };
}

function markdown(report: Report, before: Report | null): string {
  const earlier = (r: Row) => before?.rows.find((b) => b.backend === r.backend && b.model === r.model);
  const lines = [
    "# One tab's step, split (`npm run bench:tab-step`)",
    '',
    `Measured ${report.generatedAt} on commit ${report.commit} (${report.machine.cpu}, ${report.machine.cores} cores, Node ${report.versions.node}, Chromium ${report.versions.chromium}): a room of one tab on the real server, the lab's workloads on the product's defaults, the mean of each step the chief reported after ${report.settings.warmupSteps} warm-up steps.` +
      (before ? ` Before: ${before.generatedAt} on commit ${before.commit}, the same machine and settings.` : ''),
    '',
    'Compute: forward and backward; read-back: the gradients to the host; crossing: the messages to and from the compute thread beyond the maths; update: the optimizer and the weights\' hash, in the thread. Fixed costs: everything but compute.',
    '',
    `| backend (trained on) | model | steps | compute ms | read-back | crossing | update | fixed costs${before ? ' | fixed before | update before' : ''} |`,
    `|---|---|---|---|---|---|---|---|${before ? '---|---|' : ''}`,
  ];
  for (const r of report.rows) {
    const b = earlier(r);
    const then = before ? (b ? ` | ${ms(b.fixedMs)} | ${ms(b.applyMs)}` : ' | – | –') : '';
    lines.push(`| ${r.backend} (${r.trainedOn}) | ${r.model} | ${r.steps} | ${ms(r.computeMs)} | ${ms(r.readbackMs)} | ${ms(r.crossMs)} | ${ms(r.applyMs)} | ${ms(r.fixedMs)}${then} |`);
  }
  return `${lines.join('\n')}\n`;
}

const { values } = parseArgs({ options: { out: { type: 'string' }, md: { type: 'string' }, before: { type: 'string' } } });
const report = await measure();
if (values.out) writeFileSync(values.out, `${JSON.stringify(report, null, 2)}\n`);
if (values.md) writeFileSync(values.md, markdown(report, values.before ? (JSON.parse(readFileSync(values.before, 'utf8')) as Report) : null));
process.exit(0);
