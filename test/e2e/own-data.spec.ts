/**
 * The class's own data, end to end with Node workers (`--data DIR`): three machines each hold
 * PNG folders of only some digits (0–3, 4–6, 7–9), non-IID as a real class's collections
 * are. Together they learn all ten digits; one of them alone cannot. Each worker's examples
 * stay in its process: the server learns counts per class, and files it cannot read are
 * named and skipped. (The Collect panel and the tabs' own examples come with the student
 * page's part of the feature.)
 */
import { test, expect, type APIRequestContext } from '@playwright/test';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PNG } from 'pngjs';
import { E2E_TOKEN } from '../../playwright.config';
import type { RoomStatus } from '../../shared/protocol';
import { MNIST_PIXELS } from '../../shared/tasks/mnist/format';
import { mnistSubset } from '../support/mnist';
import { asTeacher, codeFor } from './helpers';

const teacher = { authorization: `Bearer ${E2E_TOKEN}` };
/** Each worker's digits: disjoint, as three students who each drew only some. */
const HOLDINGS = [
  { name: 'pc-low', digits: [0, 1, 2, 3] },
  { name: 'pc-mid', digits: [4, 5, 6] },
  { name: 'pc-high', digits: [7, 8, 9] },
];
const PER_DIGIT = 400;
const EPOCHS = 10;
const RUN = { model: 'mlp', data: 'own', dataset: 'mnist-10k', epochs: EPOCHS, batchSizePerWorker: 32, saveEverySteps: 100_000, resumeFrom: 'none' };

let root: string;

/** Writes PER_DIGIT training digits of each of `digits` as dark-on-white PNGs, a folder per class. */
function writeFolder(dir: string, digits: readonly number[]): void {
  const mnist = mnistSubset();
  for (const d of digits) {
    mkdirSync(path.join(dir, String(d)), { recursive: true });
    let written = 0;
    for (let i = 0; i < mnist.train.count && written < PER_DIGIT; i++) {
      if (mnist.train.labels[i] !== d) continue;
      const png = new PNG({ width: 28, height: 28 });
      for (let p = 0; p < MNIST_PIXELS; p++) {
        const paper = 255 - mnist.train.features[i * MNIST_PIXELS + p]!;
        png.data.set([paper, paper, paper, 255], p * 4);
      }
      writeFileSync(path.join(dir, String(d), `${String(written).padStart(4, '0')}.png`), PNG.sync.write(png));
      written++;
    }
  }
}

/** The workers of the run under way, for their last words if it does not end. */
const running: Array<{ output: string[] }> = [];

