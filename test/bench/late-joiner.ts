/**
 * `npm run bench:join`: how long a late student waits, from pressing Join in a class that is
 * training to the first step in lock-step. Three tabs train the MLP on the product's
 * defaults (WebGPU through SwiftShader here); a fourth tab joins, is timed, and leaves, five
 * times. Each join is split into:
 *   - admission: from the click until the class admitted the joiner (the join handshake, the
 *     wait for the next admission, the links to its partners opening, the class's vote to
 *     switch);
 *   - hand-over: from the admission until the chief's live state arrived (the tab's `joinMs`);
 *   - first step: from the state until the end of its first step with examples of its own
 *     (`lockStepMs` less `joinMs`).
 * Prints the median and the worst, and writes bench/late-joiner.json and .md with the date,
 * the commit and the versions. All tabs share this machine's cores: the CPU regime, not a
 * network's. Asserts nothing.
 */
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { chromium, type Page } from '@playwright/test';
import { CHROMIUM_ARGS } from '../../playwright.config';
import { buildClientIfNeeded, CLIENT_DIST } from '../../signaling-server/build-client';
import { createLogger } from '../../signaling-server/logger';
import { startServer } from '../../signaling-server/server';
import { joinCodeFor } from '../../signaling-server/edge/join-codes';

const TOKEN = 'bench-join-token';
const JOIN_SECRET = Buffer.from('bench-join-secret-0123456789');
const ROOM = 'late-joiner';
const CLASS = 3;
const JOINS = Number(process.env.BENCH_JOINS ?? 5);
const OUT_DIR = path.resolve(import.meta.dirname, '../../bench');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Join {
  totalMs: number;
  admissionMs: number;
  handOverMs: number;
  firstStepMs: number;
}

const statusOf = (page: Page) => page.getByTestId('worker-status').evaluate((el) => ({ ...(el as HTMLElement).dataset }) as Record<string, string>);

async function main(): Promise<void> {
  await buildClientIfNeeded((m) => console.log(m));
  const server = await startServer({ port: 0, host: '127.0.0.1', dataDir: mkdtempSync(path.join(os.tmpdir(), 'webring-bench-join-')), teacherToken: TOKEN, joinSecret: JOIN_SECRET, clientDir: CLIENT_DIST, log: createLogger('warn') });
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium', args: CHROMIUM_ARGS });
  const link = (name: string) => `${server.url}/?room=${ROOM}&code=${joinCodeFor(JOIN_SECRET, ROOM)}&name=${name}`;
  const open = async (name: string): Promise<Page> => {
    const page = await (await browser.newContext()).newPage();
    await page.goto(link(name));
    return page;
  };
  try {
    for (let i = 0; i < CLASS; i++) {
      const page = await open(`s${i}`);
      await page.getByRole('button', { name: 'Join' }).click();
      await page.waitForFunction(() => /^\d+$/.test(document.querySelector<HTMLElement>('[data-testid="worker-status"]')?.dataset.rank ?? ''), null, { timeout: 120_000 });
    }
    const start = await fetch(`${server.url}/api/rooms/${ROOM}/start`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'mlp', maxSteps: 1_000_000, resumeFrom: 'none' }) });
    if (start.status !== 200) throw new Error(`start: HTTP ${start.status}`);
    await sleep(10_000);
    const joins: Join[] = [];
    for (let j = 0; j < JOINS; j++) {
      const page = await open(`late${j}`);
      // The tab is loaded and its device probed before the student presses Join, as in class.
      await page.getByRole('button', { name: 'Join' }).waitFor();
      const clickedAt = Date.now();
      await page.getByRole('button', { name: 'Join' }).click();
      let s = await statusOf(page);
      while (!s.lockStepMs) {
        if (Date.now() - clickedAt > 120_000) throw new Error(`join ${j}: not in lock-step after 120 s (${JSON.stringify(s)})`);
        await sleep(20);
        s = await statusOf(page);
      }
      const totalMs = Date.now() - clickedAt;
      const lockStepMs = Number(s.lockStepMs);
      const handOverMs = Number(s.joinMs);
      const join = { totalMs, admissionMs: totalMs - lockStepMs, handOverMs, firstStepMs: lockStepMs - handOverMs };
      joins.push(join);
      console.log(`join ${j + 1}: ${(totalMs / 1000).toFixed(2)} s to lock-step: admission ${join.admissionMs} ms, hand-over ${join.handOverMs} ms, first step ${join.firstStepMs} ms`);
      await page.context().close();
      await sleep(8_000);
    }
    report(joins, (await browser.version()) || 'unknown');
  } finally {
    await browser.close();
    await server.close();
  }
}

function report(joins: Join[], chromiumVersion: string): void {
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
  const worst = (xs: number[]) => Math.max(...xs);
  const parts = ['totalMs', 'admissionMs', 'handOverMs', 'firstStepMs'] as const;
  const summary = Object.fromEntries(parts.map((p) => [p, { median: median(joins.map((j) => j[p])), worst: worst(joins.map((j) => j[p])) }]));
  const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
  const result = {
    generatedAt: new Date().toISOString(),
    commit,
    versions: { node: process.version, chromium: chromiumVersion },
    machine: { cores: os.availableParallelism(), cpu: os.cpus()[0]?.model ?? 'unknown' },
    settings: { classTabs: CLASS, joins: JOINS, model: 'mlp', backend: 'webgpu (SwiftShader)', config: 'the product defaults' },
    regime: 'Four tabs and the server share this machine\'s cores over loopback: the CPU regime, not a network\'s',
    joins,
    summary,
  };
  writeFileSync(path.join(OUT_DIR, 'late-joiner.json'), `${JSON.stringify(result, null, 2)}\n`);
  const row = (label: string, p: (typeof parts)[number]) => `| ${label} | ${(summary[p]!.median / 1000).toFixed(2)} s | ${(summary[p]!.worst / 1000).toFixed(2)} s |`;
  writeFileSync(
    path.join(OUT_DIR, 'late-joiner.md'),
    [
      '# A late joiner: from Join to lock-step',
      '',
      `Measured ${result.generatedAt} on commit ${commit} by \`npm run bench:join\`: ${CLASS} tabs train the MLP on the product's defaults, a fourth joins ${JOINS} times (Node ${process.version}, Chromium ${chromiumVersion}, ${result.machine.cores} cores, ${result.machine.cpu}). ${result.regime}.`,
      '',
      '| | median | worst |',
      '|---|---|---|',
      row('Join to the first step in lock-step', 'totalMs'),
      row('admission (handshake, wait, links, the switch)', 'admissionMs'),
      row('hand-over of the live state', 'handOverMs'),
      row('first step', 'firstStepMs'),
      '',
      'Target (issue 39): 3 s median.',
      '',
    ].join('\n'),
  );
  console.log(`median ${(summary.totalMs!.median / 1000).toFixed(2)} s, worst ${(summary.totalMs!.worst / 1000).toFixed(2)} s; written to bench/late-joiner.md`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
