/**
 * The other engines a school has, for the e2e specs (issue 58). Playwright drives only its
 * own browser builds, and none can be downloaded here, so:
 *  - Firefox ESR (Debian's firefox-esr) through puppeteer-core over WebDriver BiDi, with the
 *    two prefs that let its WebRTC connect on loopback (../shared/handbook/ENVIRONMENT.md);
 *  - WebKitGTK (Debian's webkit2gtk-driver) through WebKitWebDriver's W3C WebDriver, plain
 *    HTTP calls, its MiniBrowser on an Xvfb display started here. Debian builds it without
 *    RTCPeerConnection and WebGPU: it is this suite's browser without WebRTC.
 * Each tab is driven the way a student uses the page: open the class link, press Join, read
 * the status panel's data attributes.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import puppeteer, { type Browser as PuppeteerBrowser } from 'puppeteer-core';
import { programNeed, type Need } from '../support/requirements';

export const FIREFOX_PATH = '/usr/bin/firefox-esr';
export const WEBKIT_DRIVER_PATH = '/usr/bin/WebKitWebDriver';
const XVFB_PATH = '/usr/bin/Xvfb';
const MINIBROWSER_PATH = '/usr/lib/x86_64-linux-gnu/webkit2gtk-4.1/MiniBrowser';

export const firefoxNeeds = (): Need[] => [programNeed(FIREFOX_PATH, 'firefox-esr')];
export const webkitNeeds = (): Need[] => [programNeed(WEBKIT_DRIVER_PATH, 'webkit2gtk-driver'), programNeed(MINIBROWSER_PATH, 'webkit2gtk-driver'), programNeed(XVFB_PATH, 'xvfb')];

/** What a spec reads from any engine's student tab. */
export interface EngineTab {
  engine: 'firefox' | 'webkit';
  name: string;
  /** The status panel's data attributes (worker-status), as the Playwright specs read them. */
  status(): Promise<Record<string, string>>;
  /** Runs `script` (a function body returning JSON) in the page. */
  evaluate<T>(script: string): Promise<T>;
  close(): Promise<void>;
}

const READ_STATUS = `const el = document.querySelector('[data-testid=worker-status]'); return el ? { ...el.dataset } : {};`;
const PRESS_JOIN = `document.getElementById('join').click(); return true;`;

/** Headless Firefox ESR; one browser, a tab per student (each tab its own member). */
export async function launchFirefox(): Promise<PuppeteerBrowser> {
  return puppeteer.launch({
    browser: 'firefox',
    protocol: 'webDriverBiDi',
    executablePath: FIREFOX_PATH,
    headless: true,
    extraPrefsFirefox: {
      // Loopback host candidates, and real addresses instead of mDNS names: the tabs and the
      // Chromium ones all run on this machine.
      'media.peerconnection.ice.loopback': true,
      'media.peerconnection.ice.obfuscate_host_addresses': false,
    },
  });
}

