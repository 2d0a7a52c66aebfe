/**
 * `npm run screenshots:engines`: the student page in each engine a school has (issue 58),
 * at a phone's 390×844 and a laptop's 1280×800, into docs/screenshots/student-<engine>-<size>.png,
 * and at the phone's size before Join (…-before-join.png).
 * For each engine a tab joins a room beside one Node worker, as a student would, and the
 * two train 20 steps of the MLP; the shots are taken once the tab has trained, so the
 * status, the loss chart and the try panel have content. Chromium through Playwright,
 * Firefox ESR through puppeteer-core, WebKitGTK through WebKitWebDriver under Xvfb
 * (test/e2e/engines.ts). Asserts nothing: the shots are for a person to look at.
 */
import os from 'node:os';
import path from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { chromium } from '@playwright/test';
import { CHROMIUM_ARGS } from '../playwright.config';
import { buildClientIfNeeded, CLIENT_DIST } from '../signaling-server/build-client';
import { createLogger } from '../signaling-server/logger';
import { startServer } from '../signaling-server/server';
import { joinCodeFor } from '../signaling-server/edge/join-codes';
import { launchFirefox, startWebKitDriver, webkitSession } from '../test/e2e/engines';
import type { RoomStatus } from '../shared/protocol';

const TOKEN = 'screenshots-engines-token';
const JOIN_SECRET = Buffer.from('screenshots-engines-secret-0123');
const STEPS = 20;
const PHONE = { width: 390, height: 844 };
const SIZES = [PHONE, { width: 1280, height: 800 }];
const OUT = path.resolve(import.meta.dirname, '../docs/screenshots');
const TIMEOUT_MS = 5 * 60_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** What the script needs of a tab in any engine. */
interface Shooter {
  goto(url: string): Promise<void>;
  run<T>(body: string): Promise<T>;
  shoot(size: { width: number; height: number }, file: string): Promise<void>;
  close(): Promise<void>;
}

async function chromiumShooter(): Promise<Shooter> {
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium', args: CHROMIUM_ARGS });
  const page = await browser.newPage();
  return {
    goto: async (url) => void (await page.goto(url)),
    run: (body) => page.evaluate(`(() => { ${body} })()`),
    shoot: async (size, file) => {
      await page.setViewportSize(size);
      await page.screenshot({ path: file });
    },
    close: () => browser.close(),
  };
}

async function firefoxShooter(): Promise<Shooter> {
  const browser = await launchFirefox();
  const page = await browser.newPage();
  return {
    goto: async (url) => void (await page.goto(url)),
    run: <T>(body: string) => page.evaluate(`(() => { ${body} })()`) as Promise<T>,
    shoot: async (size, file) => {
      await page.setViewport(size);
      await sleep(300);
      await page.screenshot({ path: file as `${string}.png` });
    },
    close: () => browser.close(),
  };
}

async function webkitShooter(): Promise<Shooter> {
  const driver = await startWebKitDriver(93, 4493, () => undefined);
  const session = await webkitSession(driver);
  return {
    goto: (url) => session.goto(url),
    run: (body) => session.run(body),
    shoot: async (size, file) => {
      await session.resize(size);
      await sleep(300);
      writeFileSync(file, await session.screenshot());
    },
    close: async () => {
      await session.close();
      await driver.close();
    },
  };
}

async function main(): Promise<void> {
  await buildClientIfNeeded((m) => console.log(m));
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'webring-engines-'));
  const log = createLogger('warn');
  const server = await startServer({ port: 0, host: '127.0.0.1', dataDir, teacherToken: TOKEN, joinSecret: JOIN_SECRET, clientDir: CLIENT_DIST, log });
  const asTeacher = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
  const children: ChildProcess[] = [];
  try {
    for (const [engine, open] of [['chromium', chromiumShooter], ['firefox', firefoxShooter], ['webkit', webkitShooter]] as const) {
      const room = `engine-${engine}`;
      const code = joinCodeFor(JOIN_SECRET, room);
      const status = async () => (await (await fetch(`${server.url}/api/rooms/${room}`, { headers: asTeacher })).json()) as RoomStatus;
      const workerArgs = ['--import', 'tsx', 'node-worker/main.ts', '--url', server.url, '--room', room];
      workerArgs.push('--name', 'Ben', '--backend', 'cpu');
      const worker = spawn(process.execPath, workerArgs, {
        cwd: path.resolve(import.meta.dirname, '..'),
        env: { ...process.env, JOIN_CODE: code },
        stdio: 'ignore',
      });
      children.push(worker);
      const tab = await open();
      try {
        await tab.goto(`${server.url}/?room=${room}&code=${code}&name=Ada`);
        const prepared = () => tab.run<boolean>(`return document.getElementById('join').dataset.prepared === 'true';`);
        for (const end = Date.now() + TIMEOUT_MS; !(await prepared()); ) {
          if (Date.now() > end) throw new Error(`${engine}: the page was not ready to join`);
          await sleep(500);
        }
        // Before Join, at a phone's size: what the page says this device can and cannot do.
        const before = path.join(OUT, `student-${engine}-${PHONE.width}x${PHONE.height}-before-join.png`);
        await tab.shoot(PHONE, before);
        console.log(`wrote ${path.relative(process.cwd(), before)}`);
        await tab.run(`document.getElementById('join').click(); return true;`);
        for (const end = Date.now() + TIMEOUT_MS; (await status()).members.filter((m) => m.connected).length < 2; ) {
          if (Date.now() > end) throw new Error(`${engine}: the tab and the worker did not both join`);
          await sleep(500);
        }
        const body = JSON.stringify({ model: 'mlp', maxSteps: STEPS, resumeFrom: 'none' });
        const start = await fetch(`${server.url}/api/rooms/${room}/start`, { method: 'POST', headers: asTeacher, body });
        if (start.status !== 200) throw new Error(`${engine}: start: HTTP ${start.status} ${await start.text()}`);
        for (const end = Date.now() + TIMEOUT_MS; (await status()).state !== 'done'; ) {
          if (Date.now() > end) throw new Error(`${engine}: the run did not finish`);
          await sleep(1_000);
        }
        await sleep(2_000);
        for (const size of SIZES) {
          const file = path.join(OUT, `student-${engine}-${size.width}x${size.height}.png`);
          await tab.shoot(size, file);
          console.log(`wrote ${path.relative(process.cwd(), file)}`);
        }
      } finally {
        await tab.close();
        worker.kill('SIGKILL');
      }
    }
  } finally {
    for (const c of children) c.kill('SIGKILL');
    await server.close();
  }
}

await main();
