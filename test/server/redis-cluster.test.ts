/**
 * Several signaling nodes over a real redis-server: a room's membership,
 * indexes and generations change atomically however many nodes change it at once;
 * students connected to different nodes are one room (broadcasts and signals cross
 * nodes); when a node goes, its students come back through another with their places, and
 * whoever does not is dropped after the grace period.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import type { RunningServer } from '../../signaling-server/server';
import { wallClock } from '../../signaling-server/rooms/wall-clock';
import { RedisRoomStore } from '../../signaling-server/rooms/redis-room-store';
import { type Generation, type RoomStatus } from '../../shared/protocol';
import { DIGIT_CLASSES } from '../../shared/tasks/mnist/format';
import { AS_TEACHER, codeFor, connectClient, join, nextEvent, startTestServer, type TestSocket } from '../support/server';
import { REDIS_SERVER, startRedis, type TestRedis } from '../support/redis';
import { programNeed, skipUnless } from '../support/requirements';

const GRACE_MS = 2_500;
let redis: TestRedis;
let nodeA: RunningServer;
let nodeB: RunningServer;
const sockets: TestSocket[] = [];
/** Without Debian's redis-server these tests skip, saying so (CI requires them: support/requirements.ts). */
const skip = skipUnless([programNeed(REDIS_SERVER, 'redis-server')]);

before(async () => {
  if (skip) return;
  redis = await startRedis();
  const node = () => startTestServer({ redisUrl: redis.url, reconnectGraceMs: GRACE_MS });
  [nodeA, nodeB] = await Promise.all([node(), node()]);
});
after(async () => {
  if (skip) return;
  for (const s of sockets) s.disconnect();
  await Promise.all([nodeA, nodeB].map((n) => n.close()));
  await redis.stop();
});

async function client(node: RunningServer, room: string): Promise<TestSocket> {
  const s = await connectClient(node, room);
  sockets.push(s);
  return s;
}

const status = async (node: RunningServer, room: string) => (await (await fetch(`${node.url}/api/rooms/${room}`, AS_TEACHER)).json()) as RoomStatus;

test('concurrent joins through two stores get unique indexes and one generation each (compare-and-set)', { skip }, async () => {
  const connections = [new Redis(redis.url), new Redis(redis.url)];
  try {
    const stores = connections.map((c) => new RedisRoomStore(c, wallClock));
    const JOINS = 30;
    const results = await Promise.all(
      Array.from({ length: JOINS }, (_, i) =>
        stores[i % 2]!.update('race', (r) => r.join({ id: `m${String(i).padStart(8, '0')}`, socketId: `s${i}`, tokenHash: '0'.repeat(64), name: `n${i}`, backend: 'cpu', kind: 'node', adapter: null, node: null }), { create: true }),
      ),
    );
    const indexes = results.map((r) => r!.result.index).sort((a, b) => a - b);
    assert.deepEqual(indexes, Array.from({ length: JOINS }, (_, i) => i), 'every index exactly once');
    const generations = results.map((r) => r!.result.change.generation!.generation).sort((a, b) => a - b);
    assert.deepEqual(generations, Array.from({ length: JOINS }, (_, i) => i + 1), 'every join its own generation');
    const room = await new RedisRoomStore(connections[0]!, wallClock).read('race');
    assert.equal(room!.size, JOINS);
    assert.equal(room!.currentGeneration, JOINS);
  } finally {
    for (const c of connections) c.disconnect();
  }
});

