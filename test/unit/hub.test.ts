/**
 * The hub collective (hub-schedule.ts on the ranks, hub-reducer.ts on the hub), over
 * in-memory links: the sum is the rank-order float32 sum bit for bit whatever order the
 * messages arrive in, every replica holds the same bits in both wire formats, the hub
 * and the ranks refuse what no honest peer sends, and the hub leaving hands the class
 * back to the ring. The real data channels are exercised by the E2E test with a hub.
 */
import { startConfigSchema } from '../../shared/tasks/start-config';
import { mnistShards } from '../support/mnist';
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import * as tf from '@tensorflow/tfjs';
import { createMemoryMesh } from '../support/memory-ring';
import { fp16Bound, integerBuffer, spreadBuffer } from '../support/test-buffers';
import { COLLECTIVE_TAG, type CollectiveOptions } from '../../shared/collectives/collective';
import { PeerMisbehavedError } from '../../shared/collectives/admission';
import { HUB_RANK } from '../../shared/protocol';
import { floatToHalf, halfToFloat } from '../../shared/collectives/fp16';
import { HEADER_BYTES, MAX_CHUNK_FLOATS, MAX_CHUNK_HALVES, PHASE_HUB_UP, readHeader, writeHeader, type ChunkHeader } from '../../shared/collectives/wire';
import { WebringError } from '../../shared/protocol/errors';
import type { Misbehaviour } from '../../shared/protocol';
import { Trainer } from '../../shared/training/trainer';

import { mnistSubset } from '../support/mnist';
import type { LoadedDataset } from '../../shared/tasks/task';

const HUB: CollectiveOptions = { algorithm: 'hub' };
const HUB_FP16: CollectiveOptions = { algorithm: 'hub', wire: 'fp16' };
const bits = (b: Float32Array) => Array.from(new Uint32Array(b.buffer, b.byteOffset, b.length));

/** What the hub must produce: each rank's values as they travel, summed in float32 in rank order, then as they travel back. */
function rankOrderSum(inputs: Float32Array[], fp16: boolean): Float32Array {
  const wire = (x: number): number => (fp16 ? halfToFloat(floatToHalf(x)) : x);
  const out = new Float32Array(inputs[0]!.length);
  for (let i = 0; i < out.length; i++) {
    let acc = wire(inputs[0]![i]!);
    for (let r = 1; r < inputs.length; r++) acc = Math.fround(acc + wire(inputs[r]![i]!));
    out[i] = wire(acc);
  }
  return out;
}

for (const n of [1, 2, 3, 5, 8]) {
  for (const length of [1, 7, MAX_CHUNK_FLOATS + 3, 2 * MAX_CHUNK_HALVES + 11]) {
    test(`fp32, N = ${n}, ${length} floats: the exact sum, bit-identical on every replica`, async () => {
      const { rings } = createMemoryMesh(n, { hub: n > 1 });
      const bufs = rings.map((_, r) => integerBuffer(r, length));
      const expected = rankOrderSum(bufs, false);
      await Promise.all(rings.map((ring, r) => ring.allReduce(bufs[r]!, 1, COLLECTIVE_TAG.gradients, HUB)));
      for (const b of bufs) assert.deepEqual(bits(b), bits(expected));
    });
  }
}

test('the sum is taken in rank order whatever order the uploads arrive in: rank 0 trickling in changes no bit', async () => {
  const n = 5;
  const length = 3 * MAX_CHUNK_FLOATS + 5;
  const inputs = Array.from({ length: n }, (_, r) => spreadBuffer(r, length, 11));
  const expected = rankOrderSum(inputs, false);
  for (const slow of [0, 2, 4]) {
    // One rank's uplink drains a message every few ticks: its chunks come last and must wait their turn at the hub.
    const { rings, hub } = createMemoryMesh(n, { hub: true, hubLinkOptions: (r, d) => (r === slow && d === 'up' ? { drainBytesPerTick: 1000 } : {}) });
    const bufs = inputs.map((b) => b.slice());
    await Promise.all(rings.map((ring, r) => ring.allReduce(bufs[r]!, 1, COLLECTIVE_TAG.gradients, HUB)));
    for (const b of bufs) assert.deepEqual(bits(b), bits(expected), `slow uplink of rank ${slow}`);
    assert.equal(hub!.reducer.chunksReduced, 4);
  }
});

