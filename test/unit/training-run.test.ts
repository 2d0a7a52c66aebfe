/**
 * TrainingRun over the in-memory ring: real trainers and real ring all-reduces, with the
 * server side faked (generations are handed to each replica's tracker by the test, reports
 * and checkpoints are recorded) and time on a manual clock.
 */
import { startConfigSchema } from '../../shared/tasks/start-config';
import { mnistShards } from '../support/mnist';
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import * as tf from '@tensorflow/tfjs';
import { mnistSubset } from '../support/mnist';
import { type Generation, type MemberInfo, type StartConfig, type TrainStart } from '../../shared/protocol';
import type { LoadedDataset } from '../../shared/tasks/task';
import { WebringError } from '../../shared/protocol/errors';
import type { RingAllReduce } from '../../shared/collectives/ring-allreduce';
import { ManualClock } from '../../shared/util/clock';
import { GenerationTracker, type RingView } from '../../shared/training/generation-tracker';
import { WorkerStatusView, type WorkerStatus } from '../../shared/training/worker-status';
import { TrainingRun } from '../../shared/training/training-run';
import type { RunCheckpoints, RunControl, RunReporter } from '../../shared/training/run-ports';
import type { FaultInjector } from '../../shared/training/faults';
import { createMemoryRing } from '../support/memory-ring';

let dataset: LoadedDataset;

before(async () => {
  await tf.setBackend('cpu');
  dataset = mnistSubset();
});

const ROOM = 'run-room';

function member(id: string, index: number): MemberInfo {
  return {
    id,
    name: id,
    index,
    rank: null,
    backend: 'cpu',
    kind: 'node',
    adapter: null,
    examplesPerSec: 0,
    step: 0,
    weightsHash: null,
    computeMs: 0,
    batchShare: 0,
    linkMBps: 0, learningRate: 0.001, speedVsMedian: 1,
    collective: null,
    bytesSent: 0,
    probe: null,
    ownExamples: {},
    connected: true,
    connecting: false,
    node: null,
  };
}

function generation(n: number, ids: string[]): Generation {
  return { room: ROOM, generation: n, members: ids.map((id) => member(id, id.charCodeAt(0))) };
}

/** One in-memory ring per generation, shared by the members' networks. */
class MemoryWorld {
  private readonly rings = new Map<number, RingAllReduce[]>();

  ringOf(g: Generation, rank: number): RingAllReduce {
    let rings = this.rings.get(g.generation);
    if (!rings) {
      rings = createMemoryRing(g.members.length, { generation: g.generation }).rings;
      this.rings.set(g.generation, rings);
    }
    return rings[rank]!;
  }
}

/** RingNetwork's contract over the world's rings: every link is open at once. */
class MemoryNetwork implements RingView {
  collective: RingAllReduce | null = null;
  generation: Generation | null = null;
  readonly meshReady = false;
  readonly hubReady = false;

  constructor(
    private readonly world: MemoryWorld,
    private readonly selfId: string,
  ) {}

  applyGeneration(g: Generation): void {
    this.collective?.abort(new WebringError('ERR_STALE_GENERATION', `generation ${g.generation} replaced ${this.collective.generation}`));
    this.generation = g;
    const rank = g.members.findIndex((m) => m.id === this.selfId);
    this.collective = rank >= 0 ? this.world.ringOf(g, rank) : null;
  }

  prepare(): void {}

  isReadyFor(g: Generation): boolean {
    return g.members.some((m) => m.id === this.selfId);
  }

  unreachableIn(): string[] {
    return [];
  }
}

interface Report {
  event: string;
  payload: { step: number; generation: number; reason?: string };
}

/** One replica: its network, tracker, status and run, with the server side recorded. */
class Replica {
  readonly network: MemoryNetwork;
  readonly generations: GenerationTracker;
  readonly status: WorkerStatusView;
  readonly statuses: WorkerStatus[] = [];
  readonly reports: Report[] = [];
  readonly saves: number[] = [];
  readonly logs: string[] = [];
  readonly control: RunControl = { stopRequested: false, stopReason: null, pauseRequested: false };
  run: TrainingRun | null = null;
  done: Promise<void> | null = null;

  constructor(
    world: MemoryWorld,
    readonly id: string,
    private readonly clock: ManualClock,
  ) {
    this.network = new MemoryNetwork(world, id);
    this.generations = new GenerationTracker(clock, (m) => this.logs.push(m));
    this.status = new WorkerStatusView({ backend: 'cpu', connected: true, numTensors: 0 }, (s) => this.statuses.push(s));
    this.status.update({ memberId: id });
  }

  /** The server announces `g` to this replica. */
  announce(g: Generation): void {
    if (this.generations.receive(g, this.network, this.run !== null) === 'applied') this.status.showRing(g, this.run !== null);
  }

