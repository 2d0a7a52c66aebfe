/**
 * The topology every part asks: the server (whose accusations it believes), the network
 * (which links it dials), the engine (whose messages it accepts) and the worker (which
 * neighbours it shows). Checked against the schedules themselves, so a change to either
 * that would let them disagree fails here.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { halvingDoublingPartners, leftOf, linkedRanks, rightOf, sendersOf } from '../../shared/protocol';
import { halvingDoublingPlan } from '../../shared/collectives/halving-doubling';

test('ring neighbours wrap around: rank 0 hears from the last rank, the last rank sends to rank 0', () => {
  assert.equal(leftOf(0, 5), 4);
  assert.equal(rightOf(4, 5), 0);
  for (let n = 2; n <= 9; n++) {
    for (let r = 0; r < n; r++) {
      assert.equal(rightOf(leftOf(r, n), n), r, `left then right is the identity (rank ${r} of ${n})`);
    }
  }
});

test('the halving-doubling partners the protocol names are exactly the ranks each schedule exchanges with', () => {
  for (let n = 1; n <= 70; n++) {
    for (let r = 0; r < n; r++) {
      const scheduled = new Set<number>();
      for (const stage of halvingDoublingPlan(r, n, 0).stages) {
        if (stage.sendTo >= 0) scheduled.add(stage.sendTo);
        if (stage.recvFrom >= 0) scheduled.add(stage.recvFrom);
      }
      assert.deepEqual(halvingDoublingPartners(r, n), [...scheduled].sort((a, b) => a - b), `partners of rank ${r} of ${n}`);
    }
  }
});

test('a rank accepts data exactly from its left neighbour and every rank that sends to it in halving-doubling', () => {
  for (let n = 1; n <= 17; n++) {
    // Who actually sends to each rank: the ring's left neighbour and every halving-doubling sendTo.
    const actual = Array.from({ length: n }, () => new Set<number>());
    for (let r = 0; r < n; r++) {
      if (n > 1) actual[rightOf(r, n)]!.add(r);
      for (const stage of halvingDoublingPlan(r, n, 1024).stages) if (stage.sendTo >= 0) actual[stage.sendTo]!.add(r);
    }
    for (let r = 0; r < n; r++) {
      assert.deepEqual([...sendersOf(r, n)].sort((a, b) => a - b), [...actual[r]!].sort((a, b) => a - b), `senders of rank ${r} of ${n}`);
    }
  }
});

test('a rank links to its neighbours first, then its partners, never to itself and never twice', () => {
  assert.deepEqual(linkedRanks(0, 1), []);
  assert.deepEqual(linkedRanks(0, 2), [1]);
  assert.deepEqual(linkedRanks(0, 8).slice(0, 2), [7, 1]);
  for (let n = 2; n <= 17; n++) {
    for (let r = 0; r < n; r++) {
      const linked = linkedRanks(r, n);
      assert.ok(!linked.includes(r), `rank ${r} of ${n} never links to itself`);
      assert.equal(new Set(linked).size, linked.length, `rank ${r} of ${n} links to each rank once`);
      for (const s of sendersOf(r, n)) assert.ok(linked.includes(s), `rank ${r} of ${n} has a link to its sender ${s}`);
    }
  }
});
