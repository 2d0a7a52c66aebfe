/**
 * What a `train:stop` does to the run in progress on this worker. A teacher's stop is agreed
 * through the ring, so that every replica stops after the same step. A failure ends the run
 * at once (the room goes back to a checkpoint). A stall ends it at once too, wherever it
 * waits: in a collective, or on examples the data service will not send (the server found
 * that the class made no progress: signaling-server/rooms/stall-watch.ts). A joiner admitted
 * as the run finished stops waiting for a hand-over that will not come.
 */
import { WebringError } from '../protocol/errors';
import type { TrainStop } from '../protocol';
import type { CollectiveEngine } from '../collectives/collective';
import type { RunControl } from './run-ports';
import type { Clock } from '../util/clock';

/**
 * How long a stalled run has to unwind once told. A device whose maths never answers (a GPU
 * read-back that never resolves) cannot: it leaves the room instead, so that the class's
 * next Start does not wait for it.
 */
export const STALLED_UNWIND_MS = 15_000;

export interface StoppedRun {
  control: RunControl;
  /** Wakes whatever waits for the next generation (a paused run). */
  wake(): void;
  /** The ring the run trains on, if any. */
  ring: CollectiveEngine | null;
  /** Ends the run's fetches of examples with `error`; null when no run fetches. */
  data: AbortController | null;
  clock: Clock;
  /** Whether the run that was stopped is still unwinding (not a run started since). */
  running(): boolean;
  /** The device could not stop its run: it leaves the room, saying why. */
  giveUp(error: WebringError): void;
}

export function stopRun(reason: TrainStop['reason'], run: StoppedRun): void {
  const { control, ring } = run;
  control.stopReason = reason;
  control.pauseRequested = false;
  run.wake();
  control.stopRequested = true;
  if (reason === 'failure') ring?.abort(new WebringError('ERR_RUN_ENDED', 'the run ended after a failure'));
  if (reason === 'ended') ring?.cancel(new WebringError('ERR_RUN_ENDED', 'the run ended before this worker took part'));
  if (reason === 'stalled') {
    const stalled = new WebringError('ERR_RUN_STALLED', 'the server ended the run: the class made no progress for longer than its pace allows (the teacher page says where); Start resumes from the latest checkpoint');
    ring?.abort(stalled);
    run.data?.abort(stalled);
    run.clock.setTimeout(() => {
      if (run.running()) run.giveUp(new WebringError('ERR_RUN_STALLED', `this device did not stop within ${STALLED_UNWIND_MS / 1000} s of the server's stop: its maths does not answer. Reload the page to take part again`));
    }, STALLED_UNWIND_MS);
  }
}
