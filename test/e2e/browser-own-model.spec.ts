/**
 * examples/browser-own-model as a user runs it: the page (its own CNN and its own tf.data
 * dataset, importing `webring` as a package) is built with vite and served by an embedded
 * signaling server; three tabs open it, the first with the teacher token, and together they
 * fit the model: every tab ends with the same History of three epochs, the loss falls, and
 * the model predicts in each tab. WebRTC between real tabs, the maths in each tab's thread.
 */
import { test, expect, type Page } from '@playwright/test';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServer, type EmbeddedServer } from '../../signaling-server/library';
import { reportCspViolations } from './helpers';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const BUILT = path.join(ROOT, 'dist', 'examples', 'browser-own-model');
const ROOM = 'bars';
let server: EmbeddedServer;

test.beforeAll(async () => {
  execFileSync('npm', ['run', '--silent', 'build:lib'], { cwd: ROOT, stdio: 'inherit' });
  execFileSync(process.execPath, [path.join(ROOT, 'node_modules', 'vite', 'bin', 'vite.js'), 'build', 'examples/browser-own-model', '--outDir', BUILT, '--emptyOutDir', '--logLevel', 'warn'], { cwd: ROOT, stdio: 'inherit' });
  server = await startServer({ host: '127.0.0.1', clientDir: BUILT, logLevel: 'warn' });
});

test.afterAll(async () => {
  await server?.close();
});

interface History {
  loss: number[];
  val_loss: number[];
}

test('three tabs fit the example page\'s own CNN together', async ({ browser }) => {
  const errors: string[] = [];
  const tabs: Page[] = [];
  for (const [i, name] of ['tab-1', 'tab-2', 'tab-3'].entries()) {
    const context = await browser.newContext();
    await context.addInitScript(reportCspViolations);
    const page = await context.newPage();
    page.on('console', (m) => void (m.type() === 'error' && errors.push(`[${name}] ${m.text()}`)));
    page.on('pageerror', (e) => errors.push(`[${name}] ${e.message}`));
    await page.goto(`${server.url}/?room=${ROOM}&code=${server.joinCode(ROOM)}&name=${name}${i === 0 ? `&token=${server.teacherToken}` : ''}`);
    tabs.push(page);
  }
  const histories: History[] = [];
  for (const page of tabs) {
    await expect.poll(() => page.evaluate(() => (window as unknown as { webringHistory?: unknown }).webringHistory !== undefined), { timeout: 180_000 }).toBe(true);
    histories.push(await page.evaluate(() => (window as unknown as { webringHistory: History }).webringHistory));
    await expect(page.locator('#log')).toContainText(/bar: \d+% sure/);
    await expect(page.locator('#log')).toContainText('rank');
  }
  expect(histories[0]!.loss).toHaveLength(3);
  expect(histories[0]!.val_loss).toHaveLength(3);
  expect(histories[1]).toEqual(histories[0]);
  expect(histories[2]).toEqual(histories[0]);
  expect(histories[0]!.loss[2]!).toBeLessThan(histories[0]!.loss[0]!);
  expect(errors).toEqual([]);
});