  start(start: TrainStart, faults?: FaultInjector): void {
    const reporter: RunReporter = {
      report: (event, payload) => this.reports.push({ event, payload: payload as Report['payload'] }),
      dropStraggler: () => assert.fail('no straggler here'),
      accuse: () => assert.fail('nobody misbehaves here'),
      askReform: () => assert.fail('a member left: the new generation comes without asking'),
    };
    const checkpoints: RunCheckpoints = {
      save: async (trainer) => void this.saves.push(trainer.step),
      flush: async () => {},
      restore: async () => assert.fail('a fresh start restores nothing'),
    };
    this.run = new TrainingRun({
      start,
      network: this.network,
      generations: this.generations,
      reporter,
      checkpoints,
      status: this.status,
      control: this.control,
      data: mnistShards(start.config, dataset),
      clock: this.clock,
      faults,
      log: (m) => this.logs.push(m),
    });
    this.done = this.run.execute();
  }

  get current(): Readonly<WorkerStatus> {
    return this.status.current;
  }

  finished(): Report | undefined {
    return this.reports.find((r) => r.event === 'worker:finished');
  }

  progressSteps(): number[] {
    return this.reports.filter((r) => r.event === 'worker:progress').map((r) => r.payload.step);
  }
}

function config(overrides: Partial<StartConfig>): StartConfig {
  return startConfigSchema.parse({ model: 'mlp', optimizer: 'sgd', learningRate: 0.1, batchSizePerWorker: 4, seed: 11, ...overrides });
}

function trainStart(c: StartConfig, g: number, admitted = false): TrainStart {
  return { run: 1, generation: g, config: c, startStep: 0, resume: null, admitted };
}

/** Lets the rings, the trainers and the runs move until `done()` holds. */
async function until(done: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 200_000 && !done(); i++) await new Promise((resolve) => setImmediate(resolve));
  assert.ok(done(), `timed out waiting for ${what}`);
}

async function hashes(replicas: Replica[]): Promise<string[]> {
  return Promise.all(replicas.map((r) => r.run!.trainer.weightsHash()));
}

test('a run of a few steps: every replica reports every step, the chief checkpoints, weights end identical', async () => {
  const clock = new ManualClock();
  const world = new MemoryWorld();
  const g1 = generation(1, ['a', 'b', 'c']);
  const replicas = g1.members.map((m) => new Replica(world, m.id, clock));
  for (const r of replicas) r.announce(g1);
  const c = config({ maxSteps: 6, saveEverySteps: 3 });
  for (const r of replicas) r.start(trainStart(c, 1));
  await Promise.all(replicas.map((r) => r.done));

  assert.deepEqual(replicas.map((r) => r.current.state), ['done', 'done', 'done']);
  assert.equal(new Set(await hashes(replicas)).size, 1, 'bit-identical replicas');
  for (const r of replicas) {
    assert.deepEqual(r.progressSteps(), [1, 2, 3, 4, 5, 6]);
    assert.deepEqual(r.finished()?.payload, { run: 1, generation: 1, step: 6, reason: 'completed' });
    assert.ok(r.reports.some((x) => x.event === 'worker:evaluated'), 'the run closed with an evaluation');
  }
  assert.deepEqual(replicas.map((r) => r.saves), [[3, 6], [], []], 'only the chief saves: every 3 steps and at the end');
  assert.equal(replicas[0]!.current.chief, true);
  // The per-step path keeps no tensors: the count is flat from step to step.
  const counts = replicas[0]!.statuses.filter((s) => s.state === 'training' && s.step >= 2).map((s) => s.numTensors);
  assert.equal(new Set(counts).size, 1, `tensors per step: ${counts.join(', ')}`);
  for (const r of replicas) r.run!.trainer.dispose();
});

test('a member vanishing mid-step: the survivors redo the step on the next generation and finish together', async () => {
  const clock = new ManualClock();
  const world = new MemoryWorld();
  const g1 = generation(1, ['a', 'b', 'c']);
  const replicas = g1.members.map((m) => new Replica(world, m.id, clock));
  const [a, b, leaver] = replicas as [Replica, Replica, Replica];
  for (const r of replicas) r.announce(g1);
  const c = config({ maxSteps: 5 });
  a.start(trainStart(c, 1));
  b.start(trainStart(c, 1));
  // The leaver's step 2 never ends on its own: its laptop lid closed mid-compute.
  const STUCK_MS = 3_600_000;
  leaver.start(trainStart(c, 1), { slowComputeMs: (step) => (step === 2 ? STUCK_MS : 0) });
  await until(() => clock.pending > 0 && a.current.step === 2 && b.current.step === 2, 'the survivors to reach step 2');

  const g2 = generation(2, ['a', 'b']);
  a.announce(g2);
  b.announce(g2);
  await Promise.all([a.done, b.done]);
  for (const r of [a, b]) {
    assert.ok(r.logs.some((m) => m.startsWith('step interrupted (ERR_STALE_GENERATION')), 'the step was interrupted, not skipped');
    assert.equal(r.current.state, 'done');
    assert.equal(r.current.worldSize, 2);
    assert.deepEqual(r.finished()?.payload, { run: 1, generation: 2, step: 5, reason: 'completed' });
    assert.deepEqual(r.progressSteps(), [1, 2, 3, 4, 5], 'step 2 counted once, on the new ring');
  }
  assert.equal(new Set(await hashes([a, b])).size, 1);

  // The leaver hears it is out, wakes, and ends without reporting a failure.
  leaver.announce(g2);
  clock.advance(STUCK_MS);
  await leaver.done;
  assert.equal(leaver.finished(), undefined);
  assert.notEqual(leaver.current.state, 'error');
  for (const r of replicas) r.run!.trainer.dispose();
});

