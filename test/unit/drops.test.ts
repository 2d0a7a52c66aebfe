/**
 * What a dropped worker does (shared/training/drops.ts): a straggler comes back by itself,
 * measuring its speed again first, three times in a row at doubling waits, then waits for its
 * student's Join; a straggler left alone long enough starts the count over. A device whose
 * links would not open backs off as before; an evicted one never comes back by itself. The
 * real thing, with Node workers: test/class/slow-compute.test.ts; in tabs: test/e2e/elastic.spec.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DropPolicy, MAX_STRAGGLER_RETURNS, REJOIN_FORGIVEN_AFTER_MS, STRAGGLER_REJOIN_DELAY_MS } from '../../shared/training/drops';
import type { MemberDropped } from '../../shared/protocol';

const straggler: MemberDropped = { reason: 'straggler', step: 34, computeMs: 1122, deadlineMs: 1000 };

test('a straggler comes back by itself, measured again, three times in a row at doubling waits; then its student joins it again', () => {
  const policy = new DropPolicy();
  const waits: Array<number | null> = [];
  let now = 0;
  for (let i = 0; i <= MAX_STRAGGLER_RETURNS; i++) {
    const out = policy.dropped(straggler, now);
    waits.push(out.rejoinInMs);
    assert.equal(out.error.code, 'ERR_DROPPED');
    assert.match(out.error.message, /1122 ms per step; the ring's deadline is 1000 ms/);
    if (i < MAX_STRAGGLER_RETURNS) {
      assert.equal(out.reprobe, true, 'it measures its speed before it rejoins');
      assert.match(out.error.message, new RegExp(`rejoins by itself in ${(STRAGGLER_REJOIN_DELAY_MS * 2 ** i) / 1000} s, with a share that fits \\(return ${i + 1} of ${MAX_STRAGGLER_RETURNS}\\)`));
    } else {
      assert.equal(out.reprobe, false);
      assert.match(out.error.message, /no longer rejoins by itself: Join again/);
    }
    now += 30_000;
  }
  assert.deepEqual(waits, [STRAGGLER_REJOIN_DELAY_MS, 2 * STRAGGLER_REJOIN_DELAY_MS, 4 * STRAGGLER_REJOIN_DELAY_MS, null]);
  // Left alone long enough, it is forgiven: the next drop is a first return again.
  const later = policy.dropped(straggler, now + REJOIN_FORGIVEN_AFTER_MS + 1);
  assert.equal(later.rejoinInMs, STRAGGLER_REJOIN_DELAY_MS);
});

test('an unreachable device backs off by itself without a new probe; an evicted one waits for its student', () => {
  const policy = new DropPolicy();
  const first = policy.dropped({ reason: 'unreachable', step: 3, detail: 'links shut' }, 0);
  const second = policy.dropped({ reason: 'unreachable', step: 4, detail: 'links shut' }, 1_000);
  assert.deepEqual([first.rejoinInMs, second.rejoinInMs, first.reprobe], [500, 1_000, false]);
  const evicted = policy.dropped({ reason: 'evicted', step: 5, misbehaviour: 'non-finite', detail: 'NaN' }, 2_000);
  assert.equal(evicted.rejoinInMs, null);
});
