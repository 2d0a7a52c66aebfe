import { expect, type Browser, type BrowserContext, type Page } from '@playwright/test';
import { hubKeyFor, joinCodeFor } from '../../signaling-server/edge/join-codes';
import { E2E_JOIN_SECRET, E2E_TOKEN } from '../../playwright.config';

/** Reading a room's API needs its join code, a member token or the teacher token: the tests read as the teacher. */
export const asTeacher = { headers: { authorization: `Bearer ${E2E_TOKEN}` } };

/** The join code of `room` on the e2e server. */
export const codeFor = (room: string): string => joinCodeFor(Buffer.from(E2E_JOIN_SECRET), room);

/** The hub key of `room` on the e2e server: what the teacher's server hands its hub (HUB_KEY). */
export const hubKeyOf = (room: string): string => hubKeyFor(Buffer.from(E2E_JOIN_SECRET), room);

/**
 * Chromium logs a Content-Security-Policy violation where Playwright's console events do not
 * see it; this init script turns each into a console error, which the tests fail on.
 */
export function reportCspViolations(): void {
  document.addEventListener('securitypolicyviolation', (e) => console.error(`CSP violation: ${e.violatedDirective} blocked ${e.blockedURI || 'inline'} in ${e.sourceFile}:${e.lineNumber}`));
}

export interface Student {
  context: BrowserContext;
  page: Page;
  errors: string[];
  /** The same errors with when they came and, for a console message, the address it names (a failed load's resource). */
  errorLog: LoggedError[];
}

export interface LoggedError {
  at: number;
  text: string;
  url: string;
}

/**
 * Every student gets its own browser context, as separate laptops would; each opens the
 * class link (room and code). `code` is the room's join code on another server than the
 * e2e one; `initScript` runs in the page before its own scripts; `beforeJoin` runs on the
 * loaded page before Join is pressed.
 */
export async function openStudent(
  browser: Browser,
  room: string,
  name: string,
  query = '',
  origin = '',
  options: { code?: string; initScript?: () => void; beforeJoin?: (page: Page) => Promise<void> } = {},
): Promise<Student> {
  const context = await browser.newContext();
  await context.addInitScript(reportCspViolations);
  if (options.initScript) await context.addInitScript(options.initScript);
  const page = await context.newPage();
  const errors: string[] = [];
  const errorLog: LoggedError[] = [];
  page.on('console', (msg) => {
    if (msg.type() === 'error') {
      errors.push(`[${name}] ${msg.text()}`);
      errorLog.push({ at: Date.now(), text: `[${name}] ${msg.text()}`, url: msg.location().url });
    }
    if (process.env.E2E_VERBOSE) console.log(`[${name}] ${msg.type()}: ${msg.text()}`);
  });
  page.on('pageerror', (err) => {
    errors.push(`[${name}] ${err.message}`);
    errorLog.push({ at: Date.now(), text: `[${name}] ${err.message}`, url: '' });
  });
  await page.goto(`${origin}/?room=${room}&code=${options.code ?? codeFor(room)}&name=${name}${query}`);
  await options.beforeJoin?.(page);
  await page.getByRole('button', { name: 'Join' }).click();
  await expect(status(page)).toHaveAttribute('data-rank', /^\d+$/, { timeout: 60_000 });
  return { context, page, errors, errorLog };
}

export const status = (page: Page) => page.getByTestId('worker-status');

export async function readStatus(page: Page): Promise<Record<string, string>> {
  return status(page).evaluate((el) => ({ ...(el as HTMLElement).dataset }) as Record<string, string>);
}

/** Draws a stroke through points given as fractions of the canvas `testId`. */
export async function draw(page: Page, testId: string, points: Array<[number, number]>): Promise<void> {
  const canvas = page.getByTestId(testId).first();
  await canvas.scrollIntoViewIfNeeded();
  const box = (await canvas.boundingBox())!;
  const at = ([x, y]: [number, number]) => [box.x + x * box.width, box.y + y * box.height] as const;
  await page.mouse.move(...at(points[0]!));
  await page.mouse.down();
  for (const p of points.slice(1)) await page.mouse.move(...at(p), { steps: 8 });
  await page.mouse.up();
}

/**
 * The teacher page of `room` in a context of its own: waits for `members` rows, then starts
 * a run of `steps` steps of the small MLP. The caller closes the context.
 */
export async function startMlpRun(browser: Browser, room: string, members: number, steps: number): Promise<{ teacher: Page; teacherContext: BrowserContext }> {
  const teacherContext = await browser.newContext();
  const teacher = await teacherContext.newPage();
  await teacher.goto(`/teacher?room=${room}&token=${E2E_TOKEN}`);
  await expect(teacher.getByTestId('members').locator('tr')).toHaveCount(members);
  await teacher.locator('select[name=model]').selectOption('mlp');
  await openAdvanced(teacher);
  await teacher.locator('input[name=maxSteps]').fill(String(steps));
  await teacher.getByRole('button', { name: 'Start' }).click();
  return { teacher, teacherContext };
}

/** Opens the teacher form's Advanced section, where everything but the lesson's few choices is. */
export async function openAdvanced(teacher: Page): Promise<void> {
  const advanced = teacher.getByTestId('advanced-settings');
  if (!(await advanced.evaluate((d) => (d as HTMLDetailsElement).open))) await advanced.locator('summary').click();
}

/**
 * An init script for a tab that can open no WebRTC link, as behind Wi-Fi client isolation
 * or blocked UDP: its connections gather no candidate (the relay-only policy with no TURN
 * server), so no direct connection ever opens. Self-contained: Playwright runs it in the page.
 */
export function isolateWebRtc(): void {
  const Real = window.RTCPeerConnection;
  window.RTCPeerConnection = class extends Real {
    constructor(config?: RTCConfiguration) {
      super({ ...config, iceServers: [], iceTransportPolicy: 'relay' });
    }
  };
}
