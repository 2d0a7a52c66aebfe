/**
 * The class's own data in browser tabs, non-IID as a real class's is: three tabs each hold
 * MNIST training digits of only some classes (0–3, 4–6, 7–9), added through the page's own
 * `window.webringOwnData.add` (the path a drawing takes). Together they learn all ten digits;
 * one of them alone cannot.
 *
 * And the privacy claim, checked by content rather than by message type: every byte the
 * server receives from the tabs (HTTP bodies and socket.io frames) is searched for each
 * example's pixels as float32, as bytes and as JSON numbers, and every data-channel message
 * a tab sends is scanned, in the tab, for a run of raw pixel values.
 *
 * Then the gradients themselves (docs/privacy.md): the run on the defaults masks them
 * (secure aggregation is on for own data), the same run unmasked reaches the same accuracy
 * within half a point, and what one tab sent its classmates in a step is handed to the
 * leak attack (lab/leak/): unmasked, it gives back that tab's drawings; masked, noise.
 */
import { test, expect, type CDPSession, type Page } from '@playwright/test';
import { E2E_TOKEN } from '../../playwright.config';
import type { RoomStatus } from '../../shared/protocol';
import { COLLECTIVE_TAG } from '../../shared/collectives/collective';
import { MNIST_PIXELS } from '../../shared/tasks/mnist/format';
import { mnistSubset } from '../support/mnist';
import { asTeacher, openStudent, status, type Student } from './helpers';
import { VANTAGES, ownValuesSeen } from '../../lab/leak/views';
import { cosine, denseCandidates } from '../../lab/leak/attack';

const teacher = { authorization: `Bearer ${E2E_TOKEN}` };
const HOLDINGS = [
  { name: 'amy', digits: [0, 1, 2, 3] },
  { name: 'bo', digits: [4, 5, 6] },
  { name: 'cy', digits: [7, 8, 9] },
];
const PER_DIGIT = 300;
const RUN = { model: 'mlp', data: 'own', dataset: 'mnist-10k', epochs: 8, batchSizePerWorker: 32, saveEverySteps: 1000, resumeFrom: 'none' };

/** Each tab's digits as MNIST stores them: a byte per pixel. */
function digitsOf(digits: readonly number[]): { labels: number[]; bytes: Uint8Array } {
  const mnist = mnistSubset();
  const labels: number[] = [];
  const chunks: Uint8Array[] = [];
  for (const d of digits) {
    for (let i = 0, n = 0; i < mnist.train.count && n < PER_DIGIT; i++) {
      if (mnist.train.labels[i] !== d) continue;
      labels.push(d);
      chunks.push(mnist.train.features.subarray(i * MNIST_PIXELS, (i + 1) * MNIST_PIXELS));
      n++;
    }
  }
  const bytes = new Uint8Array(chunks.length * MNIST_PIXELS);
  chunks.forEach((c, i) => bytes.set(c, i * MNIST_PIXELS));
  return { labels, bytes };
}

/** Adds the examples through the page's own API, as 784 values in 0..1. */
async function addOwn(page: Page, data: { labels: number[]; bytes: Uint8Array }): Promise<void> {
  await page.evaluate(
    async ({ labels, base64 }) => {
      const raw = Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
      for (let i = 0; i < labels.length; i++) {
        const pixels = Array.from(raw.subarray(i * 784, (i + 1) * 784), (v) => v / 255);
        await window.webringOwnData!.add(String(labels[i]), pixels);
      }
    },
    { labels: data.labels, base64: Buffer.from(data.bytes).toString('base64') },
  );
}

/**
 * Runs in every tab before its scripts: wraps RTCDataChannel.send to scan what leaves, in
 * all four byte alignments, for 12 float32 values in a row that are raw pixels (exactly
 * k/255 with k > 0). Gradients are sums of pixel × error terms: never that. (Playwright
 * serialises this function into the page, so it names its own constants.)
 */
