/**
 * The ports through which a training run (training-run.ts) reaches what lies outside it:
 * the server's reports and requests, the chief's checkpoints, the generations it waits on,
 * and the teacher's stop and pause. The worker plugs in the real ones, a unit test its own.
 */
import type { ErrorBody, WebringError } from '../protocol/errors';
import type { DropRequest, EvictRequest, Generation, ReformRequest, TrainStop } from '../protocol';
import type { CollectiveEngine } from '../collectives/collective';
import type { Trainer } from './trainer';
import type { AskReform, RingView } from './generation-tracker';
import type { ReportEvent, ReportOf } from './signaling-session';

/** Where a run's reports and requests go: the signaling server, or a test's recorder. */
export interface RunReporter {
  report<E extends ReportEvent>(event: E, payload: ReportOf<E>): void;
  dropStraggler(request: DropRequest): void;
  accuse(request: EvictRequest, onRefused: (error: ErrorBody) => void): void;
  askReform(request: ReformRequest): void;
}

/** The chief's checkpoints of this run, and the restore every replica does on a resumed start. */
export interface RunCheckpoints {
  /** Captures the replica now (the next step waits for it); the writing goes on in the background. */
  save(trainer: Trainer, run: number, maxToKeep: number): Promise<void>;
  /** Resolves once every save has been written, or has failed. */
  flush(): Promise<void>;
  /** Makes the trainer's weights, optimizer state and position equal to checkpoint `id`. */
  restore(id: string, trainer: Trainer): Promise<void>;
}

/** The part of the generation tracker a run waits on and consumes. */
export interface RunGenerations {
  /** A generation admitting joiners, whose links are opening; null when none. */
  readonly pending: Generation | null;
  admitted(g: Generation): void;
  /** Resolves at the next generation, resume or stop; or after `timeoutMs` when given. */
  nextChange(timeoutMs?: number): Promise<void>;
  awaitRingChange(network: RingView, ring: CollectiveEngine, cause: WebringError, selfId: string | null, askReform: AskReform): Promise<void>;
}

/** The teacher's requests, as they arrive between steps; the worker sets them, the run reads them. */
export interface RunControl {
  stopRequested: boolean;
  stopReason: TrainStop['reason'] | null;
  /** The teacher's Pause is in force (until train:resume). */
  pauseRequested: boolean;
}
