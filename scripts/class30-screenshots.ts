/**
 * `npm run screenshots:class30`: the README's class-of-thirty screenshots, from a real run.
 * Thirty Node workers (node-worker/main.ts, tfjs CPU backend) join the real server, with its
 * hub as `npm start` runs it, and train the MLP on the defaults; once the class has trained a while, the teacher page is shot at
 * 1280×800, its members card, and on Big screen, into docs/screenshots/. Everything shares
 * this machine's cores, so the speeds it shows are a laptop's running thirty students, not
 * a classroom's. Asserts nothing (test/e2e/class-of-thirty.spec.ts tests the page).
 */
import os from 'node:os';
import path from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { chromium } from '@playwright/test';
import { CHROMIUM_ARGS } from '../playwright.config';
import { buildClientIfNeeded, CLIENT_DIST } from '../signaling-server/build-client';
import { createLogger } from '../signaling-server/logger';
import { startServer } from '../signaling-server/server';
import { hubKeyFor, joinCodeFor } from '../signaling-server/edge/join-codes';
import { hubArguments, hubEnvironment, superviseHub } from '../signaling-server/hub-process';
import type { RoomStatus } from '../shared/protocol';

const TOKEN = 'screenshots-class30-token';
const JOIN_SECRET = Buffer.from('screenshots-class30-secret-0123');
const ROOM = 'class-of-thirty';
const NAMES = ['Ada', 'Ben', 'Chen', 'Dana', 'Eli', 'Fatima', 'Gus', 'Hana', 'Ivan', 'Jia', 'Kofi', 'Lea', 'Mateo', 'Noor', 'Olu', 'Priya', 'Quinn', 'Rosa', 'Sami', 'Tara', 'Umar', 'Vera', 'Wen', 'Xavi', 'Yara', 'Zoe', 'Aiko', 'Bo', 'Cyrus', 'Dev'];
/** Steps the class trains before the shot, so the speed, the loss curve and the ring's links have figures. */
const STEPS_BEFORE_SHOT = Number(process.env.SHOT_AT_STEP ?? 25);
/** Thirty workers importing tfjs on two cores, and their first steps. */
const TIMEOUT_MS = 15 * 60_000;
const LAPTOP = { width: 1280, height: 800 };
const OUT = path.resolve(import.meta.dirname, '../docs/screenshots');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function main(): Promise<void> {
  await buildClientIfNeeded((m) => console.log(m));
  const server = await startServer({ port: 0, host: '127.0.0.1', dataDir: mkdtempSync(path.join(os.tmpdir(), 'webring-class30-')), teacherToken: TOKEN, joinSecret: JOIN_SECRET, clientDir: CLIENT_DIST, log: createLogger('warn') });
  const log = createLogger('warn');
  const hub = superviseHub({
    command: process.execPath,
    args: hubArguments(server.url, ROOM),
    env: hubEnvironment(process.env, joinCodeFor(JOIN_SECRET, ROOM), hubKeyFor(JOIN_SECRET, ROOM)),
    cwd: path.resolve(import.meta.dirname, '..'),
    log,
    output: () => undefined,
  });
  const workers: ChildProcess[] = [];
  const status = async () => (await (await fetch(`${server.url}/api/rooms/${ROOM}`, { headers: { authorization: `Bearer ${TOKEN}` } })).json()) as RoomStatus;
  const until = async (what: string, ok: (r: RoomStatus) => boolean) => {
    const end = Date.now() + TIMEOUT_MS;
    for (;;) {
      const r = await status();
      if (ok(r)) return r;
      if (Date.now() > end) throw new Error(`${what}: not within ${TIMEOUT_MS / 60_000} min (room: ${r.state}, ${r.members.length} members, step ${r.step})`);
      await sleep(1_000);
    }
  };
  try {
    for (const name of NAMES) {
      const child = spawn(process.execPath, ['--import', 'tsx', 'node-worker/main.ts', '--url', server.url, '--room', ROOM, '--name', name, '--backend', 'cpu'], {
        cwd: path.resolve(import.meta.dirname, '..'),
        env: { ...process.env, JOIN_CODE: joinCodeFor(JOIN_SECRET, ROOM) },
        stdio: 'ignore',
      });
      workers.push(child);
    }
    await until('thirty and the hub joined', (r) => r.hub != null && r.members.filter((m) => m.connected).length === NAMES.length);
    console.log('thirty joined; starting the MLP on the defaults');
    const start = await fetch(`${server.url}/api/rooms/${ROOM}/start`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'mlp', resumeFrom: 'none' }) });
    if (start.status !== 200) throw new Error(`start: HTTP ${start.status} ${await start.text()}`);
    await until(`step ${STEPS_BEFORE_SHOT}`, (r) => r.step >= STEPS_BEFORE_SHOT);
    const browser = await chromium.launch({ executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium', args: CHROMIUM_ARGS });
    try {
      const page = await browser.newPage({ viewport: LAPTOP });
      await page.goto(`${server.url}/teacher?room=${ROOM}&token=${TOKEN}`);
      await page.locator('#ring-view .ring-node').nth(NAMES.length - 1).waitFor();
      // Two more steps on the page, so its speed and curves come from what it saw itself.
      const seen = (await status()).step;
      await until('two more steps', (r) => r.step >= seen + 2);
      await sleep(1_500);
      await page.screenshot({ path: path.join(OUT, 'teacher-class30-1280x800.png') });
      await page.locator('#members-card').screenshot({ path: path.join(OUT, 'teacher-class30-members.png') });
      await page.locator('#big-toggle').click();
      await page.getByTestId('ring-progress').waitFor();
      await page.screenshot({ path: path.join(OUT, 'teacher-class30-big.png') });
      const r = await status();
      console.log(`shot at step ${r.step}: ${r.members.length} members, ${r.dropped.length} dropped; into ${path.relative(process.cwd(), OUT)}`);
    } finally {
      await browser.close();
    }
  } finally {
    for (const w of workers) w.kill('SIGKILL');
    await hub.stop();
    await server.close();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
