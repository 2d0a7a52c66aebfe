/**
 * Hostile or broken peers: a ring member sends NaN, ±Infinity, a wrong length, a
 * wrong generation or run, or replays a message. The receiver rejects it before adding any
 * of it, fails at once (no 120 s timeout) naming the sender, and nothing it sent reaches
 * the weights: the survivors, re-formed, train on bit-identical to a ring that never had it.
 */
import { startConfigSchema } from '../../shared/tasks/start-config';
import { mnistShards } from '../support/mnist';
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import * as tf from '@tensorflow/tfjs';
import { createMemoryRing } from '../support/memory-ring';
import { COLLECTIVE_TAG, type CollectiveOptions } from '../../shared/collectives/collective';
import { PeerMisbehavedError } from '../../shared/collectives/admission';
import { HEADER_BYTES } from '../../shared/collectives/wire';
import { WebringError } from '../../shared/protocol/errors';
import { integerBuffer } from '../support/test-buffers';
import { mnistSubset } from '../support/mnist';
import { Trainer } from '../../shared/training/trainer';
import { type Misbehaviour } from '../../shared/protocol';
import { MNIST_PIXELS } from '../../shared/tasks/mnist/format';
import type { LoadedDataset } from '../../shared/tasks/task';

let dataset: LoadedDataset;

before(async () => {
  await tf.setBackend('cpu');
  dataset = mnistSubset();
});

const N = 4;
const HOSTILE = 1;
const LENGTH = 3000;

interface Tamper {
  name: string;
  misbehaviour: Misbehaviour;
  options?: CollectiveOptions;
  /** The first copy was honest and is summed once; only the second is rejected. */
  firstCopySummed?: boolean;
  /** Rewrites rank 1's first message to rank 2; may return extra messages to deliver after it. */
  edit(bytes: Uint8Array): Uint8Array[];
}

const view = (b: Uint8Array) => new DataView(b.buffer, b.byteOffset, b.byteLength);

const TAMPERS: Tamper[] = [
  { name: 'a NaN (fp32)', misbehaviour: 'non-finite', edit: (b) => (view(b).setFloat32(HEADER_BYTES + 8, Number.NaN, true), [b]) },
  { name: '+Infinity (fp32)', misbehaviour: 'non-finite', edit: (b) => (view(b).setFloat32(HEADER_BYTES, Infinity, true), [b]) },
  { name: 'a -Infinity half (fp16)', misbehaviour: 'non-finite', options: { wire: 'fp16', exactTail: 7 }, edit: (b) => (view(b).setUint16(HEADER_BYTES + 2, 0xfc00, true), [b]) },
  { name: 'a NaN half (fp16)', misbehaviour: 'non-finite', options: { wire: 'fp16', exactTail: 7 }, edit: (b) => (view(b).setUint16(HEADER_BYTES, 0x7e01, true), [b]) },
  { name: 'a short payload', misbehaviour: 'length', edit: (b) => [b.slice(0, b.byteLength - 4)] },
  { name: 'a long payload', misbehaviour: 'length', edit: (b) => [Uint8Array.from([...b, 0, 0, 0, 0])] },
  { name: 'a newer generation', misbehaviour: 'generation', edit: (b) => (view(b).setUint32(4, 2, true), [b]) },
  { name: 'a replay of the same chunk', misbehaviour: 'duplicate', firstCopySummed: true, edit: (b) => [b, b.slice()] },
  { name: 'a later run while it still owes this one', misbehaviour: 'out-of-order', edit: (b) => (view(b).setUint32(8, 1, true), [b]) },
  { name: 'an unknown phase', misbehaviour: 'malformed', edit: (b) => ((b[0] = 9), [b]) },
];

