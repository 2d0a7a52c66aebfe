/**
 * `npm run bench:join`: how long a late student waits, from pressing Join in a class that is
 * training to the first step in lock-step. Three tabs train the MLP on the product's
 * defaults (WebGPU through SwiftShader here); a fourth tab joins, is timed, and leaves, five
 * times. Each join is split into:
 *   - admission: from the click until the server admitted the joiner (the join handshake and
 *     the admission window; the tab got ready, probe included, before the click);
 *   - hand-over: from the admission until the chief's live state arrived (the tab's `joinMs`):
 *     the links opening, the joiner's rehearsed step, the class's switch, the state;
 *   - first step: from the state until the end of its first step with examples of its own
 *     (`lockStepMs` less `joinMs`);
 * and beside them the class's pause at the switch (the chief's, RoomStatus.joins).
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
import type { RoomStatus } from '../../shared/protocol';

const TOKEN = 'bench-join-token';
const JOIN_SECRET = Buffer.from('bench-join-secret-0123456789');
const ROOM = 'late-joiner';
const CLASS = 3;
const JOINS = Number(process.env.BENCH_JOINS ?? 5);
const OUT_DIR = path.resolve(import.meta.dirname, '../../bench');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const PAUSE_WAIT_MS = 20_000;

interface Join {
  totalMs: number;
  admissionMs: number;
  handOverMs: number;
  firstStepMs: number;
  /** The class's pause at the switch that admitted the joiner (the chief's, RoomStatus.joins); null when not reported in time. */
  classPauseMs: number | null;
}

const statusOf = (page: Page) => page.getByTestId('worker-status').evaluate((el) => ({ ...(el as HTMLElement).dataset }) as Record<string, string>);

async function main(): Promise<void> {
  await buildClientIfNeeded((m) => console.log(m));
  const server = await startServer({ port: 0, host: '127.0.0.1', dataDir: mkdtempSync(path.join(os.tmpdir(), 'webring-bench-join-')), teacherToken: TOKEN, joinSecret: JOIN_SECRET, clientDir: CLIENT_DIST, log: createLogger('warn') });
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium', args: CHROMIUM_ARGS });
  /** The class's pause for the admission of `name`, once the chief has measured it (three steps after the switch). */
  const pauseOf = async (name: string): Promise<number | null> => {
    const end = Date.now() + PAUSE_WAIT_MS;
    while (Date.now() < end) {
      const room = (await (await fetch(`${server.url}/api/rooms/${ROOM}`, { headers: { authorization: `Bearer ${TOKEN}` } })).json()) as RoomStatus;
      const cost = room.joins.find((c) => c.joiners.includes(name));
      if (cost?.pauseMs != null) return cost.pauseMs;
      await sleep(250);
    }
    return null;
  };
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
      // The tab is loaded and its device probed before the student presses Join, as in class
      // (a name takes longer to type than the tab takes to get ready).
      await page.locator('#join[data-prepared="true"]').waitFor({ timeout: 120_000 });
      // BENCH_VERBOSE=1 prints the joiner's own log against the click: where its time went.
      const timeline: string[] = [];
      const clickedAt = Date.now();
      page.on('console', (m) => timeline.push(`+${Date.now() - clickedAt} ms ${m.text()}`));
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
      const classPauseMs = await pauseOf(`late${j}`);
      const join = { totalMs, admissionMs: totalMs - lockStepMs, handOverMs, firstStepMs: lockStepMs - handOverMs, classPauseMs };
      joins.push(join);
      if (process.env.BENCH_VERBOSE) console.log(timeline.join('\n'));
      console.log(`join ${j + 1}: ${(totalMs / 1000).toFixed(2)} s to lock-step: admission ${join.admissionMs} ms, hand-over ${join.handOverMs} ms, first step ${join.firstStepMs} ms; the class paused ${classPauseMs === null ? '?' : Math.round(classPauseMs)} ms`);
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
  const parts = ['totalMs', 'admissionMs', 'handOverMs', 'firstStepMs', 'classPauseMs'] as const;
  const summary = Object.fromEntries(
    parts.map((p) => {
      const xs = joins.map((j) => j[p]).filter((x): x is number => x !== null);
      return [p, xs.length === 0 ? null : { median: median(xs), worst: worst(xs) }];
    }),
  );
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
  const row = (label: string, p: (typeof parts)[number]) => {
    const v = summary[p];
    return v ? `| ${label} | ${(v.median / 1000).toFixed(2)} s | ${(v.worst / 1000).toFixed(2)} s |` : `| ${label} | – | – |`;
  };
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
      row('admission (the handshake, the admission window)', 'admissionMs'),
      row('hand-over (links, a rehearsed step, the switch, the state)', 'handOverMs'),
      row('first step', 'firstStepMs'),
      row('the class\'s pause at the switch (not part of the joiner\'s time)', 'classPauseMs'),
      '',
      'Target (issue 39): 3 s median.',
      '',
    ].join('\n'),
  );
  const total = summary.totalMs!;
  console.log(`median ${(total.median / 1000).toFixed(2)} s, worst ${(total.worst / 1000).toFixed(2)} s; written to bench/late-joiner.md`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