test('changes waiting for one room are written together; one that is refused leaves the others in place', { skip }, async () => {
  const connection = new Redis(redis.url);
  try {
    const store = new RedisRoomStore(connection, wallClock);
    const member = (i: number) => ({ id: `b${String(i).padStart(8, '0')}`, socketId: `s${i}`, tokenHash: '0'.repeat(64), name: `n${i}`, backend: 'cpu' as const, kind: 'node' as const, adapter: null, node: null });
    await store.update('batch', (r) => r.join(member(0)), { create: true });
    // Sent together: the second is refused (the room is not paused), the rest go through.
    const results = await Promise.allSettled([
      store.update('batch', (r) => r.join(member(1))),
      store.update('batch', (r) => r.resume()),
      store.update('batch', (r) => r.join(member(2))),
    ]);
    assert.equal(results[0]!.status, 'fulfilled');
    assert.equal(results[1]!.status, 'rejected');
    assert.equal(results[2]!.status, 'fulfilled');
    const reader = new Redis(redis.url);
    const room = await new RedisRoomStore(reader, wallClock).read('batch');
    reader.disconnect();
    assert.deepEqual(room!.snapshot().members.map((m) => m.name), ['n0', 'n1', 'n2']);
    // A change that throws is refused with its own error, and nothing of it is stored.
    const refused = await Promise.allSettled([
      store.update('batch', (r) => r.start({ task: 'mnist', model: 'mlp', optimizer: 'sgd', learningRate: 0.1, warmupSteps: 0, scaleLearningRate: false, referenceBatch: 32, balanceShares: false, batchSizePerWorker: 8, epochs: 1, seed: 1, saveEverySteps: 5, maxToKeep: 1, resumeFrom: 'none', wire: 'fp32', allreduce: 'ring', dataset: 'mnist-60k', data: 'dataset', classes: [...DIGIT_CLASSES], secureAggregation: false, sync: 'every-step', localSteps: 20, outerOptimizer: 'nesterov', outerLearningRate: 0.7, outerMomentum: 0.9, localOptimizer: 'sgd', localLearningRate: 0.3, localCorrection: 'none', powerSgdRank: 0, sumWordBits: 0 }, null)),
      store.update('batch', (r) => r.pause()),
      store.update('batch', (r) => r.requestStop()),
    ]);
    assert.deepEqual(refused.map((x) => x.status), ['fulfilled', 'fulfilled', 'fulfilled']);
    const again = await store.update('batch', (r) => r.resume());
    assert.equal(again!.room.status().state, 'training');
    await assert.rejects(store.update('batch', (r) => r.resume()), (err: unknown) => (err as { code?: string }).code === 'ERR_BAD_STATE');
  } finally {
    connection.disconnect();
  }
});

test('students on two nodes are one room: one ring, signals and broadcasts cross nodes', { skip }, async () => {
  const a = await client(nodeA, 'shared');
  const b = await client(nodeB, 'shared');
  const ja = await join(a, 'shared', 'on-a');
  const both = nextEvent(a, 'ring:generation', (g) => g.members.length === 2);
  const jb = await join(b, 'shared', 'on-b');
  assert.ok(ja.ok && jb.ok);
  assert.deepEqual([ja.index, jb.index], [0, 1]);
  const g: Generation = await both;
  assert.deepEqual(g.members.map((m) => m.name), ['on-a', 'on-b']);
  assert.equal(new Set(g.members.map((m) => m.node)).size, 2, 'each member on its own node');
  // A signal from a member on A reaches the member on B.
  const relayed = nextEvent(b, 'signal:relay');
  const ack = await new Promise<{ ok: boolean }>((resolve) => a.emit('signal:relay', { to: jb.memberId, linkId: 'l1', data: { type: 'offer', sdp: 'x' } }, resolve));
  assert.ok(ack.ok, JSON.stringify(ack));
  assert.equal((await relayed).from, ja.memberId);
  // Either node's API shows the same room.
  const [sa, sb] = await Promise.all([status(nodeA, 'shared'), status(nodeB, 'shared')]);
  assert.deepEqual(sa, sb);
  assert.equal(sa.generation, g.generation);
});

test('a node goes: its student rejoins through the other with the same index; one who does not is dropped after the grace', { skip }, async () => {
  const spare = await startTestServer({ redisUrl: redis.url, reconnectGraceMs: GRACE_MS });
  const stay = await client(nodeA, 'failover');
  const moving = await client(spare, 'failover');
  const lost = await client(spare, 'failover');
  const js = await join(stay, 'failover', 'stays');
  const jm = await join(moving, 'failover', 'moves');
  const jl = await join(lost, 'failover', 'lost');
  assert.ok(js.ok && jm.ok && jl.ok);
  const before = await status(nodeA, 'failover');
  assert.deepEqual(before.members.map((m) => m.name), ['stays', 'moves', 'lost']);

  await spare.close();
  // The moved student comes back through node A and claims its membership.
  const back = await connectClient(nodeA, 'failover', { room: 'failover', code: codeFor('failover') });
  sockets.push(back);
  const rejoined = await new Promise<{ ok: boolean; index?: number }>((resolve) =>
    back.emit('room:join', { room: 'failover', name: 'moves', kind: 'node', backend: 'cpu', rejoin: { memberId: jm.memberId, memberToken: jm.memberToken } }, resolve),
  );
  assert.ok(rejoined.ok, JSON.stringify(rejoined));
  assert.equal(rejoined.index, jm.index);
  // Until the grace ends nobody leaves the ring: the generation is the same.
  const during = await status(nodeA, 'failover');
  assert.equal(during.generation, before.generation);
  const dropped = nextEvent(stay, 'ring:generation', (g) => g.members.length === 2, GRACE_MS + 5_000);
  const g = await dropped;
  assert.deepEqual(g.members.map((m) => m.name), ['stays', 'moves']);
  assert.deepEqual(g.members.map((m) => m.index), [js.index, jm.index]);
  assert.ok(g.members.every((m) => m.connected));
});
