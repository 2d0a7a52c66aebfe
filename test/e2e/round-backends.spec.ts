/**
 * A local-steps round on every backend a tab can have, in the tab's own compute thread: the
 * device round on WebGPU and WebGL (the browser's own, over SwiftShader here), the host round
 * on WebAssembly and the CPU. On each, an epoch's end one step into a round (a round of one
 * short step), the evaluation that closes the epoch and the next epoch's first round give the
 * step-by-step path's weights (test/support/round-check.ts), and leave no tensor behind. The
 * same check runs in Node in test/unit/device-round.test.ts; WebGL exists only here.
 */
import { test, expect } from '@playwright/test';
import { mnistSubset } from '../support/mnist';
import { MNIST_PIXELS } from '../../shared/tasks/mnist/format';

const SHARE = 16;
/** The digits the check reads: 8 steps of SHARE. */
const ROWS = 8 * SHARE;

test('a round of one step at an epoch’s end, the evaluation and the next round match the step-by-step path on WebGPU, WebGL, WebAssembly and the CPU', async ({ page }) => {
  test.setTimeout(180_000);
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(m.text());
  });
  await page.goto('/round-check.html');
  const { train } = mnistSubset();
  const input = { share: SHARE, rowFloats: MNIST_PIXELS, features: Array.from(train.features.subarray(0, ROWS * MNIST_PIXELS)), labels: Array.from(train.labels.subarray(0, ROWS)) };
  const places: Record<string, string> = {};
  for (const backend of ['webgpu', 'webgl', 'wasm', 'cpu'] as const) {
    const report = await page.evaluate((args) => (window as unknown as { roundCheck(a: unknown): Promise<{ place: string; oneStepDiff: number; nextDiff: number; loss: number; tensorsLeft: number }> }).roundCheck(args), { ...input, backend });
    console.log(`[round-backends] ${backend}: ${JSON.stringify(report)}`);
    places[backend] = report.place;
    expect(report.loss, backend).toBeGreaterThan(0);
    expect(report.tensorsLeft, `${backend}: tensors left behind`).toBe(0);
  }
  expect(places).toEqual({ webgpu: 'device', webgl: 'device', wasm: 'host', cpu: 'host' });
  expect(errors).toEqual([]);
});
