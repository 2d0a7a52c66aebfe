import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createMemoryMesh } from '../support/memory-ring';
import { expectedSum, fp16Bound, integerBuffer, spreadBuffer } from '../support/test-buffers';
import { COLLECTIVE_TAG, type CollectiveOptions } from '../../shared/collectives/collective';
import { PeerMisbehavedError } from '../../shared/collectives/admission';
import { WebringError } from '../../shared/protocol/errors';
import { halvingDoublingHops, halvingDoublingPlan, ringHops } from '../../shared/collectives/halving-doubling';
import { halvingDoublingPartners } from '../../shared/protocol';
import { floatToHalf, halfToFloat } from '../../shared/collectives/fp16';
import { HEADER_BYTES, MAX_CHUNK_FLOATS, MAX_CHUNK_HALVES, PHASE_EXCHANGE, PHASE_REDUCE_SCATTER, writeHeader } from '../../shared/collectives/wire';

const HD: CollectiveOptions = { algorithm: 'halving-doubling' };
const WORLD_SIZES = [1, 2, 3, 4, 5, 6, 7, 8, 12, 16];
const LENGTHS = [1, 2, 7, 13, 1001, MAX_CHUNK_FLOATS + 3, 2 * MAX_CHUNK_FLOATS * 3 + 17];

/**
 * The schedule run synchronously: every stage's sends are taken from the buffers as they
 * stand, then applied. The asynchronous collective must give exactly these bits, however
 * its messages interleave; with `fp16`, values cross as halves and the owner rounds.
 */
function referenceResult(inputs: Float32Array[], fp16: boolean): Float32Array[] {
  const n = inputs.length;
  const length = inputs[0]!.length;
  const bufs = inputs.map((b) => b.slice());
  if (n === 1) return bufs;
  const plans = bufs.map((_, r) => halvingDoublingPlan(r, n, length));
  const wire = (x: number): number => (fp16 ? halfToFloat(floatToHalf(x)) : x);
  for (let s = 0; s < plans[0]!.stages.length; s++) {
    const sent = plans.map((p, r) => {
      const st = p.stages[s]!;
      return st.sendTo < 0 ? null : Array.from(bufs[r]!.subarray(st.sendStart, st.sendEnd), wire);
    });
    plans.forEach((p, r) => {
      const st = p.stages[s]!;
      if (st.recvFrom < 0) return;
      const values = sent[st.recvFrom]!;
      for (let i = st.recvStart; i < st.recvEnd; i++) {
        const v = values[i - st.recvStart]!;
        bufs[r]![i] = st.add ? Math.fround(bufs[r]![i]! + v) : v;
      }
    });
    if (fp16 && s === plans[0]!.lastReduceStage) {
      plans.forEach((p, r) => {
        for (let i = p.ownedStart; i < p.ownedEnd; i++) bufs[r]![i] = wire(bufs[r]![i]!);
      });
    }
  }
  return bufs;
}

const bits = (b: Float32Array) => new Uint32Array(b.buffer, b.byteOffset, b.length);

test('the schedule: 2·log2 N exchanges (+2 when N is not a power of two), disjoint owned ranges covering the buffer', () => {
  assert.equal(halvingDoublingHops(2), 2);
  assert.equal(halvingDoublingHops(4), 4);
  assert.equal(halvingDoublingHops(16), 8);
  assert.equal(halvingDoublingHops(30), 10);
  assert.equal(ringHops(30), 58);
  for (const n of [2, 3, 4, 5, 8, 13, 16, 32]) {
    for (const length of [0, 1, n - 1, n + 1, 1000]) {
      const owned = new Uint8Array(length);
      for (let r = 0; r < n; r++) {
        const p = halvingDoublingPlan(r, n, length);
        for (let i = p.ownedStart; i < p.ownedEnd; i++) owned[i]!++;
      }
      assert.ok(owned.every((c) => c === 1), `N ${n}, length ${length}: every element has exactly one owner`);
    }
  }
  // A partner relation is symmetric, and a rank of 32 talks to log2 32 = 5 partners.
  for (let r = 0; r < 32; r++) {
    const partners = halvingDoublingPartners(r, 32);
    assert.equal(partners.length, 5);
    for (const q of partners) assert.ok(halvingDoublingPartners(q, 32).includes(r));
  }
});

for (const n of WORLD_SIZES) {
  test(`halving-doubling of ${n} peers equals the elementwise sum exactly`, async () => {
    for (const length of LENGTHS) {
      const { rings } = createMemoryMesh(n);
      const bufs = rings.map((_, r) => integerBuffer(r, length));
      await Promise.all(rings.map((ring, r) => ring.allReduce(bufs[r]!, 0, COLLECTIVE_TAG.gradients, HD)));
      const want = expectedSum(n, length);
      for (let r = 0; r < n; r++) assert.deepEqual(bufs[r], want, `rank ${r} of ${n}, length ${length}`);
    }
  });
}

