/**
 * The data service's budget arithmetic (signaling-server/edge/data-budget.ts), and the proof
 * that an honest class never meets it: classes of real StreamedDataset workers (the code every
 * tab and Node worker runs) train whole epochs of the real datasets' sizes, with students
 * joining, leaving and reloading, and every request they make is charged to the budgets the
 * server keeps, with the epoch the server learns from the chief's reports a step late.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { systemClock } from '../../shared/util/clock';
import { Timers } from '../../signaling-server/rooms/timers';
import { WebringError } from '../../shared/protocol/errors';
import { trainingSetBytes } from '../../shared/data/data-service';
import { EXAMPLE_BYTES } from '../support/mnist';
import { MNIST_PIXELS } from '../../shared/tasks/mnist/format';
import type { ExampleFetcher } from '../../shared/data/example-fetcher';
import { StreamedDataset, examplesPerRequest } from '../../shared/data/streamed-dataset';
import { advance, type DataCursor } from '../../shared/data/batch-plan';
import { roundEndsAfter } from '../../shared/training/local-rounds';
import { MAX_LOCAL_STEPS } from '../../shared/protocol/vocabulary';
import { datasetFacts } from '../../shared/tasks/registry';
import { testShardOf } from '../../shared/data/sharding';
import { DataBudgets, MAX_COUNTED_CHANGES, UnsentReplies, budgetDatasetOf, budgetPlan, readerWindowBudget, roomWindowBudget, type BudgetPlan, type RoomWindow } from '../../signaling-server/edge/data-budget';

const MB = 1e6;
/** MNIST's datasets as the budgets size them. */
const D = (id: string) => budgetDatasetOf(id);
const setBytes = (id: string) => trainingSetBytes(D(id), MNIST_PIXELS);

test('the budgets: about 1.2× the training set per epoch for the class plus slack, a reader its share, more slack for each change of the ring', () => {
  const plan: BudgetPlan = { dataset: D('mnist-60k'), perWorker: 32, maxShare: 32 };
  const quiet = { smallestRing: 30, largestRing: 30, changes: 0 };
  // 1.2 × 60,000 + 2 × 10,000 test digits + one prefetch window of the class (9 × 32 × 30) + a test shard of 334.
  assert.equal(roomWindowBudget(plan, quiet), Math.ceil((72_000 + 20_000 + 8_640 + 334) * EXAMPLE_BYTES));
  assert.ok(roomWindowBudget(plan, quiet) / setBytes('mnist-60k') < 1.75);
  // A reader: 1.2 × its 1/30 of the set, the test split once, its own window of 9 × 32.
  assert.equal(readerWindowBudget(plan, quiet), Math.ceil((2_400 + 10_000 + 288) * EXAMPLE_BYTES));
  // Alone, a reader may take the whole set; shares that follow speed let a fast rank take up to 4× its part.
  assert.equal(readerWindowBudget(plan, { ...quiet, smallestRing: 1 }), Math.ceil((72_000 + 10_000 + 288) * EXAMPLE_BYTES));
  const balanced = budgetPlan(null, 'mnist-60k');
  assert.deepEqual(balanced, { dataset: D('mnist-60k'), perWorker: 32, maxShare: 129 });
  assert.ok(readerWindowBudget(balanced, quiet) > readerWindowBudget(plan, quiet) + 1.2 * 3 * 2_000 * EXAMPLE_BYTES);
  // Each change adds a window of the class and a test shard; the run's config wins over the dataset asked for.
  assert.equal(roomWindowBudget(plan, { ...quiet, changes: 3 }) - roomWindowBudget(plan, quiet), 3 * (8_640 + 334) * EXAMPLE_BYTES);
  assert.equal(budgetPlan({ dataset: 'mnist-10k', batchSizePerWorker: 64, balanceShares: false }, 'mnist-60k').dataset.id, 'mnist-10k');
  assert.throws(() => budgetPlan(null, 'cifar-10'), (e: unknown) => e instanceof WebringError && e.code === 'ERR_BAD_REQUEST' && e.field === 'dataset');
});

