/**
 * Students on other laptops reach the server by its LAN address. Over plain http that page
 * is not a secure context, so Chromium hides navigator.gpu (and crypto.subtle): the page
 * must say so and link its https twin. Over https (self-signed; the test context accepts it
 * as a student's "Proceed" does) the same page has WebGPU and trains on it.
 */
import os from 'node:os';
import tls from 'node:tls';
import { test, expect, type Browser, type Page } from '@playwright/test';
import { E2E_HTTPS_PORT, E2E_PORT, E2E_TOKEN } from '../../playwright.config';
import { CERTIFICATE_FINGERPRINT_BYTES, type ServerInfo } from '../../shared/protocol';
import { codeFor, status } from './helpers';

const ROOM = 'e2e-https';

/** 127.0.0.1 is always a secure context, so only a real LAN address can show the difference. */
function lanIPv4(): string {
  const found = Object.values(os.networkInterfaces())
    .flat()
    .find((a) => a && a.family === 'IPv4' && !a.internal);
  if (!found) {
    throw new Error('https.spec.ts needs a non-loopback IPv4 address, and os.networkInterfaces() lists none: connect this machine to a network');
  }
  return found.address;
}

async function open(browser: Browser, url: string): Promise<{ page: Page; errors: string[]; close: () => Promise<void> }> {
  const context = await browser.newContext({ ignoreHTTPSErrors: true });
  const page = await context.newPage();
  const errors: string[] = [];
  page.on('console', (msg) => {
    if (msg.type() === 'error') errors.push(msg.text());
  });
  page.on('pageerror', (err) => errors.push(err.message));
  await page.goto(url);
  return { page, errors, close: () => context.close() };
}

/** The SHA-256 fingerprint of the certificate the https port really serves, as a browser's viewer shows it. */
function servedFingerprint(): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port: E2E_HTTPS_PORT, rejectUnauthorized: false }, () => {
      resolve(socket.getPeerCertificate().fingerprint256);
      socket.end();
    });
    socket.on('error', reject);
  });
}

const security = (page: Page) =>
  page.evaluate(() => ({ secure: window.isSecureContext, gpu: navigator.gpu !== undefined, subtle: globalThis.crypto?.subtle !== undefined }));

test('GET /api/info names the https port and lists the LAN https URL first', async ({ request }) => {
  const lan = lanIPv4();
  const info = (await (await request.get('/api/info')).json()) as ServerInfo;
  expect(info.httpPort).toBe(E2E_PORT);
  expect(info.httpsPort).toBe(E2E_HTTPS_PORT);
  expect(info.defaultRoom).toBe('class');
  // The public info never hands out the join code.
  expect(JSON.stringify(info)).not.toContain(codeFor('class'));
  expect(info.studentUrls[0]).toMatch(/^https:/);
  expect(info.studentUrls).toContain(`https://${lan}:${E2E_HTTPS_PORT}/?room=${info.defaultRoom}`);
  expect(info.localUrl).toBe(`http://localhost:${E2E_PORT}/?room=${info.defaultRoom}`);
  // The start of the served certificate's fingerprint, for students to compare (issue 38).
  const served = await servedFingerprint();
  expect(info.certificateFingerprint).toBe(served.split(':').slice(0, CERTIFICATE_FINGERPRINT_BYTES).join(':'));
});

test("the teacher's joining card shows the certificate's fingerprint, for students to compare before they click through", async ({ browser }) => {
  const served = await servedFingerprint();
  const context = await browser.newContext();
  const teacher = await context.newPage();
  await teacher.goto(`http://127.0.0.1:${E2E_PORT}/teacher?room=${ROOM}&token=${E2E_TOKEN}`);
  const card = teacher.getByTestId('certificate-fingerprint');
  await expect(card).toContainText(served.split(':').slice(0, CERTIFICATE_FINGERPRINT_BYTES).join(':'));
  await expect(card).toContainText('click through');
  await context.close();
});

test('over https from the LAN address the page is a secure context and the student joins on WebGPU', async ({ browser }) => {
  const lan = lanIPv4();
  const student = await open(browser, `https://${lan}:${E2E_HTTPS_PORT}/?room=${ROOM}&code=${codeFor(ROOM)}&name=ada`);
  expect(await security(student.page)).toEqual({ secure: true, gpu: true, subtle: true });
  // One line about the certificate warning the student just clicked through.
  await expect(student.page.getByTestId('secure-notice')).toContainText('made its own certificate');
  await student.page.getByRole('button', { name: 'Join' }).click();
  await expect(status(student.page)).toHaveAttribute('data-rank', /^\d+$/, { timeout: 60_000 });
  await expect(status(student.page)).toHaveAttribute('data-backend', 'webgpu');
  expect(student.errors).toEqual([]);
  await student.close();
});

test('over plain http from the LAN address the page says why and links its https twin', async ({ browser }) => {
  const lan = lanIPv4();
  const student = await open(browser, `http://${lan}:${E2E_PORT}/?room=${ROOM}&code=${codeFor(ROOM)}&name=bob`);
  expect(await security(student.page)).toEqual({ secure: false, gpu: false, subtle: false });
  const notice = student.page.getByTestId('secure-notice');
  await expect(notice).toBeVisible();
  await expect(notice).toHaveAttribute('role', 'status');
  await expect(notice).toContainText('not secure');
  await expect(notice).toContainText('Advanced');
  // Issue 38: the page no longer calls clicking through "safe"; it asks for the teacher's fingerprint first.
  await expect(notice).toContainText('compare the start of its SHA-256 fingerprint with the one on the teacher’s screen');
  await expect(notice).not.toContainText('this is safe');
  // Issue 39: before any run, it says a plain-http tab cannot take part in a secure one.
  await expect(notice).toContainText('cannot take part in a secure run');
  const link = notice.getByTestId('secure-link');
  const httpsUrl = `https://${lan}:${E2E_HTTPS_PORT}/?room=${ROOM}&code=${codeFor(ROOM)}&name=bob`;
  await expect(link).toHaveAttribute('href', httpsUrl);

  await link.click();
  await expect(student.page).toHaveURL(httpsUrl);
  expect(await security(student.page)).toEqual({ secure: true, gpu: true, subtle: true });
  expect(student.errors).toEqual([]);
  await student.close();
});

test('on localhost over plain http the notice stays hidden', async ({ browser }) => {
  const student = await open(browser, `http://127.0.0.1:${E2E_PORT}/?room=${ROOM}&code=${codeFor(ROOM)}&name=cyd`);
  expect(await security(student.page)).toEqual({ secure: true, gpu: true, subtle: true });
  await expect(student.page.getByTestId('secure-notice')).toBeHidden();
  expect(student.errors).toEqual([]);
  await student.close();
});