for (const tamper of TAMPERS) {
  test(`${tamper.name} from rank 1 is rejected before it is summed, at once, naming rank 1`, async () => {
    const { rings, links } = createMemoryRing(N); // the default 120 s timeout: it must not be what ends it
    let first = true;
    const deliver = links[HOSTILE]!.deliver;
    links[HOSTILE]!.deliver = (bytes) => {
      if (!first) return deliver(bytes);
      first = false;
      for (const b of tamper.edit(bytes)) deliver(b);
    };
    const bufs = rings.map((_, r) => integerBuffer(r, LENGTH));
    const before = bufs.map((b) => b.slice());
    const t0 = performance.now();
    const outcomes = rings.map((ring, r) => ring.allReduce(bufs[r]!, 0, COLLECTIVE_TAG.gradients, tamper.options).then(() => null, (e: unknown) => e));
    const err = await outcomes[HOSTILE + 1]!;
    const ms = performance.now() - t0;
    assert.ok(err instanceof PeerMisbehavedError, String(err));
    assert.equal(err.code, 'ERR_PEER_MISBEHAVED');
    assert.equal(err.rank, HOSTILE);
    assert.equal(err.misbehaviour, tamper.misbehaviour);
    assert.ok(ms < 1_000, `failed after ${ms.toFixed(0)} ms`);
    // The receiver's first message from rank 1 was the bad one: nothing of it, or after it, was
    // added. (Rank 1 sends segment 1 first: elements [750, 1500).) A replayed chunk counts once.
    const want = before[HOSTILE + 1]!.slice();
    if (tamper.firstCopySummed) for (let i = LENGTH / N; i < (2 * LENGTH) / N; i++) want[i]! += before[HOSTILE]![i]!;
    assert.deepEqual(bufs[HOSTILE + 1], want);
    assert.equal(rings[HOSTILE + 1]!.stats.rejectedMisbehaviour, 1);
    // The others are released as the new generation would release them; nobody holds a NaN.
    for (const ring of rings) ring.abort(new WebringError('ERR_STALE_GENERATION', 'rank 1 evicted'));
    const rest = await Promise.all(outcomes);
    assert.ok(rest.every((e) => e instanceof WebringError), 'no collective completed');
    for (const b of bufs) assert.ok(b.every(Number.isFinite));
  });
}

test('a replay of an earlier step is dropped, never summed, and the step is exact', async () => {
  const { rings, links } = createMemoryRing(N);
  const captured: Uint8Array[] = [];
  const deliver = links[HOSTILE]!.deliver;
  links[HOSTILE]!.deliver = (bytes) => {
    captured.push(bytes.slice());
    deliver(bytes);
  };
  await Promise.all(rings.map((ring, r) => ring.allReduce(integerBuffer(r, LENGTH), 0)));
  links[HOSTILE]!.deliver = (bytes) => {
    for (const old of captured.splice(0)) deliver(old); // step 0's messages again, ahead of step 1's
    deliver(bytes);
  };
  const bufs = rings.map((_, r) => integerBuffer(r + 7, LENGTH));
  await Promise.all(rings.map((ring, r) => ring.allReduce(bufs[r]!, 1)));
  const want = new Float32Array(LENGTH);
  for (let r = 0; r < N; r++) integerBuffer(r + 7, LENGTH).forEach((x, i) => (want[i]! += x));
  for (const b of bufs) assert.deepEqual(b, want);
  assert.ok(rings[HOSTILE + 1]!.stats.droppedStaleStep > 0);
  assert.equal(rings[HOSTILE + 1]!.stats.rejectedMisbehaviour, 0);
});

const config = startConfigSchema.parse({ model: 'mlp', optimizer: 'adam', learningRate: 0.001, batchSizePerWorker: 8, seed: 11 });

async function weights(t: Trainer): Promise<Float32Array> {
  return t.readWeights();
}

const POISON_STEP = 2;

