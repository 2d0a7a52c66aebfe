/**
 * `npm run bench:rooms`: what keeping rooms in Redis costs a signaling node, against the
 * in-process store. A room of 32 members (the cap) takes progress reports, as 32 tabs
 * stepping send them: sequentially (one node's latency per event) and 32 at once from two
 * stores (two nodes racing for one room, where the compare-and-set retries). Prints numbers;
 * asserts nothing.
 */
import { Redis } from 'ioredis';
import { MemoryRoomStore, type RoomStore } from '../../signaling-server/rooms/room-store';
import { RedisRoomStore } from '../../signaling-server/rooms/redis-room-store';
import { wallClock } from '../../signaling-server/rooms/wall-clock';
import { MAX_ROOM_MEMBERS, type ProgressReport } from '../../shared/protocol';
import { LAB_DATASETS, LAB_WORKLOADS } from '../../shared/tasks/lab-workloads';
import { startRedis } from '../support/redis';

const ROOM = 'bench-room';
const SEQUENTIAL_REPORTS = 2_000;
const ROUNDS = 100;

function memberId(i: number): string {
  return `m${String(i).padStart(8, '0')}`;
}

async function fill(store: RoomStore): Promise<number> {
  for (let i = 0; i < MAX_ROOM_MEMBERS; i++) {
    await store.update(ROOM, (r) => r.join({ id: memberId(i), socketId: `s${i}`, tokenHash: '0'.repeat(64), name: `student ${i}`, backend: 'webgpu', kind: 'browser', adapter: null, node: null }), { create: true });
  }
  const started = await store.update(ROOM, (r) => r.start({ ...LAB_WORKLOADS.dense.config, optimizer: 'adam', learningRate: 0.001, warmupSteps: 0, scaleLearningRate: false, referenceBatch: 32, balanceShares: false, batchSizePerWorker: 32, epochs: 2, seed: 1, saveEverySteps: 50, maxToKeep: 3, resumeFrom: 'none', wire: 'fp32', allreduce: 'auto', dataset: LAB_DATASETS.full.id, data: 'dataset', classes: [...LAB_WORKLOADS.dense.task.outputs], secureAggregation: false, sync: 'every-step', localSteps: 20, outerOptimizer: 'nesterov', outerLearningRate: 0.7, outerMomentum: 0.9, localOptimizer: 'sgd', localLearningRate: 0.3, localCorrection: 'none', powerSgdRank: 0, sumWordBits: 0 }, null));
  return started!.result.run;
}

function report(run: number, step: number): ProgressReport {
  return {
    run, generation: MAX_ROOM_MEMBERS, step, epoch: 0, loss: 2.3 / step, trainAccuracy: 0.5, examplesPerSec: 500, weightsHash: '0123456789abcdef',
    totalSteps: 500, computeMs: 40, batchShare: 1 / MAX_ROOM_MEMBERS, linkMBps: 30, learningRate: 0.001, speedVsMedian: 1, hashChecked: false, hashMismatch: false,
    collective: { algorithm: 'ring', alphaMs: 0.6, betaMBps: 30, reason: 'test', timing: { dataMs: 0, computeMs: 40, readbackMs: 2, crossMs: 0, commMs: 20, applyMs: 3 } },
  };
}

async function measure(name: string, stores: RoomStore[]): Promise<void> {
  const run = await fill(stores[0]!);
  let t = performance.now();
  for (let i = 0; i < SEQUENTIAL_REPORTS; i++) {
    await stores[0]!.update(ROOM, (r) => r.recordProgress(memberId(i % MAX_ROOM_MEMBERS), report(run, 1 + Math.floor(i / MAX_ROOM_MEMBERS))));
  }
  const sequentialUs = ((performance.now() - t) * 1000) / SEQUENTIAL_REPORTS;
  t = performance.now();
  for (let round = 0; round < ROUNDS; round++) {
    const step = 1_000 + round;
    await Promise.all(Array.from({ length: MAX_ROOM_MEMBERS }, (_, i) => stores[i % stores.length]!.update(ROOM, (r) => r.recordProgress(memberId(i), report(run, step)))));
  }
  const perStepMs = (performance.now() - t) / ROUNDS;
  console.log(`${name}: ${sequentialUs.toFixed(0)} µs per progress report one after another; a step of ${MAX_ROOM_MEMBERS} reports at once from ${stores.length} store(s): ${perStepMs.toFixed(1)} ms`);
}

async function main(): Promise<void> {
  await measure('in process', [new MemoryRoomStore(wallClock)]);
  const redis = await startRedis();
  const connections = [new Redis(redis.url), new Redis(redis.url)];
  try {
    await measure('Redis, one node', [new RedisRoomStore(connections[0]!, wallClock)]);
    await connections[0]!.flushall();
    await measure('Redis, two nodes', connections.map((c) => new RedisRoomStore(c, wallClock)));
  } finally {
    for (const c of connections) c.disconnect();
    await redis.stop();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
