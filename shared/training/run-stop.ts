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

export interface StoppedRun {
  control: RunControl;
  /** Wakes whatever waits for the next generation (a paused run). */
  wake(): void;
  /** The ring the run trains on, if any. */
  ring: CollectiveEngine | null;
  /** Ends the run's fetches of examples with `error`; null when no run fetches. */
  data: AbortController | null;
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
  }
}