test('the windows: a reader past its budget is refused and charged nothing; the room refuses only those past their part; a new epoch or run refills', () => {
  const budgets = new DataBudgets();
  const plan: BudgetPlan = { dataset: D('mnist-10k'), perWorker: 32, maxShare: 32 };
  const at: RoomWindow = { run: 1, epoch: 0, generation: 4, ringSize: 2 };
  const seen = { smallestRing: 2, largestRing: 2, changes: 0 };
  const readerBudget = readerWindowBudget(plan, seen);
  const refused = (fn: () => void) => assert.throws(fn, (err: unknown) => err instanceof WebringError && err.code === 'ERR_DATA_BUDGET');
  budgets.charge('r', at, plan, 'member a', readerBudget);
  refused(() => budgets.charge('r', at, plan, 'member a', 1));
  // Four readers of a ring of 2 (join-code readers are keyed by address) fill the room's budget.
  const roomBudget = roomWindowBudget(plan, seen);
  const part = Math.floor(roomBudget / 4);
  budgets.charge('r', at, plan, 'member b', part + EXAMPLE_BYTES);
  budgets.charge('r', at, plan, 'address 10.0.0.7', 3_500 * EXAMPLE_BYTES);
  budgets.charge('r', at, plan, 'address 10.0.0.8', 700 * EXAMPLE_BYTES);
  assert.ok(readerBudget + part + 4_200 * EXAMPLE_BYTES < roomBudget, 'still within the room budget');
  budgets.charge('r', at, plan, 'address 10.0.0.8', 1_000 * EXAMPLE_BYTES);
  // Past the room's budget now: a reader past its quarter of it is refused, one within it is served up to its quarter.
  refused(() => budgets.charge('r', at, plan, 'member b', EXAMPLE_BYTES));
  budgets.charge('r', at, plan, 'address 10.0.0.8', part - 1_700 * EXAMPLE_BYTES);
  refused(() => budgets.charge('r', at, plan, 'address 10.0.0.8', EXAMPLE_BYTES));
  // The teacher is counted, never refused.
  budgets.charge('r', at, plan, null, 10 * roomBudget);
  // Another room has its own window.
  budgets.charge('other', at, plan, 'member a', readerBudget);
  // The next epoch, or the next run, opens a fresh window.
  budgets.charge('r', { ...at, epoch: 1 }, plan, 'member a', readerBudget);
  budgets.charge('r', { ...at, run: 2, epoch: 1 }, plan, 'member a', readerBudget);
  // Changes of the ring add slack, up to MAX_COUNTED_CHANGES.
  const busy: RoomWindow = { run: 3, epoch: 0, generation: 0, ringSize: 2 };
  budgets.charge('r', busy, plan, 'member a', readerBudget);
  refused(() => budgets.charge('r', busy, plan, 'member a', 1));
  budgets.charge('r', { ...busy, generation: 1_000 }, plan, 'member a', readerWindowBudget(plan, { ...seen, changes: MAX_COUNTED_CHANGES }) - readerBudget);
  refused(() => budgets.charge('r', { ...busy, generation: 2_000 }, plan, 'member a', 1));
});

interface Student {
  id: string;
  source: StreamedDataset;
}

/** How a simulated class moves through its run. */
interface Schedule {
  dataset: string;
  balanceShares: boolean;
  epochs: number;
  /** Steps a turn: 1 for every-step sync, `localSteps` for rounds (which end with their epoch: roundEndsAfter). */
  localSteps: number;
  /** The ring before step `step`: joins, leaves and reloads (a new StreamedDataset under a new id). */
  change: (step: number, ring: Student[], fresh: () => Student) => Student[];
  /** Where the run starts: a checkpoint's cursor, for a resumed run (the server opens its window at the cursor's epoch). */
  from?: DataCursor;
}

/**
 * One class training `schedule`, every fetch charged to a DataBudgets as the server charges
 * it. The server's window follows the chief's report after each turn, which names the epoch
 * the class trains next (training-run.ts reportStep: the data cursor's); the report is taken
 * a step late, so the next turn's first reads land in the old window. In a round a student
 * who leaves stops reading at once (the survivors finish their slices of it), and a joiner
 * waits for the round's end, as LocalRounds and the server's admission do. Returns the largest
 * window of the room, as a multiple of the training set, and the largest reader's.
 */