test('fp16 on the wire: half the bytes up and down, the replicas bit-identical, within the bound', async () => {
  const n = 6;
  const length = MAX_CHUNK_HALVES * 2 + 333;
  const exactTail = 9;
  const inputs = Array.from({ length: n }, (_, r) => spreadBuffer(r, length, 3));
  const { rings, hub } = createMemoryMesh(n, { hub: true });
  const bufs = inputs.map((b) => b.slice());
  await Promise.all(rings.map((ring, r) => ring.allReduce(bufs[r]!, 1, COLLECTIVE_TAG.gradients, { ...HUB_FP16, exactTail })));
  for (const b of bufs) assert.deepEqual(bits(b), bits(bufs[0]!));
  const head = rankOrderSum(inputs.map((b) => b.subarray(0, length - exactTail)), true);
  const tail = rankOrderSum(inputs.map((b) => b.subarray(length - exactTail)), false);
  assert.deepEqual(bits(bufs[0]!.subarray(0, length - exactTail)), bits(head));
  assert.deepEqual(bits(bufs[0]!.subarray(length - exactTail)), bits(tail), 'the exact tail travels as float32');
  for (let i = 0; i < length - exactTail; i += 97) {
    let exact = 0;
    let abs = 0;
    for (const b of inputs) {
      exact += b[i]!;
      abs += Math.abs(b[i]!);
    }
    assert.ok(Math.abs(bufs[0]![i]! - exact) <= fp16Bound(n, abs), `element ${i}`);
  }
  // Each rank sent its buffer once as halves (plus the float32 tail), never 2(N-1)/N of it.
  const halfBytes = (length - exactTail) * 2 + exactTail * 4;
  for (const ring of rings) assert.ok(ring.lastTransfer.bytes < halfBytes * 1.01 && ring.lastTransfer.bytes > halfBytes, `${ring.lastTransfer.bytes} bytes sent`);
  assert.ok(hub!.reducer.stats.bytesSent > n * halfBytes && hub!.reducer.stats.bytesSent < n * halfBytes * 1.01);
});

test('consecutive collectives and tags reuse the hub, and a stale upload is dropped', async () => {
  const n = 3;
  const { rings, hub } = createMemoryMesh(n, { hub: true });
  for (let step = 1; step <= 4; step++) {
    const bufs = rings.map((_, r) => integerBuffer(r + step, 100));
    const expected = rankOrderSum(bufs, false);
    await Promise.all(rings.map((ring, r) => ring.allReduce(bufs[r]!, step, COLLECTIVE_TAG.gradients, HUB)));
    for (const b of bufs) assert.deepEqual(bits(b), bits(expected));
  }
  const stale = hub!.reducer.stats.droppedStaleStep;
  const message = upload({ step: 1, chunk: 0 }, new Float32Array(100));
  hub!.reducer.receive(message, 1);
  assert.equal(hub!.reducer.stats.droppedStaleStep, stale + 1);
  assert.equal(hub!.reducer.stats.rejectedMisbehaviour, 0);
});

function upload(fields: Partial<ChunkHeader>, values: Float32Array): Uint8Array {
  const bytes = new Uint8Array(HEADER_BYTES + values.length * 4);
  writeHeader(new DataView(bytes.buffer), { phase: PHASE_HUB_UP, ringStep: 0, tag: COLLECTIVE_TAG.gradients, wire: 0, flags: 0, generation: 1, run: 0, step: 1, chunk: 0, ...fields });
  new Float32Array(bytes.buffer, HEADER_BYTES).set(values);
  return bytes;
}

test('the hub refuses a rank that sends NaN, a wrong length or a chunk twice, names it, and sums none of it', () => {
  const cases: Array<[Misbehaviour, (send: (bytes: Uint8Array, from: number) => void) => void]> = [
    ['non-finite', (send) => send(upload({}, new Float32Array([1, Number.NaN, 3])), 1)],
    [
      'length',
      (send) => {
        send(upload({}, new Float32Array(3)), 0);
        send(upload({}, new Float32Array(4)), 1);
      },
    ],
    [
      'duplicate',
      (send) => {
        send(upload({}, new Float32Array(3)), 2);
        send(upload({}, new Float32Array(3)), 2);
      },
    ],
    ['generation', (send) => send(upload({ generation: 2 }, new Float32Array(3)), 1)],
    ['malformed', (send) => send(upload({ phase: 5 }, new Float32Array(3)), 1)],
  ];
  for (const [kind, act] of cases) {
    const named: Array<{ rank: number; kind: Misbehaviour }> = [];
    const { hub } = createMemoryMesh(3, { hub: true, onMisbehaviour: (rank, misbehaviour) => named.push({ rank, kind: misbehaviour }) });
    act((bytes, from) => hub!.reducer.receive(bytes, from));
    assert.equal(named.length, 1, kind);
    assert.equal(named[0]!.kind, kind);
    assert.equal(hub!.reducer.chunksReduced, 0);
  }
});