function auditDataChannels(): void {
  const run = 12;
  const pixelValues = new Set<number>();
  for (let k = 1; k < 256; k++) pixelValues.add(Math.fround(k / 255));
  const audit = { messages: 0, bytes: 0, leaks: 0 };
  (window as unknown as { __dataChannelAudit: typeof audit }).__dataChannelAudit = audit;
  // And every message of the first gradient all-reduce this tab takes part in, as sent
  // (COLLECTIVE_TAG.gradients: the spec checks below that the two agree).
  const GRADIENTS_TAG = 14;
  const gradients = { step: -1, messages: [] as string[] };
  (window as unknown as { __gradientsSent: typeof gradients }).__gradientsSent = gradients;
  const send = RTCDataChannel.prototype.send;
  RTCDataChannel.prototype.send = function (this: RTCDataChannel, data: string | Blob | ArrayBuffer | ArrayBufferView) {
    const buffer = data instanceof ArrayBuffer ? new Uint8Array(data) : ArrayBuffer.isView(data) ? new Uint8Array(data.buffer, data.byteOffset, data.byteLength) : null;
    if (buffer) {
      audit.messages++;
      audit.bytes += buffer.byteLength;
      const copy = new Uint8Array(buffer);
      if (copy.byteLength > 20 && copy[2] === GRADIENTS_TAG) {
        const step = new DataView(copy.buffer).getUint32(12, true);
        if (gradients.step < 0) gradients.step = step;
        if (step === gradients.step) gradients.messages.push(btoa(String.fromCharCode(...copy)));
      }
      for (let align = 0; align < 4; align++) {
        const floats = new Float32Array(copy.buffer.slice(align, align + Math.floor((copy.byteLength - align) / 4) * 4));
        let inRow = 0;
        for (const v of floats) {
          inRow = pixelValues.has(v) ? inRow + 1 : 0;
          if (inRow >= run) {
            audit.leaks++;
            break;
          }
        }
      }
    }
    return send.call(this, data as never);
  };
}

/** Every byte one tab sends the server: HTTP bodies and socket.io frames (through the DevTools protocol). */
async function recordServerBound(page: Page): Promise<{ chunks: Buffer[]; cdp: CDPSession }> {
  const chunks: Buffer[] = [];
  page.on('request', (r) => {
    const body = r.postDataBuffer();
    if (body) chunks.push(body);
  });
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Network.enable');
  cdp.on('Network.webSocketFrameSent', (e) => chunks.push(e.response.opcode === 2 ? Buffer.from(e.response.payloadData, 'base64') : Buffer.from(e.response.payloadData)));
  return { chunks, cdp };
}

/** The first place an example's pixels show in `chunks`: as float32, as bytes, or as the JSON numbers a page would print; null when none. */
function findPixels(chunks: Buffer[], data: { bytes: Uint8Array }): string | null {
  const examples = data.bytes.length / MNIST_PIXELS;
  for (let e = 0; e < examples; e++) {
    const px = data.bytes.subarray(e * MNIST_PIXELS, (e + 1) * MNIST_PIXELS);
    // The example's inkiest row: 28 values that no other content would repeat.
    let row = 0;
    for (let r = 1; r < 28; r++) if (px.subarray(r * 28, r * 28 + 28).reduce((a, b) => a + b, 0) > px.subarray(row * 28, row * 28 + 28).reduce((a, b) => a + b, 0)) row = r;
    const values = Array.from(px.subarray(row * 28, row * 28 + 28), (v) => v / 255);
    const patterns = [
      ['bytes', Buffer.from(px.subarray(row * 28, row * 28 + 28))],
      ['float32', Buffer.from(new Float32Array(values).buffer)],
      ['JSON', Buffer.from(JSON.stringify(values).slice(1, -1))],
      ['JSON of float32', Buffer.from(JSON.stringify(Array.from(new Float32Array(values))).slice(1, -1))],
    ] as const;
    for (const chunk of chunks) for (const [kind, pattern] of patterns) if (chunk.indexOf(pattern) >= 0) return `example ${e} as ${kind}`;
  }
  return null;
}

async function room(request: import('@playwright/test').APIRequestContext, name: string): Promise<RoomStatus> {
  return (await (await request.get(`/api/rooms/${name}`, asTeacher)).json()) as RoomStatus;
}

/**
 * What `tab` sent in its first gradient all-reduce, handed to the leak attack as each
 * receiver would read it: the best cosine similarity of any reconstruction to any of the
 * tab's own drawings, over the pixels that receiver saw. Then forgets the recording.
 */