test('halving-doubling of 32 peers stays exact, also on buffers shorter than N', async () => {
  for (const length of [1, 31, 33, 1000]) {
    const { rings } = createMemoryMesh(32);
    const bufs = rings.map((_, r) => integerBuffer(r, length));
    await Promise.all(rings.map((ring, r) => ring.allReduce(bufs[r]!, 0, COLLECTIVE_TAG.gradients, HD)));
    const want = expectedSum(32, length);
    for (const b of bufs) assert.deepEqual(b, want, `length ${length}`);
  }
});

for (const fp16 of [false, true]) {
  test(`halving-doubling (${fp16 ? 'fp16' : 'fp32'} wire) is bit-identical on every rank and equals the schedule's order, with slow links`, async () => {
    let worst = 0;
    for (const n of [2, 3, 4, 6, 8]) {
      const length = (fp16 ? MAX_CHUNK_HALVES : MAX_CHUNK_FLOATS) * 2 + 333;
      // Links out of rank 0 drain slowly, so faster partners run stages ahead and their
      // messages arrive early: the deferral must keep the addition order.
      const { rings } = createMemoryMesh(n, {
        linkOptions: (from) => (from === 0 ? { drainBytesPerTick: 20_000 } : {}),
      });
      const inputs = rings.map((_, r) => spreadBuffer(r, length, n));
      const bufs = inputs.map((b) => b.slice());
      const options: CollectiveOptions = { ...HD, wire: fp16 ? 'fp16' : 'fp32' };
      await Promise.all(rings.map((ring, r) => ring.allReduce(bufs[r]!, 3, COLLECTIVE_TAG.gradients, options)));
      const want = referenceResult(inputs, fp16);
      for (let r = 0; r < n; r++) {
        assert.deepEqual(bits(bufs[r]!), bits(bufs[0]!), `rank ${r} of ${n}`);
        assert.deepEqual(bits(bufs[r]!), bits(want[r]!), `rank ${r} of ${n} against the schedule`);
      }
      if (!fp16) continue;
      for (let i = 0; i < length; i++) {
        let exact = 0;
        let absSum = 0;
        for (const x of inputs) {
          exact += x[i]!;
          absSum += Math.abs(x[i]!);
        }
        const err = Math.abs(bufs[0]![i]! - exact);
        const bound = fp16Bound(n, absSum);
        if (err > bound) assert.fail(`N ${n}, element ${i}: error ${err} above the bound ${bound}`);
        worst = Math.max(worst, err / bound);
      }
    }
    if (fp16) assert.ok(worst > 0, 'the halves must really have been rounded');
  });
}

test('an fp16 halving-doubling keeps its exact tail in float32 and sends about half the bytes', async () => {
  const n = 5;
  const tail = 59; // the trainer's tail
  const length = 101_770 + tail;
  const run = async (options: CollectiveOptions) => {
    const { rings } = createMemoryMesh(n);
    const inputs = rings.map((_, r) => {
      const b = spreadBuffer(r, length, 9);
      for (let i = length - tail; i < length; i++) b[i] = 261_121 + r * 1_000 + i;
      return b;
    });
    await Promise.all(rings.map((ring, r) => ring.allReduce(inputs[r]!, 1, COLLECTIVE_TAG.gradients, options)));
    return { inputs, bytes: rings.reduce((sum, ring) => sum + ring.stats.bytesSent, 0) };
  };
  const half = await run({ ...HD, wire: 'fp16', exactTail: tail });
  const full = await run(HD);
  for (let i = length - tail; i < length; i++) {
    let exact = 0;
    for (let r = 0; r < n; r++) exact += 261_121 + r * 1_000 + i;
    for (const b of half.inputs) assert.equal(b[i], exact, `tail element ${i}`);
  }
  assert.ok(half.bytes / full.bytes < 0.52, `fp16 sent ${half.bytes} B against ${full.bytes} B`);
});

test('each core rank of a power-of-two halving-doubling sends 2(N-1)/N of the buffer, like the ring', async () => {
  const n = 8;
  const length = 8 * MAX_CHUNK_FLOATS;
  const { rings } = createMemoryMesh(n);
  await Promise.all(rings.map((ring, r) => ring.allReduce(integerBuffer(r, length), 0, COLLECTIVE_TAG.gradients, HD)));
  for (const ring of rings) {
    const payloadBytes = ring.stats.bytesSent - ring.stats.messagesSent * HEADER_BYTES;
    assert.equal(payloadBytes, (2 * (n - 1) * length * 4) / n);
  }
});