test('a rank refuses a hub that sends a bad sum: its collective fails at once naming the hub', async () => {
  const { rings, hub } = createMemoryMesh(3, { hub: true });
  const h: ChunkHeader = { phase: 0, ringStep: 0, tag: 0, wire: 0, flags: 0, generation: 0, run: 0, step: 0, chunk: 0 };
  const honest = hub!.down[1]!.deliver;
  hub!.down[1]!.deliver = (bytes) => {
    const tampered = bytes.slice();
    readHeader(tampered, h);
    new Float32Array(tampered.buffer, HEADER_BYTES, 1)[0] = Number.NaN;
    honest(tampered);
  };
  const bufs = rings.map((_, r) => integerBuffer(r, 50));
  const results = await Promise.allSettled(rings.map((ring, r) => ring.allReduce(bufs[r]!, 1, COLLECTIVE_TAG.gradients, HUB)));
  const failed = results[1]!;
  assert.equal(failed.status, 'rejected');
  const reason = (failed as PromiseRejectedResult).reason as PeerMisbehavedError;
  assert.ok(reason instanceof PeerMisbehavedError);
  assert.equal(reason.rank, HUB_RANK);
  assert.equal(reason.misbehaviour, 'non-finite');
  assert.equal(results[0]!.status, 'fulfilled');
});

test('a ring member sending a hub sum is refused, and without a hub link the hub collective is refused', async () => {
  const { rings } = createMemoryMesh(3, { hub: true });
  const sum = upload({ phase: 5 }, new Float32Array(3));
  const pending = rings[1]!.allReduce(new Float32Array(3), 1, COLLECTIVE_TAG.gradients, HUB);
  rings[1]!.receive(sum, 0);
  await assert.rejects(pending, (e: unknown) => e instanceof PeerMisbehavedError && e.rank === 0);
  const { rings: noHub } = createMemoryMesh(3);
  await assert.rejects(noHub[0]!.allReduce(new Float32Array(3), 1, COLLECTIVE_TAG.gradients, HUB), (e: unknown) => e instanceof WebringError && e.code === 'ERR_BAD_REQUEST');
});

let dataset: LoadedDataset;
before(async () => {
  await tf.setBackend('cpu');
  dataset = mnistSubset();
});

test('trainers on the hub stay bit-identical, and when the hub leaves the next generation trains on the ring from the same weights', async () => {
  const n = 3;
  const config = startConfigSchema.parse({ model: 'mlp', optimizer: 'adam', batchSizePerWorker: 8, seed: 9, allreduce: 'hub', wire: 'fp16' });
  const withHub = createMemoryMesh(n, { hub: true, generation: 1 });
  const trainers = withHub.rings.map((ring) => new Trainer(config, mnistShards(config, dataset), ring));
  const algorithms: string[] = [];
  for (let step = 0; step < 4; step++) {
    const results = await Promise.all(trainers.map((t) => t.trainStep({ meshReady: true, hubReady: true })));
    algorithms.push(results[0]!.algorithm);
    assert.ok(results.every((r) => r.algorithm === results[0]!.algorithm));
  }
  // The first step runs on the ring until the tail has said every hub link is open.
  assert.deepEqual(algorithms, ['ring', 'hub', 'hub', 'hub']);
  assert.equal(new Set(await Promise.all(trainers.map((t) => t.weightsHash()))).size, 1);
  assert.ok(withHub.hub!.reducer.chunksReduced > 0);

  // The hub leaves: a generation without it. Nothing asks for the hub any more.
  withHub.rings.forEach((ring) => ring.abort(new WebringError('ERR_STALE_GENERATION', 'the hub left')));
  const ringOnly = createMemoryMesh(n, { generation: 2 });
  trainers.forEach((t, r) => t.setCollective(ringOnly.rings[r]!));
  for (let step = 0; step < 3; step++) {
    const results = await Promise.all(trainers.map((t) => t.trainStep({ meshReady: true, hubReady: false })));
    assert.ok(results.every((r) => r.algorithm === 'ring'), results.map((r) => r.algorithm).join());
    assert.match(results[0]!.reason, /not open on every worker/);
  }
  assert.equal(new Set(await Promise.all(trainers.map((t) => t.weightsHash()))).size, 1);
  trainers.forEach((t) => t.dispose());
});
