/**
 * `npm run lab -- --section secagg`'s arithmetic: the payload each mode implies, the step intervals
 * on the server's clock, the devices a class size gets, and the three targets.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cleanSeed, deviceFor, payloadBytes, stepIntervals } from '../../lab/secagg-rows';
import { secaggTargets, summarize } from '../../lab/secagg-report';
import type { SecaggAccuracyRow, SecaggMode, SecaggStepRow } from '../../lab/secagg-shapes';

test('payload: fp32 4 B a parameter, fp16 2, secure 4 and a check word; 2(N-1)/N of it for the ring and halving-doubling, once for the hub', () => {
  const params = 101_770;
  assert.equal(payloadBytes('fp32', 'ring', 8), (2 * 7 * params * 4) / 8);
  assert.equal(payloadBytes('fp16', 'halving-doubling', 8), (2 * 7 * params * 2) / 8);
  assert.equal(payloadBytes('secure', 'halving-doubling', 16), (2 * 15 * (params * 4 + 4)) / 16);
  assert.equal(payloadBytes('secure', 'hub', 8), params * 4 + 4);
});

test('step intervals: consecutive reports inside the window, a report that skips steps spread over them', () => {
  const history = [
    { at: 0, step: 9 },
    { at: 1000, step: 10 },
    { at: 2200, step: 11 },
    { at: 4200, step: 13 },
    { at: 5000, step: 14 },
  ];
  assert.deepEqual(stepIntervals(history, 10, 13), [1200, 1000, 1000]);
});

test('devices: 8 laptops fit two cores beside the server, 16 only as chromebooks', () => {
  assert.equal(deviceFor(8, 2), 'laptop');
  assert.equal(deviceFor(16, 2), 'chromebook');
  assert.equal(deviceFor(64, 2), null);
});

const cpu = { mean: 0.5, peak: 0.7, cores: 2, intervals: 4 };
function row(n: number, mode: SecaggMode, intervalsMs: number[], counts = true): SecaggStepRow {
  return {
    n, mode, device: 'laptop', config: {}, fromStep: 10, toStep: 10 + intervalsMs.length, stepMs: 0, stepMsQ1: 0, stepMsQ3: 0, intervalsMs,
    algorithm: 'halving-doubling', reason: '', timingMean: null, wireBytesByDevice: [], wireBytesPerStep: 800_000, payloadBytesPerStep: 712_000, cpu, counts, lost: null,
  };
}
const accuracy = (mode: SecaggMode, value: number): SecaggAccuracyRow => ({ ...row(8, mode, [1000]), dataset: 'mnist-10k', accuracy: value, steps: 32, seconds: 60 });

test('targets: the pooled secure step over fp32\'s at N = 8 and the largest N, and the accuracy difference in points', () => {
  const rows = [row(8, 'secure', [1100, 1120, 1140]), row(8, 'fp32', [1000, 1000, 1010]), row(8, 'secure', [1080]), row(16, 'secure', [3000, 3200]), row(16, 'fp32', [2500, 2500], false)];
  const summary = summarize(rows);
  assert.equal(summary.find((s) => s.n === 8 && s.mode === 'secure')!.stepMs, 1110);
  const [n8, n16, acc] = secaggTargets(summary, [accuracy('secure', 0.8815), accuracy('fp32', 0.8830)], 16);
  assert.equal(n8!.id, 'secagg-step-overhead-n8');
  assert.equal(n8!.value, 1.11);
  assert.equal(n8!.met, true);
  // 1.24 misses; and a window that did not count fails the target whatever its figure.
  assert.equal(n16!.id, 'secagg-step-overhead-n16');
  assert.equal(n16!.met, false);
  assert.ok(Math.abs(acc!.value! - -0.15) < 1e-9);
  assert.equal(acc!.met, true);
  assert.equal(secaggTargets(summary, [accuracy('secure', 0.87), accuracy('fp32', 0.8830)], 16)[2]!.met, false);
  assert.equal(secaggTargets([], [], 8).length, 2);
});

test('the accuracy runs\' seed: the first from the default whose one-epoch plan asks the data service for no example twice', async () => {
  const seed = await cleanSeed(8, 'mnist-10k', 32);
  assert.ok(seed >= 1234);
  // Found again from itself: its plan is clean, whatever the default's is.
  assert.equal(await cleanSeed(8, 'mnist-10k', 32, seed, 1), seed);
});