async function bestLeak(tab: Student, rank: number, worldSize: number, data: { bytes: Uint8Array }): Promise<number> {
  const sent = await tab.page.evaluate(() => {
    const g = (window as unknown as { __gradientsSent: { step: number; messages: string[] } }).__gradientsSent;
    const messages = g.messages;
    Object.assign(g, { step: -1, messages: [] });
    return messages;
  });
  expect(sent.length).toBeGreaterThan(0);
  const messages = sent.map((b) => new Uint8Array(Buffer.from(b, 'base64')));
  const drawings = Array.from({ length: data.bytes.length / MNIST_PIXELS }, (_, e) => Float32Array.from(data.bytes.subarray(e * MNIST_PIXELS, (e + 1) * MNIST_PIXELS), (v) => v / 255));
  let best = 0;
  // Whichever algorithm the step took, its messages say (the ring's, halving-doubling's or the hub's phases).
  for (const vantage of VANTAGES) {
    const phases = vantage === 'ring neighbour' ? [1] : vantage === 'hub' ? [4] : [3];
    if (!messages.some((m) => phases.includes(m[0]!))) continue;
    const seen = ownValuesSeen(messages, vantage, rank, worldSize);
    if (!seen) continue;
    for (const c of denseCandidates(seen)) for (const x of drawings) best = Math.max(best, cosine(c.pixels, x));
  }
  return best;
}

/**
 * Trains `RUN` (with `overrides`) in `name` to its end; the test accuracy. It waits for the
 * room's new run to be done: right after a second Start the tabs may still show the first
 * run's 'done', and the room's metrics are already the new run's (no accuracy yet).
 */
async function train(request: import('@playwright/test').APIRequestContext, name: string, tabs: Student[], overrides: object = {}): Promise<number> {
  const before = (await room(request, name)).run ?? 0;
  expect((await request.post(`/api/rooms/${name}/start`, { headers: teacher, data: { ...RUN, ...overrides } })).status()).toBe(200);
  await expect.poll(async () => {
    const r = await room(request, name);
    return r.run > before && r.state === 'done';
  }, { timeout: 240_000, intervals: [1_000] }).toBe(true);
  for (const { page } of tabs) await expect(status(page)).toHaveAttribute('data-state', 'done', { timeout: 60_000 });
  const done = await room(request, name);
  expect(done.metrics.accuracy).not.toBeNull();
  return done.metrics.accuracy!;
}

