/**
 * What a page or a Node worker shows about its training worker: one WorkerStatus, patched
 * as things happen, and handed out as a fresh copy after every change.
 */
import type { ErrorBody } from '../protocol/errors';
import type { EpochCount } from './epoch-tally';
import { leftOf, rightOf, type Backend, type DeviceProbe, type Generation } from '../protocol';

export type WorkerState = 'idle' | 'joining' | 'ready' | 'waiting' | 'training' | 'paused' | 'done' | 'dropped' | 'error';

export interface WorkerStatus {
  state: WorkerState;
  memberId: string | null;
  index: number | null;
  rank: number | null;
  worldSize: number;
  chief: boolean;
  generation: number;
  step: number;
  /** Outer steps so far: one per step, or one per round of local steps. */
  round: number;
  /** The run's local steps per round, or null when it syncs every step. */
  localSteps: number | null;
  totalSteps: number | null;
  epoch: number;
  loss: number | null;
  trainAccuracy: number | null;
  testAccuracy: number | null;
  /** The held-out loss after the last epoch, nats per example (per symbol for text). */
  testLoss: number | null;
  /** The epoch the last held-out scores (testAccuracy, testLoss) are of, or null before any. */
  evaluatedEpoch: number | null;
  /** The class's account of the open epoch and the one before (examples, mean loss): the same on every replica. */
  epochs: readonly EpochCount[];
  weightsHash: string | null;
  gradNorm: number | null;
  examplesPerSec: number;
  examplesProcessed: number;
  numTensors: number;
  backend: Backend;
  /** Whether the signaling connection is up. The ring itself does not need it between steps. */
  connected: boolean;
  /** The checkpoint this run resumed from, and the weights hash right after restoring it. */
  resumedFrom: string | null;
  resumedHash: string | null;
  /** Step of the chief's newest checkpoint stored locally and on the server (chief only). */
  lastLocalCheckpointStep: number | null;
  lastServerCheckpointStep: number | null;
  /** This worker's compute time of the last step (ms). */
  computeMs: number;
  /** Duration of the last state hand-over from the chief (ms): the pause a join or recovery cost. */
  lastSyncMs: number | null;
  /** For a late joiner: from the admission to holding the live state (ms). */
  joinMs: number | null;
  /** For a late joiner: from the admission to its first step in lock-step (ms). */
  lockStepMs: number | null;
  /** The class's pause for the last admission of joiners, as this replica measured it (ms). */
  switchPauseMs: number | null;
  /** This device's admission probe (device-probe.ts), or null before it ran or when it failed. */
  probe: DeviceProbe | null;
  /** Times this replica reloaded the chief's state because the weight hashes differed. */
  resyncs: number;
  /** This worker's share of the last global batch (0..1). */
  batchShare: number;
  /** Its measured speed against the ring's median (2: twice as fast); 0 before it is measured. */
  speedVsMedian: number;
  /** Steps per second, over the last few steps. */
  stepsPerSec: number;
  /** Measured throughput to the right neighbour in the last all-reduce (MB/s). */
  linkMBps: number;
  /** How long the last step waited for its examples (ms): 0 while the prefetch keeps ahead. */
  dataMs: number;
  /** Why this worker is waiting for its examples (the data service is unreachable, say), or null. */
  dataWait: string | null;
  /** The task of the run this worker trains or last trained (shared/tasks/); null before any run. */
  task: string | null;
  /** The classes of the run this worker trains or last trained, in output order; null before any run. */
  classes: readonly string[] | null;
  /** Ring neighbours' names (left, right) in the current generation. */
  neighbours: { left: string; right: string } | null;
  /** Whether the run this worker trains or last trained masks its gradients (secure aggregation); null before any run. */
  secureAggregation: boolean | null;
  /** Why a secure run holds (fewer than three members: the sum would reveal a classmate's gradient), or null. */
  secureWait: string | null;
  error: ErrorBody | null;
}

export class WorkerStatusView {
  private readonly status: WorkerStatus;

  constructor(
    initial: { backend: Backend; connected: boolean; numTensors: number },
    private readonly onStatus: (status: WorkerStatus) => void,
  ) {
    this.status = {
      state: 'idle',
      memberId: null,
      index: null,
      rank: null,
      worldSize: 0,
      chief: false,
      generation: 0,
      step: 0,
      round: 0,
      localSteps: null,
      totalSteps: null,
      epoch: 0,
      loss: null,
      trainAccuracy: null,
      testAccuracy: null,
      testLoss: null,
      evaluatedEpoch: null,
      epochs: [],
      weightsHash: null,
      gradNorm: null,
      examplesPerSec: 0,
      examplesProcessed: 0,
      numTensors: initial.numTensors,
      backend: initial.backend,
      connected: initial.connected,
      secureAggregation: null,
      secureWait: null,
      resumedFrom: null,
      resumedHash: null,
      lastLocalCheckpointStep: null,
      lastServerCheckpointStep: null,
      computeMs: 0,
      lastSyncMs: null,
      joinMs: null,
      lockStepMs: null,
      switchPauseMs: null,
      probe: null,
      resyncs: 0,
      batchShare: 0,
      speedVsMedian: 0,
      stepsPerSec: 0,
      linkMBps: 0,
      dataMs: 0,
      dataWait: null,
      task: null,
      classes: null,
      neighbours: null,
      error: null,
    };
  }

  /** The status as it is now; read-only, and changed only through update(). */
  get current(): Readonly<WorkerStatus> {
    return this.status;
  }

  update(patch: Partial<WorkerStatus>): void {
    Object.assign(this.status, patch);
    this.onStatus({ ...this.status });
  }

  /** Rank, world size, neighbours and chief in generation `g`; the state too, unless a run is on. */
  showRing(g: Generation | null, running: boolean): void {
    if (!g) return;
    const rank = g.members.findIndex((m) => m.id === this.status.memberId);
    const n = g.members.length;
    this.update({
      neighbours: rank >= 0 && n > 1 ? { left: g.members[leftOf(rank, n)]!.name, right: g.members[rightOf(rank, n)]!.name } : null,
      generation: g.generation,
      rank: rank >= 0 ? rank : null,
      worldSize: n,
      chief: rank === 0,
      state: running ? this.status.state : rank >= 0 ? 'ready' : this.status.state === 'dropped' ? 'dropped' : 'waiting',
    });
  }
}