async function honestClass(schedule: Schedule): Promise<{ roomPerSet: number; readerPerSet: number; steps: number; turns: number }> {
  const { dataset, balanceShares, epochs, localSteps, change } = schedule;
  const config = { dataset, batchSizePerWorker: 32, balanceShares } as never;
  const plan = budgetPlan(config, dataset);
  const { trainCount, testCount, exampleBytes } = D(dataset);
  const features = datasetFacts(dataset)!.features;
  const budgets = new DataBudgets();
  let generation = 0;
  let ring: Student[] = [];
  let cursor: DataCursor = schedule.from ?? { epoch: 0, offset: 0 };
  let reportedEpoch = cursor.epoch;
  const windowBytes = new Map<string, number>();
  const readerBytes = new Map<string, number>();
  const window = (): RoomWindow => ({ run: 1, epoch: reportedEpoch, generation, ringSize: ring.length });
  let nextId = 0;
  const fresh = (): Student => {
    const id = `m${nextId++}`;
    const fetcher: ExampleFetcher = async (_split, _indices, count) => {
      assert.ok(count <= examplesPerRequest(plan.maxShare), `a request of ${count} examples, past the server's bound`);
      const bytes = count * exampleBytes;
      budgets.charge('class', window(), plan, `member ${id}`, bytes);
      windowBytes.set(`${reportedEpoch}`, (windowBytes.get(`${reportedEpoch}`) ?? 0) + bytes);
      readerBytes.set(`${reportedEpoch} ${id}`, (readerBytes.get(`${reportedEpoch} ${id}`) ?? 0) + bytes);
      await new Promise((resolve) => setImmediate(resolve));
      return { labels: new Uint8Array(count), features: new Uint8Array(count * features) };
    };
    return { id, source: new StreamedDataset({ dataset: D(dataset), format: { features, byteScale: 1 / 255 }, perWorker: 32, maxShare: plan.maxShare, seed: 9, fetcher }) };
  };
  const images = new Float32Array(plan.maxShare * features);
  const labels = new Int32Array(plan.maxShare);
  let step = 0;
  let turns = 0;
  let report: number | null = null;
  let departed: Student[] = [];
  while (cursor.epoch < epochs) {
    // A new ring forms between turns only: every join and every leave is a generation of its own on the server (a reload is both).
    const survivors = ring.filter((s) => !departed.includes(s));
    const next = change(step, survivors, fresh);
    generation += next.filter((s) => !ring.includes(s)).length + ring.filter((s) => !next.includes(s)).length;
    ring = next;
    departed = [];
    const limit = localSteps;
    let reading = ring.map((s, rank) => ({ s, rank }));
    const worldSize = ring.length;
    let epochEnded = false;
    for (let steps = 1; ; steps++, step++) {
      const batch = ring[0]!.source.nextBatch(cursor, worldSize);
      await Promise.all(reading.map(({ s, rank }) => s.source.readShard(batch, rank, images, labels)));
      // The last turn's report reaches the server once this turn's first step is read.
      if (report !== null) reportedEpoch = report;
      report = null;
      const after = advance(batch, trainCount);
      epochEnded = after.epoch !== batch.epoch;
      cursor = after;
      if (roundEndsAfter(steps, limit, batch, after)) {
        step++;
        break;
      }
      // Mid-round, a student who leaves stops reading; a joiner waits for the round's end.
      const stays = change(step + 1, ring, fresh);
      for (const s of ring) if (!stays.includes(s) && !departed.includes(s)) departed.push(s);
      reading = reading.filter(({ s }) => !departed.includes(s));
    }
    turns++;
    report = cursor.epoch;
    if (epochEnded) {
      // The evaluation at the epoch's end: each rank scores its test shard, 100 examples at a time.
      for (const [rank, s] of ring.entries()) {
        const shard = testShardOf(rank, ring.length, testCount);
        for (let at = shard.start; at < shard.start + shard.count; at += 100) await s.source.readTest(at, Math.min(100, shard.start + shard.count - at), images, labels);
      }
    }
  }
  const set = trainCount * exampleBytes;
  return { roomPerSet: Math.max(...windowBytes.values()) / set, readerPerSet: Math.max(...readerBytes.values()) / set, steps: step, turns };
}

const steady = (n: number) => (_step: number, ring: Student[], fresh: () => Student) => (ring.length === n ? ring : Array.from({ length: n }, fresh));

