import { test } from 'node:test';
import assert from 'node:assert/strict';
import { StragglerDetector } from '../../shared/training/straggler';

const ids = ['a', 'b', 'c', 'd'];

test('a member slower than median + k·MAD for `strikes` steps in a row is a straggler; jitter is not', () => {
  const d = new StragglerDetector({ floorMs: 100, k: 6, strikes: 3, minSamples: 12, windowSteps: 30 });
  // Warm-up: no deadline yet, even for a slow step.
  assert.deepEqual(d.observe(ids, [50, 52, 48, 900]), []);
  assert.equal(d.deadlineMs, null);
  for (let s = 0; s < 10; s++) assert.deepEqual(d.observe(ids, [50 + (s % 3), 49, 51 + (s % 2), 50]), []);
  assert.ok(d.deadlineMs! >= 100 && d.deadlineMs! < 120, `deadline ${d.deadlineMs}`);
  // One slow step (a GC pause), then normal: no strike survives.
  assert.deepEqual(d.observe(ids, [50, 49, 400, 50]), []);
  assert.deepEqual(d.observe(ids, [50, 49, 50, 50]), []);
  // d is slow three times in a row: dropped on the third, with its numbers.
  assert.deepEqual(d.observe(ids, [50, 49, 50, 700]), []);
  assert.deepEqual(d.observe(ids, [50, 49, 50, 700]), []);
  const out = d.observe(ids, [50, 49, 50, 700]);
  assert.equal(out.length, 1);
  assert.equal(out[0]!.id, 'd');
  assert.equal(out[0]!.computeMs, 700);
  assert.equal(out[0]!.strikes, 3);
  // The slow member's own times do not drag the deadline up: it stays near the floor.
  assert.ok(out[0]!.deadlineMs < 150, `deadline ${out[0]!.deadlineMs}`);
});

test('the floor keeps fast rings from dropping members for ordinary jitter', () => {
  const d = new StragglerDetector({ floorMs: 1000, k: 6, strikes: 3, minSamples: 4, windowSteps: 30 });
  for (let s = 0; s < 20; s++) assert.deepEqual(d.observe(ids, [5, 5, 5, s % 2 ? 900 : 5]), []);
  assert.equal(d.deadlineMs, 1000);
});
