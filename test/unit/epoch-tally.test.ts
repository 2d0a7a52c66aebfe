/**
 * The per-epoch count of trained examples a replica logs (shared/training/epoch-tally.ts):
 * whole when the replica saw the epoch from its start, partial when it joined mid-epoch.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EpochTally } from '../../shared/training/epoch-tally';

test('an epoch is counted whole from its first step or from the end of the one before; a joiner mid-epoch counts a part', () => {
  const joiner = new EpochTally();
  joiner.add(0, 96, 32);
  joiner.add(0, -1, 32);
  assert.deepEqual(joiner.of(0), { epoch: 0, examples: 64, whole: false });
  joiner.add(1, -1, 10);
  assert.deepEqual(joiner.of(1), { epoch: 1, examples: 10, whole: true }, 'it was there when epoch 1 began');
  assert.deepEqual(joiner.of(0), { epoch: 0, examples: 64, whole: false }, 'the epoch before stays readable');
  const chief = new EpochTally();
  chief.add(0, 0, 32);
  assert.equal(chief.of(0)!.whole, true);
  assert.equal(chief.counting(0), true);
  assert.equal(chief.of(3), null);
});