/** A lesson: one tab first, a student joining every other step up to 30, then a leave and a reload every 5 steps. */
const lesson = (step: number, ring: Student[], fresh: () => Student): Student[] => {
  if (ring.length === 0) return [fresh()];
  if (step % 2 === 0 && ring.length < 30 && step < 60) return [...ring, fresh()];
  if (step >= 60 && step % 5 === 0) {
    const kept = ring.filter((_, i) => i !== step % ring.length);
    return step % 10 === 0 ? [...kept, fresh()] : kept.length >= 20 ? kept : [...kept, fresh()];
  }
  return ring;
};

/** `n` students, one of whom leaves every `every` steps and comes back as a new tab (a leave in the middle of most rounds). */
const churn = (n: number, every: number) => (step: number, ring: Student[], fresh: () => Student): Student[] => {
  if (ring.length === 0) return Array.from({ length: n }, fresh);
  if (step % every !== 0 || step === 0) return ring.length < n ? [...ring, fresh()] : ring;
  return ring.filter((_, i) => i !== (step / every) % ring.length);
};

test('an honest class of 30 on the official MNIST never meets the budgets: steady, and through a lesson of joins, leaves and reloads', { timeout: 120_000 }, async () => {
  for (const balance of [false, true]) {
    const quiet = await honestClass({ dataset: 'mnist-60k', balanceShares: balance, epochs: 2, localSteps: 1, change: steady(30) });
    // Once per epoch, plus the test split and the prefetch across the epoch's end.
    assert.ok(quiet.roomPerSet < 1.35, `steady: ${quiet.roomPerSet.toFixed(2)}× the set in one epoch`);
    const busy = await honestClass({ dataset: 'mnist-60k', balanceShares: balance, epochs: 2, localSteps: 1, change: lesson });
    assert.ok(busy.steps > 100);
    console.log(`mnist-60k, balanceShares ${balance}: steady class of 30 ${quiet.roomPerSet.toFixed(2)}× the training set per epoch (a reader ${(quiet.readerPerSet * 100).toFixed(1)}%); lesson with churn ${busy.roomPerSet.toFixed(2)}× (a reader ${(busy.readerPerSet * 100).toFixed(1)}%)`);
  }
});

test('an honest class on the 10k subset, whose epoch is shorter than the prefetch window at 30 tabs, never meets the budgets', { timeout: 60_000 }, async () => {
  for (const n of [1, 4, 30]) {
    const quiet = await honestClass({ dataset: 'mnist-10k', balanceShares: false, epochs: 3, localSteps: 1, change: steady(n) });
    console.log(`mnist-10k, ${n} tab(s): ${quiet.roomPerSet.toFixed(2)}× the training set per epoch (a reader ${(quiet.readerPerSet * 100).toFixed(1)}%)`);
  }
  const busy = await honestClass({ dataset: 'mnist-10k', balanceShares: true, epochs: 12, localSteps: 1, change: lesson });
  console.log(`mnist-10k lesson with churn: ${busy.roomPerSet.toFixed(2)}× the training set per epoch`);
  assert.ok(busy.roomPerSet * setBytes('mnist-10k') > 1 * MB);
});

test('every schedule fits the budgets: every step and rounds of 1, 6, 10, 83 and the most local steps, on every dataset, for classes of 1 to 30, steady, with a leave in the middle of rounds, and resumed mid-epoch', { timeout: 600_000 }, async () => {
  const rows: string[] = [];
  for (const dataset of ['mnist-10k', 'names-en', 'mnist-60k']) {
    for (const n of dataset === 'mnist-60k' ? [3, 30] : [1, 3, 8, 30]) {
      for (const localSteps of [1, 6, 10, 83, MAX_LOCAL_STEPS]) {
        const run = await honestClass({ dataset, balanceShares: n % 2 === 1, epochs: 2, localSteps, change: steady(n) });
        assert.ok(run.turns > 1, `${dataset} at ${n}: ${run.turns} turns`);
        rows.push(`${dataset} N=${n} H=${localSteps}: ${run.turns} turns, room ${run.roomPerSet.toFixed(2)}×, reader ${(run.readerPerSet * 100).toFixed(1)}%`);
      }
    }
  }
  for (const localSteps of [6, 83]) {
    const left = await honestClass({ dataset: 'mnist-10k', balanceShares: true, epochs: 3, localSteps, change: churn(4, 20) });
    rows.push(`mnist-10k N=4 H=${localSteps}, a leave every 20 steps: room ${left.roomPerSet.toFixed(2)}×`);
    const resumed = await honestClass({ dataset: 'mnist-10k', balanceShares: false, epochs: 2, localSteps, change: steady(3), from: { epoch: 0, offset: 4_000 } });
    rows.push(`mnist-10k N=3 H=${localSteps}, resumed at 4,000 of epoch 0: room ${resumed.roomPerSet.toFixed(2)}×`);
  }
  console.log(rows.join('\n'));
});