/** Replicas a and b training generation 1 (up to `maxSteps`) past their second step, and a joiner c not yet announced. */
async function ringOfTwoTraining(maxSteps: number): Promise<{ a: Replica; b: Replica; joiner: Replica; c: StartConfig }> {
  const clock = new ManualClock();
  const world = new MemoryWorld();
  const g1 = generation(1, ['a', 'b']);
  const [a, b] = g1.members.map((m) => new Replica(world, m.id, clock)) as [Replica, Replica];
  const joiner = new Replica(world, 'c', clock);
  for (const r of [a, b]) r.announce(g1);
  const c = config({ maxSteps });
  a.start(trainStart(c, 1));
  b.start(trainStart(c, 1));
  await until(() => a.current.step >= 2 && b.current.step >= 2, 'two steps');
  return { a, b, joiner, c };
}

test('a joiner is admitted at a step boundary and trains on from the live state', async () => {
  const { a, b, joiner, c } = await ringOfTwoTraining(8);

  const g2 = generation(2, ['a', 'b', 'c']);
  joiner.announce(g2);
  joiner.start(trainStart(c, 2, true));
  a.announce(g2);
  b.announce(g2);
  assert.equal(a.generations.pending, g2, 'joiners only: the ring trains on while their links open');
  await Promise.all([a.done, b.done, joiner.done]);

  const all = [a, b, joiner];
  assert.deepEqual(all.map((r) => r.current.state), ['done', 'done', 'done']);
  assert.deepEqual(all.map((r) => r.current.worldSize), [3, 3, 3]);
  assert.equal(new Set(await hashes(all)).size, 1, 'the joiner holds the same weights as the ring');
  assert.ok(a.logs.some((m) => /^switching to generation 2 after step \d+$/.test(m)));
  assert.equal(a.generations.pending, null);
  assert.ok(joiner.current.joinMs !== null, 'the joiner measured its join');
  const joinedAt = joiner.progressSteps()[0]!;
  assert.ok(joinedAt > 2, `the joiner's first step came from the live state (step ${joinedAt})`);
  for (const r of all) assert.deepEqual(r.finished()?.payload, { run: 1, generation: 2, step: 8, reason: 'completed' });
  for (const r of all) r.run!.trainer.dispose();
});

test('issue 38 (3): a member that never votes ready keeps the joiner out only until the server applies the admission at once (switchNow)', async () => {
  const { a, b, joiner, c } = await ringOfTwoTraining(30);
  // b never says it is ready for the joiner's generation.
  b.network.isReadyFor = () => false;
  const g2 = generation(2, ['a', 'b', 'c']);
  joiner.announce(g2);
  joiner.start(trainStart(c, 2, true));
  a.announce(g2);
  b.announce(g2);
  const pendingFrom = a.current.step;
  await until(() => a.current.step >= pendingFrom + 5, 'five more steps');
  assert.equal(a.generations.pending, g2, 'without the vote the ring does not switch');
  assert.equal(a.current.worldSize, 2);

  // The server's deadline: the same members, applied at once by everyone.
  const g3 = { ...generation(3, ['a', 'b', 'c']), switchNow: true };
  for (const r of [a, b, joiner]) r.announce(g3);
  assert.equal(a.generations.pending, null, 'applied, not prepared');
  await Promise.all([a.done, b.done, joiner.done]);
  const all = [a, b, joiner];
  assert.deepEqual(all.map((r) => r.current.state), ['done', 'done', 'done']);
  assert.deepEqual(all.map((r) => r.current.worldSize), [3, 3, 3]);
  assert.equal(new Set(await hashes(all)).size, 1, 'the joiner holds the same weights as the ring');
  for (const r of all) assert.deepEqual(r.finished()?.payload, { run: 1, generation: 3, step: 30, reason: 'completed' });
  for (const r of all) r.run!.trainer.dispose();
});
