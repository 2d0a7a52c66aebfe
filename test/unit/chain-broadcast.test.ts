/**
 * The chain broadcast that carries the state hand-over (chain-broadcast-schedule.ts), and
 * who takes part in a hand-over (hand-over.ts).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createMemoryRing } from '../support/memory-ring';
import { COLLECTIVE_TAG } from '../../shared/collectives/collective';
import { PeerMisbehavedError } from '../../shared/collectives/admission';
import { HEADER_BYTES, MAX_CHUNK_FLOATS, PHASE_CHAIN } from '../../shared/collectives/wire';
import { WebringError } from '../../shared/protocol/errors';
import { FINGERPRINT_FLOATS, handOverChain, ranksBehind, writeFingerprint, type Fingerprint } from '../../shared/training/hand-over';
import { integerBuffer } from '../support/test-buffers';

const LENGTH = 3 * MAX_CHUNK_FLOATS + 11;

/** Runs one broadcast on a memory ring of `n` with rank r holding integerBuffer(r). */
async function broadcastOn(n: number, chain: { from: number; to: number }, length = LENGTH) {
  const { rings } = createMemoryRing(n);
  const bufs = rings.map((_, r) => integerBuffer(r, length));
  await Promise.all(rings.map((ring, r) => ring.broadcast(bufs[r]!, 0, COLLECTIVE_TAG.sync, chain)));
  return { rings, bufs };
}

test('a chain broadcast copies the sender bit-exact into the chain and leaves every other rank alone', async () => {
  for (const [n, from, to] of [[2, 0, 1], [4, 2, 3], [5, 0, 4], [5, 3, 1], [8, 6, 7]] as const) {
    const { bufs } = await broadcastOn(n, { from, to });
    const onChain = new Set<number>();
    for (let r = from; ; r = (r + 1) % n) {
      onChain.add(r);
      if (r === to) break;
    }
    for (let r = 0; r < n; r++) {
      const want = integerBuffer(onChain.has(r) ? from : r, LENGTH);
      assert.deepEqual(bufs[r], want, `N ${n}, chain ${from}→${to}, rank ${r}`);
    }
  }
});

test('each link of the chain carries the state once and the links off the chain carry nothing', async () => {
  const n = 6;
  const { rings } = await broadcastOn(n, { from: 3, to: 5 });
  const payload = rings.map((ring) => ring.stats.bytesSent - ring.stats.messagesSent * HEADER_BYTES);
  // Ranks 3 and 4 send (3→4, 4→5); 5, the chain's end, forwards nothing.
  assert.deepEqual(payload, [0, 0, 0, LENGTH * 4, LENGTH * 4, 0]);
});

/** A chain message from rank 0 into collective (generation 1, step) with `floats` values. */
function chainMessage(step: number, floats: number): Uint8Array {
  const bytes = new Uint8Array(HEADER_BYTES + floats * 4);
  bytes[0] = PHASE_CHAIN;
  bytes[2] = COLLECTIVE_TAG.sync;
  bytes[4] = 1; // generation 1
  bytes[12] = step;
  return bytes;
}

test('a rank off the chain is done at once; a chain message for it later is dropped, never copied', async () => {
  const { rings } = createMemoryRing(3, { timeoutMs: 60_000 });
  const buf = integerBuffer(1, 8);
  await rings[1]!.broadcast(buf, 0, COLLECTIVE_TAG.sync, { from: 2, to: 0 });
  rings[1]!.receive(chainMessage(0, 8));
  assert.deepEqual(buf, integerBuffer(1, 8));
  assert.equal(rings[1]!.stats.droppedStaleStep, 1);
});

test('a chain message of the wrong length fails the broadcast at once, naming its sender, before anything is copied', async () => {
  const { rings } = createMemoryRing(2, { timeoutMs: 60_000 });
  const into = integerBuffer(1, 8);
  const inFlight = rings[1]!.broadcast(into, 0, COLLECTIVE_TAG.sync, { from: 0, to: 1 });
  rings[1]!.receive(chainMessage(0, 3));
  await assert.rejects(inFlight, (e: unknown) => e instanceof PeerMisbehavedError && e.rank === 0 && e.misbehaviour === 'length');
  assert.deepEqual(into, integerBuffer(1, 8), 'nothing was copied');
  rings[0]!.abort(new WebringError('ERR_ABORTED', 'test over'));
});

test('a chain outside the ranks is refused with ERR_BAD_REQUEST', async () => {
  const { rings } = createMemoryRing(3);
  await assert.rejects(rings[0]!.broadcast(new Float32Array(4), 0, COLLECTIVE_TAG.sync, { from: 0, to: 3 }), (e: unknown) => e instanceof WebringError && e.code === 'ERR_BAD_REQUEST');
});

const base: Fingerprint = { step: 120, epoch: 0, offset: 3840, pendingEvaluation: null, stopped: false, ownState: false, finishingSteps: 0, weightsHash: '0123456789abcdef' };

function fingerprints(list: Fingerprint[]): Float32Array {
  const buf = new Float32Array(list.length * FINGERPRINT_FLOATS);
  list.forEach((fp, r) => writeFingerprint(buf, r, fp));
  return buf;
}

test('the hand-over finds who differs from rank 0 and sends from the rank just before the first of them', () => {
  const joiner: Fingerprint = { step: 0, epoch: 0, offset: 0, pendingEvaluation: null, stopped: false, ownState: true, finishingSteps: 0, weightsHash: 'fedcba9876543210' };
  // Survivors agree: nothing to send.
  assert.equal(handOverChain(ranksBehind(fingerprints([base, base, base]), 3)), null);
  // A survivor that owes no round where the others owe one takes the state: every rank finishes the same round.
  assert.deepEqual(ranksBehind(fingerprints([{ ...base, finishingSteps: 20 }, { ...base, finishingSteps: 20 }, base]), 3), [2]);
  // One joiner appended: its left neighbour sends over one link.
  assert.deepEqual(handOverChain(ranksBehind(fingerprints([base, base, base, joiner]), 4)), { from: 2, to: 3 });
  // Two joiners appended: a chain of two hops.
  assert.deepEqual(handOverChain(ranksBehind(fingerprints([base, base, joiner, joiner]), 4)), { from: 1, to: 3 });
  // A replica drifted in its last hash word only: the rank before it sends.
  const drifted = { ...base, weightsHash: '0123456789abcdee' };
  assert.deepEqual(ranksBehind(fingerprints([base, drifted, base, base]), 4), [1]);
  assert.deepEqual(handOverChain([1]), { from: 0, to: 1 });
  // Each part of the position counts: an owed evaluation, a stop, the data cursor.
  for (const other of [{ ...base, pendingEvaluation: 0 }, { ...base, stopped: true }, { ...base, offset: 3841 }, { ...base, epoch: 1 }]) {
    assert.deepEqual(ranksBehind(fingerprints([base, base, other]), 3), [2], JSON.stringify(other));
  }
  // A joiner that rehearsed, admitted where the class stands (step 0, the same weights): its optimizer state is its own.
  assert.deepEqual(ranksBehind(fingerprints([base, base, { ...base, ownState: true }]), 3), [2]);
});