test('replies waiting to be sent: capped per address and per server, one per connection, and a connection that stops reading is cut, which frees its share', { timeout: 30_000 }, async () => {
  const MIB = 1024 * 1024;
  const timers = new Timers(systemClock);
  const unsent = new UnsentReplies(timers, Date.now, { perAddress: 20 * MIB, total: 36 * MIB, stalledMs: 1_000 });
  const app = express();
  // Each request names the address it is counted for, so one test process stands for several.
  app.get('/:address/:mib', (req, res) => {
    unsent.claimConnection(req, res);
    const bytes = Number(req.params.mib) * MIB;
    unsent.admit(req, res, req.params.address, bytes)(Buffer.alloc(bytes));
  });
  app.use((err: WebringError, _req: express.Request, res: express.Response, _next: express.NextFunction) => res.status(429).json({ code: err.code, retryAfter: res.get('retry-after') }));
  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  const port = (server.address() as AddressInfo).port;
  const readers: net.Socket[] = [];
  /** A connection that asks for `mib` MiB counted for `address` and reads nothing. */
  const stalled = async (address: string, mib: number): Promise<net.Socket> => {
    const socket = net.connect({ port, host: '127.0.0.1' });
    socket.pause();
    readers.push(socket);
    await new Promise((resolve) => socket.once('connect', resolve));
    socket.write(`GET /${address}/${mib} HTTP/1.1\r\nHost: x\r\n\r\n`);
    await new Promise((r) => setTimeout(r, 200));
    return socket;
  };
  const refusal = async (path: string) => {
    const res = await fetch(`http://127.0.0.1:${port}${path}`);
    return [res.status, ((await res.json()) as { code: string }).code];
  };
  try {
    const first = await stalled('a', 16);
    // 16 MiB do not fit in the kernel's buffers: the address's cap of 20 MiB leaves no room for 8 more.
    assert.deepEqual(await refusal('/a/8'), [429, 'ERR_RATE_LIMITED']);
    // Another address has its own cap, up to the server's 36 MiB in all.
    await stalled('b', 16);
    assert.deepEqual(await refusal('/c/8'), [429, 'ERR_RATE_LIMITED']);
    // After the stall limit both readers are cut, and what they held is free again.
    await new Promise((r) => setTimeout(r, 2_500));
    assert.ok(first.destroyed || first.readableEnded || (await new Promise<boolean>((resolve) => {
      first.once('close', () => resolve(true));
      first.resume();
      setTimeout(() => resolve(false), 3_000);
    })), 'the stalled connection was cut');
    const served = await fetch(`http://127.0.0.1:${port}/a/8`);
    assert.equal(served.status, 200);
    assert.equal((await served.arrayBuffer()).byteLength, 8 * MIB);
    // Two requests pipelined on one connection: the second is refused while the first's reply is out.
    const pipelined = net.connect({ port, host: '127.0.0.1' });
    readers.push(pipelined);
    let answer = '';
    pipelined.on('data', (chunk: Buffer) => (answer += chunk.toString('latin1')));
    await new Promise((resolve) => pipelined.once('connect', resolve));
    pipelined.write('GET /d/1 HTTP/1.1\r\nHost: x\r\n\r\nGET /d/1 HTTP/1.1\r\nHost: x\r\n\r\n');
    for (let i = 0; i < 100 && !/HTTP\/1\.1 429/.test(answer); i++) await new Promise((r) => setTimeout(r, 20));
    assert.deepEqual([...answer.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => m[1]), ['200', '429']);
  } finally {
    for (const r of readers) r.destroy();
    timers.close();
    await new Promise((resolve) => server.close(resolve));
  }
});