test('an exchange message from a rank that is not the stage partner is never summed', async () => {
  const n = 4;
  const length = 64;
  const { rings } = createMemoryMesh(n);
  // Rank 3 is not rank 0's partner in stage 1 (that is rank 2): a forged message from it.
  // Rank 3 is rank 0's left neighbour, so it does send to rank 0: named and rejected at once.
  const forged = new Uint8Array(HEADER_BYTES + 32 * 4);
  writeHeader(new DataView(forged.buffer), { phase: PHASE_EXCHANGE, ringStep: 1, tag: COLLECTIVE_TAG.gradients, wire: 0, flags: 0, generation: 1, run: 0, step: 0, chunk: 0 });
  new Float32Array(forged.buffer, HEADER_BYTES).fill(1e6);
  const bufs = rings.map((_, r) => integerBuffer(r, length));
  const pending = rings.map((ring, r) => ring.allReduce(bufs[r]!, 0, COLLECTIVE_TAG.gradients, HD));
  rings[0]!.receive(forged, 3);
  await assert.rejects(pending[0]!, (e: unknown) => e instanceof PeerMisbehavedError && e.rank === 3);
  assert.equal(rings[0]!.stats.droppedWrongSender, 1);
  assert.ok(bufs[0]!.every((x) => x < 1e6), 'the forged values were never added');
  for (const ring of rings) ring.abort(new WebringError('ERR_STALE_GENERATION', 'test over'));
  await Promise.allSettled(pending);

  // From a rank that sends nothing to rank 0 in any schedule (rank 3 of 5 is neither its
  // left neighbour nor a partner), the message is only dropped: the server could not check
  // an accusation of it.
  const five = createMemoryMesh(5);
  const bufs5 = five.rings.map((_, r) => integerBuffer(r, length));
  const done = Promise.all(five.rings.map((ring, r) => ring.allReduce(bufs5[r]!, 0, COLLECTIVE_TAG.gradients, HD)));
  five.rings[0]!.receive(forged, 3);
  await done;
  assert.equal(five.rings[0]!.stats.droppedWrongSender, 1);
  for (const b of bufs5) assert.deepEqual(b, expectedSum(5, length));
});

/** A 32-float message of rank 0's collective at step 0, with the given phase and step. */
function messageOf(phase: number, ringStep: number): Uint8Array {
  const bytes = new Uint8Array(HEADER_BYTES + 32 * 4);
  writeHeader(new DataView(bytes.buffer), { phase, ringStep, tag: COLLECTIVE_TAG.gradients, wire: 0, flags: 0, generation: 1, run: 0, step: 0, chunk: 0 });
  return bytes;
}

test('a wrong phase or stage rejects its sender, in halving-doubling as in the ring', async () => {
  const n = 4;
  const length = 64;
  // Rank 3 is rank 0's left neighbour, rank 1 its partner in the last reduce stage.
  const cases: Array<{ what: string; options: CollectiveOptions; bytes: Uint8Array; from: number }> = [
    { what: 'a ring message into halving-doubling', options: HD, bytes: messageOf(PHASE_REDUCE_SCATTER, 0), from: 3 },
    { what: 'a stage beyond the plan', options: HD, bytes: messageOf(PHASE_EXCHANGE, 200), from: 1 },
    { what: 'an exchange into the ring', options: { algorithm: 'ring' }, bytes: messageOf(PHASE_EXCHANGE, 1), from: 3 },
    { what: 'a ring step beyond the ring', options: { algorithm: 'ring' }, bytes: messageOf(PHASE_REDUCE_SCATTER, n - 1), from: 3 },
  ];
  for (const { what, options, bytes, from } of cases) {
    const { rings } = createMemoryMesh(n);
    const bufs = rings.map((_, r) => integerBuffer(r, length));
    const pending = rings.map((ring, r) => ring.allReduce(bufs[r]!, 0, COLLECTIVE_TAG.gradients, options));
    rings[0]!.receive(bytes, from);
    await assert.rejects(pending[0]!, (e: unknown) => e instanceof PeerMisbehavedError && e.rank === from && e.misbehaviour === 'malformed', what);
    assert.equal(rings[0]!.stats.droppedMalformed, 1, what);
    assert.equal(rings[0]!.stats.rejectedMisbehaviour, 1, what);
    for (const ring of rings) ring.abort(new WebringError('ERR_STALE_GENERATION', 'test over'));
    await Promise.allSettled(pending);
  }
});

test('ring and halving-doubling collectives alternate on the same peers, step after step', async () => {
  const n = 6;
  const length = 5000;
  const { rings } = createMemoryMesh(n);
  for (let step = 0; step < 6; step++) {
    const options: CollectiveOptions = step % 2 === 0 ? HD : { algorithm: 'ring' };
    const bufs = rings.map((_, r) => integerBuffer(r + step, length));
    await Promise.all(rings.map((ring, r) => ring.allReduce(bufs[r]!, step, COLLECTIVE_TAG.gradients, options)));
    const want = new Float32Array(length);
    for (let r = 0; r < n; r++) {
      const b = integerBuffer(r + step, length);
      for (let i = 0; i < length; i++) want[i]! += b[i]!;
    }
    for (const b of bufs) assert.deepEqual(b, want, `step ${step}`);
  }
});

test('halving-doubling without partner links is refused with ERR_BAD_REQUEST', async () => {
  const { createMemoryRing } = await import('../support/memory-ring');
  const { rings } = createMemoryRing(2);
  await assert.rejects(rings[0]!.allReduce(new Float32Array(4), 0, COLLECTIVE_TAG.gradients, HD), { code: 'ERR_BAD_REQUEST' });
});