/** A Firefox tab of `browser` that opens `url` (the class link) and presses Join. */
export async function firefoxStudent(browser: PuppeteerBrowser, url: string, name: string, log: (line: string) => void): Promise<EngineTab> {
  // A context per student: its own IndexedDB and its own connection, as separate devices.
  const context = await browser.createBrowserContext();
  const page = await context.newPage();
  page.on('console', (m) => log(`[${name}] ${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => log(`[${name}] pageerror: ${e instanceof Error ? e.message : String(e)}`));
  await page.goto(url);
  await page.waitForSelector('#join[data-prepared=true]', { timeout: 120_000 });
  const run = <T>(script: string) => page.evaluate(`(() => { ${script} })()`) as Promise<T>;
  await run(PRESS_JOIN);
  return {
    engine: 'firefox',
    name,
    status: () => run<Record<string, string>>(READ_STATUS),
    evaluate: run,
    close: () => context.close(),
  };
}

/** An Xvfb display and a WebKitWebDriver on free ports; `close` stops both. */
export interface WebKitDriver {
  url: string;
  close(): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function waitFor<T>(what: string, read: () => Promise<T | null>, timeoutMs: number): Promise<T> {
  const until = Date.now() + timeoutMs;
  let last: unknown = null;
  while (Date.now() < until) {
    try {
      const v = await read();
      if (v !== null) return v;
    } catch (err) {
      last = err;
    }
    await sleep(250);
  }
  throw new Error(`${what} within ${timeoutMs} ms${last ? ` (last: ${String(last)})` : ''}`);
}

/**
 * Starts Xvfb on `display` and WebKitWebDriver on `port`. One session per driver at a time
 * (ENVIRONMENT.md): a spec that wants two WebKit students starts two drivers.
 */
export async function startWebKitDriver(display: number, port: number, log: (line: string) => void): Promise<WebKitDriver> {
  const children: ChildProcess[] = [];
  const xvfb = spawn(XVFB_PATH, [`:${display}`, '-screen', '0', '1280x1024x24', '-nolisten', 'tcp'], { stdio: 'ignore' });
  children.push(xvfb);
  await sleep(500);
  const driver = spawn(WEBKIT_DRIVER_PATH, [`--port=${port}`], { env: { ...process.env, DISPLAY: `:${display}` }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(driver);
  for (const s of [driver.stdout, driver.stderr]) s?.on('data', (d: Buffer) => log(`[webkit driver ${port}] ${d.toString().trim()}`));
  const url = `http://127.0.0.1:${port}`;
  await waitFor('WebKitWebDriver answered', async () => ((await fetch(`${url}/status`)).ok ? true : null), 30_000);
  return {
    url,
    close: async () => {
      for (const c of children) c.kill('SIGKILL');
    },
  };
}

/** One W3C WebDriver command; its `value`, or an Error with the driver's message. */
async function command<T>(driver: string, method: 'GET' | 'POST' | 'DELETE', route: string, body?: unknown): Promise<T> {
  const res = await fetch(`${driver}${route}`, { method, headers: { 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
  const json = (await res.json()) as { value: T & { error?: string; message?: string } };
  if (!res.ok) throw new Error(`WebDriver ${method} ${route}: ${json.value?.error}: ${json.value?.message}`);
  return json.value;
}

/** A MiniBrowser session of `driver`, driven over W3C WebDriver. */
export interface WebKitSession {
  goto(url: string): Promise<void>;
  /** Runs `script` (a function body) in the page; its JSON result. */
  run<T>(script: string): Promise<T>;
  /** Sets the window's size (the page's viewport follows it). */
  resize(size: { width: number; height: number }): Promise<void>;
  /** The window's content as PNG bytes. */
  screenshot(): Promise<Buffer>;
  close(): Promise<void>;
}

export async function webkitSession(driver: WebKitDriver): Promise<WebKitSession> {
  const session = await command<{ sessionId: string }>(driver.url, 'POST', '/session', {
    capabilities: { alwaysMatch: { 'webkitgtk:browserOptions': { binary: MINIBROWSER_PATH, args: ['--automation'] } } },
  });
  const base = `/session/${session.sessionId}`;
  return {
    goto: (url) => command(driver.url, 'POST', `${base}/url`, { url }).then(() => undefined),
    run: <T>(script: string) => command<T>(driver.url, 'POST', `${base}/execute/sync`, { script, args: [] }),
    resize: (size) => command(driver.url, 'POST', `${base}/window/rect`, size).then(() => undefined),
    screenshot: async () => Buffer.from(await command<string>(driver.url, 'GET', `${base}/screenshot`), 'base64'),
    close: () => command(driver.url, 'DELETE', base).then(() => undefined),
  };
}

/** A WebKit MiniBrowser session of `driver` that opens `url` and presses Join. */
export async function webkitStudent(driver: WebKitDriver, url: string, name: string): Promise<EngineTab> {
  const session = await webkitSession(driver);
  await session.goto(url);
  await waitFor('the WebKit page ready to join', async () => ((await session.run<boolean>(`return document.getElementById('join')?.dataset.prepared === 'true';`)) ? true : null), 120_000);
  await session.run(PRESS_JOIN);
  return {
    engine: 'webkit',
    name,
    status: () => session.run<Record<string, string>>(READ_STATUS),
    evaluate: (script) => session.run(script),
    close: () => session.close(),
  };
}