function startWorker(baseURL: string, room: string, name: string, data: string): { child: ChildProcess; output: string[] } {
  const output: string[] = [];
  const child = spawn(process.execPath, ['--import', 'tsx', 'node-worker/main.ts', '--url', baseURL, '--room', room, '--code', codeFor(room), '--name', name, '--backend', 'cpu', '--data', data], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  for (const stream of [child.stdout!, child.stderr!]) stream.on('data', (d: Buffer) => output.push(...d.toString().split('\n').filter(Boolean)));
  running.push({ output });
  return { child, output };
}

async function room(request: APIRequestContext, name: string): Promise<RoomStatus> {
  return (await (await request.get(`/api/rooms/${name}`, asTeacher)).json()) as RoomStatus;
}

/** Trains `RUN` (with `overrides`) in `name` to its end; the test accuracy on MNIST's test digits. */
async function train(request: APIRequestContext, name: string, overrides: Record<string, unknown> = {}): Promise<number> {
  // The room's new run, not a 'done' left from the run before.
  const before = (await room(request, name)).run ?? 0;
  expect((await request.post(`/api/rooms/${name}/start`, { headers: teacher, data: { ...RUN, ...overrides } })).status()).toBe(200);
  try {
    await expect.poll(async () => {
      const r = await room(request, name);
      return r.run > before && r.state === 'done';
    }, { timeout: 240_000, intervals: [1_000] }).toBe(true);
  } catch (err) {
    // What the machines said last: the first place to look when a run does not end.
    for (const w of running) console.log(w.output.slice(-15).join('\n'));
    throw err;
  }
  const done = await room(request, name);
  expect(done.metrics.accuracy).not.toBeNull();
  return done.metrics.accuracy!;
}

test.beforeAll(() => {
  root = mkdtempSync(path.join(os.tmpdir(), 'webring-own-'));
  for (const h of HOLDINGS) writeFolder(path.join(root, h.name), h.digits);
  // What a student's folder really holds now and then: a file that is not a PNG, and a broken one.
  writeFileSync(path.join(root, 'pc-low', '0', 'notes.txt'), 'not an image');
  writeFileSync(path.join(root, 'pc-low', '1', 'broken.png'), Buffer.from('\x89PNG\r\n\x1a\nnot really'));
});

test.afterAll(() => rmSync(root, { recursive: true, force: true }));

test('three machines that each hold only some digits learn all ten together, and one alone does not; the server learns counts per class', async ({ browser, request, baseURL }) => {
  test.setTimeout(480_000);
  const together = 'e2e-own-class';
  // The teacher names the lesson's classes (collecting): the server takes counts only for them.
  const digits = Array.from({ length: 10 }, (_, d) => String(d));
  expect((await request.put(`/api/rooms/${together}/collect`, { headers: teacher, data: { classes: digits } })).status()).toBe(200);
  const workers = HOLDINGS.map((h) => startWorker(baseURL!, together, h.name, path.join(root, h.name)));
  try {
    // Each worker tells the server its counts per class; the unreadable files are named and skipped.
    // The three start together, so they join in any order: compare by name.
    const byName = (rows: Array<[string, unknown]>) => [...rows].sort((x, y) => x[0].localeCompare(y[0]));
    await expect.poll(async () => byName((await room(request, together)).members.map((m) => [m.name, m.ownExamples])), { timeout: 60_000 }).toEqual(
      byName(HOLDINGS.map((h) => [h.name, Object.fromEntries(h.digits.map((d) => [String(d), PER_DIGIT]))])),
    );
    // The teacher's page shows each machine's counts, live, without a pixel.
    const page = await browser.newPage();
    await page.goto(`/teacher?room=${together}&token=${E2E_TOKEN}`);
    await expect(page.locator('tr', { hasText: 'pc-mid' }).getByTestId('member-own-examples')).toHaveText(`${3 * PER_DIGIT} own: 4 ${PER_DIGIT} · 5 ${PER_DIGIT} · 6 ${PER_DIGIT}`);
    await page.close();
    const low = workers[0]!.output.join('\n');
    expect(low).toContain(path.join(root, 'pc-low', '0', 'notes.txt'));
    expect(low).toMatch(new RegExp(`${path.join(root, 'pc-low', '1', 'broken.png').replace(/[.\\]/g, '\\$&')}: not a readable PNG`));

    const accuracy = await train(request, together);
    console.log(`[own-data] three machines, digits 0-3 / 4-6 / 7-9: test accuracy ${(accuracy * 100).toFixed(1)} % on all ten digits`);
    expect(accuracy).toBeGreaterThanOrEqual(0.85);

    // mnist+own: the server's digits stream in beside each machine's own, in one epoch.
    const mixed = await train(request, together, { data: 'dataset+own', epochs: 1 });
    console.log(`[own-data] the same machines on mnist+own, one epoch: test accuracy ${(mixed * 100).toFixed(1)} %`);
    expect(mixed).toBeGreaterThanOrEqual(0.85);
    expect((await room(request, together)).config?.data).toBe('dataset+own');
  } finally {
    for (const w of workers) w.child.kill('SIGKILL');
  }

  // The machine with 4-6 alone: it can know only its three digits.
  const alone = 'e2e-own-alone';
  const solo = startWorker(baseURL!, alone, 'pc-mid', path.join(root, 'pc-mid'));
  try {
    await expect.poll(async () => (await room(request, alone)).members.length, { timeout: 60_000 }).toBe(1);
    const accuracy = await train(request, alone);
    console.log(`[own-data] pc-mid alone (digits 4-6): test accuracy ${(accuracy * 100).toFixed(1)} %`);
    expect(accuracy).toBeLessThan(0.45);
  } finally {
    solo.child.kill('SIGKILL');
  }
});
