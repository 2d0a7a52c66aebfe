/**
 * Replayed ring messages: a peer that sends a chunk twice is hostile or broken. Replays of an earlier step and of an earlier
 * generation are dropped; see 'messages of an already finished step are dropped' and
 * 'messages from a stale generation are dropped…' in ring-allreduce.test.ts. What this file
 * adds: a message replayed *within* the collective that is running.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createMemoryRing } from '../support/memory-ring';
import { integerBuffer } from '../support/test-buffers';
import { PeerMisbehavedError } from '../../shared/collectives/admission';

// Over an ordered, reliable data channel duplicates do not happen by accident; a hostile
// peer could send one. The receiver refuses it before it touches the sums and fails its
// collective at once, naming the sender (the server then evicts it; see hostile.test.ts).
test('a message replayed within the running collective is refused, named, and not summed twice', async () => {
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
  const before = bufs.map((b) => b.slice());
  const started = Date.now();
  let refusedAfterMs = Number.POSITIVE_INFINITY;
  const results = await Promise.allSettled(
    rings.map((ring, r) =>
      ring.allReduce(bufs[r]!, 0).catch((e: unknown) => {
        if (r === 1) refusedAfterMs = Date.now() - started;
        throw e;
      }),
    ),
  );
  // Rank 1 receives from rank 0 over link 0: it refuses the second copy at once.
  const refused = results[1]!;
  assert.equal(refused.status, 'rejected');
  const err = (refused as PromiseRejectedResult).reason as PeerMisbehavedError;
  assert.ok(err instanceof PeerMisbehavedError, String(err));
  assert.equal(err.code, 'ERR_PEER_MISBEHAVED');
  assert.equal(err.rank, 0);
  assert.equal(err.misbehaviour, 'duplicate');
  assert.ok(refusedAfterMs < 1_000, `refused after ${refusedAfterMs} ms, not at the 2 s collective timeout`);
  // Whatever rank 1 holds has no contribution counted twice: each element is its own value
  // plus the values of a set of other ranks (each at most once).
  for (let i = 0; i < length; i++) {
    const own = before[1]![i]!;
    const others = [before[0]![i]!, before[2]![i]!];
    const allowed = [own, own + others[0]!, own + others[1]!, own + others[0]! + others[1]!].map((v) => Math.fround(v));
    assert.ok(allowed.includes(bufs[1]![i]!), `element ${i}: ${bufs[1]![i]} is not one of ${allowed}`);
  }
});