test("three tabs that each hold only some digits learn all ten; one alone does not; no example's pixels reach the server or a peer", async ({ browser, request }) => {
  test.setTimeout(480_000);
  expect(auditDataChannels.toString(), "the page's audit looks for the gradients' tag").toContain(`GRADIENTS_TAG = ${COLLECTIVE_TAG.gradients};`);
  const together = 'e2e-own-tabs';
  const data = HOLDINGS.map((h) => digitsOf(h.digits));
  const tabs: Student[] = [];
  for (const h of HOLDINGS) tabs.push(await openStudent(browser, together, h.name, '&backend=cpu', '', { initScript: auditDataChannels }));
  const recorders = await Promise.all(tabs.map((t) => recordServerBound(t.page)));
  expect((await request.put(`/api/rooms/${together}/collect`, { headers: teacher, data: { classes: ['0', '1', '2', '3', '4', '5', '6', '7', '8', '9'] } })).status()).toBe(200);
  for (const [i, t] of tabs.entries()) {
    await expect(t.page.getByTestId('collect-panel')).toBeVisible();
    await addOwn(t.page, data[i]!);
  }
  await expect.poll(async () => (await room(request, together)).members.map((m) => Object.values(m.ownExamples).reduce((a, b) => a + b, 0)), { timeout: 15_000 }).toEqual(
    HOLDINGS.map((h) => h.digits.length * PER_DIGIT),
  );

  // The detectors can fail: raw pixels sent down a data channel, or written into a body, are found.
  const control = await tabs[0]!.page.evaluate(() => {
    const audit = (window as unknown as { __dataChannelAudit: { messages: number; bytes: number; leaks: number } }).__dataChannelAudit;
    const channel = new RTCPeerConnection().createDataChannel('control');
    const pixels = new Float32Array(784).map((_, i) => ((i * 7) % 255) / 255 + 1 / 255);
    try {
      channel.send(new Uint8Array([1, 2, 3, ...new Uint8Array(pixels.buffer)]));
    } catch (err) {
      // Not open yet: the audit has already looked at what would have gone.
      console.info(`control message not sent: ${String(err)}`);
    }
    const found = audit.leaks;
    Object.assign(audit, { messages: 0, bytes: 0, leaks: 0 });
    return found;
  });
  expect(control).toBe(1);
  expect(findPixels([Buffer.concat([Buffer.from('{"x":'), Buffer.from(data[2]!.bytes.subarray(784 * 5, 784 * 6)), Buffer.from('}')])], data[2]!)).toBe('example 5 as bytes');

  // The defaults: own data masks every gradient.
  const accuracy = await train(request, together, tabs);
  console.log(`[own-data-tabs] three tabs, digits 0-3 / 4-6 / 7-9: test accuracy ${(accuracy * 100).toFixed(1)} % on all ten digits`);
  expect(accuracy).toBeGreaterThanOrEqual(0.85);
  expect((await room(request, together)).config?.secureAggregation).toBe(true);
  await expect(status(tabs[2]!.page)).toHaveAttribute('data-secure', 'true');
  await expect(tabs[2]!.page.getByTestId('privacy')).toContainText("Only the class's sum of updates leaves this device, masked");
  const cy = HOLDINGS.length - 1;
  const maskedLeak = await bestLeak(tabs[cy]!, cy, HOLDINGS.length, data[cy]!);

  // The same run unmasked: the same accuracy, and what cy sent gives its drawings away.
  const plain = await train(request, together, tabs, { secureAggregation: false });
  await expect(tabs[2]!.page.getByTestId('privacy')).toContainText('leaves this device unmasked');
  const plainLeak = await bestLeak(tabs[cy]!, cy, HOLDINGS.length, data[cy]!);
  console.log(
    `[own-data-tabs] unmasked: test accuracy ${(plain * 100).toFixed(1)} % (masked ${(accuracy * 100).toFixed(1)} %); the leak attack on what cy sent in a step: best similarity to one of its drawings ${plainLeak.toFixed(3)} unmasked, ${maskedLeak.toFixed(3)} masked`,
  );
  expect(Math.abs(plain - accuracy)).toBeLessThanOrEqual(0.005);
  // 0.95: closer than any other digit comes to a drawing (npm run leak: the nearest of 2,000 others scores 0.78-0.85).
  expect(plainLeak).toBeGreaterThanOrEqual(0.95);
  // Masked words read as a gradient are noise: their best match is no closer than chance.
  expect(maskedLeak).toBeLessThan(0.5);

  // Privacy, by content: nothing the server received, and nothing a tab sent a peer, holds an example.
  const audits = await Promise.all(tabs.map((t) => t.page.evaluate(() => (window as unknown as { __dataChannelAudit: { messages: number; bytes: number; leaks: number } }).__dataChannelAudit)));
  console.log(`[own-data-tabs] data channels: ${audits.map((a) => `${a.messages} messages, ${(a.bytes / 1e6).toFixed(1)} MB`).join('; ')}; to the server: ${recorders.map((r) => `${r.chunks.length} frames and bodies`).join('; ')}`);
  for (const a of audits) {
    expect(a.messages).toBeGreaterThan(100);
    expect(a.leaks).toBe(0);
  }
  for (const [i, r] of recorders.entries()) {
    expect(r.chunks.length).toBeGreaterThan(10);
    expect(findPixels(r.chunks, data[i]!)).toBeNull();
  }
  for (const r of recorders) await r.cdp.detach();
  expect(tabs.flatMap((t) => t.errors)).toEqual([]);
  for (const t of tabs) await t.context.close();

  // The tab with 4-6 alone, with the same examples in a room of its own.
  const alone = 'e2e-own-tab-alone';
  const solo = await openStudent(browser, alone, 'bo', '&backend=cpu');
  expect((await request.put(`/api/rooms/${alone}/collect`, { headers: teacher, data: { classes: ['0', '1', '2', '3', '4', '5', '6', '7', '8', '9'] } })).status()).toBe(200);
  await expect(solo.page.getByTestId('collect-panel')).toBeVisible();
  await addOwn(solo.page, data[1]!);
  const soloAccuracy = await train(request, alone, [solo]);
  console.log(`[own-data-tabs] bo alone (digits 4-6): test accuracy ${(soloAccuracy * 100).toFixed(1)} %`);
  expect(soloAccuracy).toBeLessThan(0.45);
  await solo.context.close();
});