test('a hostile member poisons its messages: nothing reaches any weights, and the survivors go on bit-identical to a ring without it', async () => {
  // Reference: the same 2 steps with 4 replicas, then the 3 survivors re-form and train 4 steps.
  const reference = async (poison: boolean): Promise<{ weights: Float32Array[]; before: Float32Array[]; err: unknown; detectMs: number }> => {
    // The hostile rank poisons every message from step POISON_STEP on, past its own check.
    const first = createMemoryRing(N, { generation: 1, poison: (rank) => (poison && rank === HOSTILE ? (step) => (step >= POISON_STEP ? 'nan' : null) : undefined) });
    const trainers = first.rings.map((ring) => new Trainer(config, mnistShards(config, dataset), ring));
    await Promise.all(trainers.map((t) => t.syncState()));
    for (let s = 0; s < POISON_STEP; s++) await Promise.all(trainers.map((t) => t.trainStep()));
    const before = await Promise.all(trainers.map(weights));
    let err: unknown = null;
    let detectMs = 0;
    if (poison) {
      const t0 = performance.now();
      const outcomes = trainers.map((t) => t.trainStep().then(() => null, (e: unknown) => e));
      // Whoever detects it first; then the server's new generation releases everyone else.
      err = await Promise.race(outcomes.filter((_, r) => r !== HOSTILE).map((o) => o.then((e) => (e instanceof PeerMisbehavedError ? e : new Promise(() => {})))));
      detectMs = performance.now() - t0;
      for (const ring of first.rings) ring.abort(new WebringError('ERR_STALE_GENERATION', 'generation 2 evicts rank 1'));
      const all = await Promise.all(outcomes);
      assert.ok(all.every((e) => e instanceof WebringError), 'the poisoned step completed nowhere');
      const after = await Promise.all(trainers.map(weights));
      after.forEach((w, r) => assert.deepEqual(w, before[r], `rank ${r} applied nothing of the poisoned step`));
    }
    const survivors = trainers.filter((_, r) => r !== HOSTILE);
    trainers[HOSTILE]!.dispose();
    const second = createMemoryRing(survivors.length, { generation: 2 });
    survivors.forEach((t, r) => t.setCollective(second.rings[r]!));
    await Promise.all(survivors.map((t) => t.syncState()));
    for (let s = 0; s < 4; s++) await Promise.all(survivors.map((t) => t.trainStep()));
    const out = await Promise.all(survivors.map(weights));
    for (const t of survivors) t.dispose();
    return { weights: out, before, err, detectMs };
  };
  const tensorsBefore = tf.memory().numTensors;
  const honest = await reference(false);
  const hostile = await reference(true);
  assert.equal(tf.memory().numTensors, tensorsBefore, 'no tensors leaked');
  assert.ok(hostile.err instanceof PeerMisbehavedError && hostile.err.rank === HOSTILE && hostile.err.misbehaviour === 'non-finite', String(hostile.err));
  console.log(`[hostile] poisoned step rejected ${hostile.detectMs.toFixed(1)} ms after it started (forward, backward and the first hop included)`);
  for (const [r, w] of hostile.weights.entries()) {
    assert.ok(w.every(Number.isFinite), `survivor ${r} holds no NaN`);
    assert.ok(Buffer.from(w.buffer).equals(Buffer.from(honest.weights[r]!.buffer)), `survivor ${r} is bit-identical to the ring that never had rank 1's poison`);
  }
});

test('an honest replica whose own gradient is not finite sends zeros and a flag: every replica fails the step alike, nobody is accused', async () => {
  const { rings } = createMemoryRing(3);
  const trainers = rings.map((ring) => new Trainer(config, mnistShards(config, dataset), ring));
  await Promise.all(trainers.map((t) => t.syncState()));
  await Promise.all(trainers.map((t) => t.trainStep()));
  // Rank 2 diverged: one of its weights is NaN, so its loss and gradient are too.
  const state = await trainers[2]!.replica.readState();
  state.fill(Number.NaN, 0, MNIST_PIXELS * 128);
  await trainers[2]!.replica.writeState(state);
  const before = await Promise.all(trainers.slice(0, 2).map(weights));
  const outcomes = await Promise.all(trainers.map((t) => t.trainStep().then(() => null, (e: unknown) => e)));
  for (const e of outcomes) assert.ok(e instanceof WebringError && e.code === 'ERR_BAD_DATA' && /not finite/.test(e.message), String(e));
  assert.ok(rings.every((ring) => ring.stats.rejectedMisbehaviour === 0 && ring.stats.saturatedSends === 0));
  const after = await Promise.all(trainers.slice(0, 2).map(weights));
  after.forEach((w, r) => assert.deepEqual(w, before[r]));
  for (const t of trainers) t.dispose();
});
