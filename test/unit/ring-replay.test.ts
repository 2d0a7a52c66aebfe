/**
 * Replayed ring messages (issue 7 §6). Replays of an earlier step and of an earlier
 * generation are dropped; see 'messages of an already finished step are dropped' and
 * 'messages from a stale generation are dropped…' in ring-allreduce.test.ts. What this file
 * adds: a message replayed *within* the collective that is running.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createMemoryRing } from '../support/memory-ring';
import { expectedSum, integerBuffer } from '../support/test-buffers';

// Today the ring path of RingAllReduce does not remember which (phase, ring step, chunk) it
// has already taken, so a duplicate is added a second time and every replica ends with the
// same wrong sum. Over an ordered, reliable data channel duplicates do not happen by
// accident; a hostile peer could send one. Marked todo, not weakened: it reports its
// failure on every run until shared/ring-allreduce.ts drops duplicates (issue 7, hostile
// peers).
test('a message replayed within the running collective is not summed twice', { todo: 'ring phase does not drop duplicates yet (shared/ring-allreduce.ts)' }, async () => {
  const n = 3;
  const length = 30;
  const { rings, links } = createMemoryRing(n, { timeoutMs: 2_000 });
  const deliver = links[0]!.deliver;
  let replayed = false;
  links[0]!.deliver = (bytes) => {
    deliver(bytes);
    if (!replayed) {
      replayed = true;
      deliver(bytes.slice());
    }
  };
  const bufs = rings.map((_, r) => integerBuffer(r, length));
  await Promise.allSettled(rings.map((ring, r) => ring.allReduce(bufs[r]!, 0)));
  for (const b of bufs) assert.deepEqual(b, expectedSum(n, length));
});
