/**
 * What keeps a chief from forging checkpoints past the run (issue 25): an upload is stored
 * only for a step between the run's start and the class's reported step plus a small
 * margin, and a checkpoint counts as vouched only once a rank other than its writer
 * reported the same weights hash at its step (the replicas agree bit for bit, and every
 * progress report carries the reporter's hash). Pure state kept in the run's record, so
 * every signaling node judges alike; the store (checkpoint-store.ts) keeps the verdict.
 */
import { WebringError } from '../../shared/protocol/errors';
import type { CheckpointTrust } from '../../shared/checkpoints/checkpoint';
import { MAX_ROOM_MEMBERS } from '../../shared/protocol';

/**
 * How far past the room's step an upload may be. The chief reports every step and captures
 * a checkpoint only after that step's report has gone out (training-run.ts: reportStep,
 * then checkpointIfDue), and the upload follows a local save, so an honest upload is
 * never ahead of the reports the server has; after a reconnect the worker resends its
 * progress before it retries an upload (worker.ts). The margin only absorbs a report still
 * in flight between nodes; past it a forged step is refused.
 */
export const CHECKPOINT_STEPS_AHEAD = 20;
/** Hashes reported for this many recent steps are kept: an upload lands a few steps after its own. */
export const VOUCH_RECENT_STEPS = 64;
// Both windows count turns: in a local-steps run a report comes once per round of
// `localSteps` steps, so they stretch by that many steps per turn (stepsPerTurn below).
/** And for this many recent save steps (multiples of saveEverySteps), for an upload slower than that. */
export const VOUCH_SAVE_STEPS = 8;
/**
 * Each reporter's newest this many (step, hash) pairs are kept: what an honest member
 * reports inside the windows above. A member that floods distinct steps pushes out only its
 * own (issue 38: 400 future-step reports used to push every honest hash out of one shared
 * table of 256, and every checkpoint after that stayed unvouched).
 */
export const REPORTS_PER_REPORTER = VOUCH_RECENT_STEPS + VOUCH_SAVE_STEPS;
/** At most this many pairs in all: every seat of a full room at its own limit. */
export const MAX_REPORTED_HASHES = MAX_ROOM_MEMBERS * REPORTS_PER_REPORTER;
/** A hash is remembered with this many of its reporters: enough to find one that is not the writer. */
const REPORTERS_PER_HASH = 2;
/** Checkpoints stored before any other rank's report of their step: the newest this many wait for it. */
export const MAX_PENDING_CHECKPOINTS = 8;

/** A weights hash ring members other than the chief reported after `step`. */
export interface ReportedHash {
  step: number;
  hash: string;
  by: string[];
}

/** A stored checkpoint of this run that no other rank has vouched for yet. */
export interface PendingCheckpoint {
  id: string;
  step: number;
  hash: string;
  writer: string;
  /** Another rank reported a different hash at its step (it may still be vouched by one that agrees). */
  contradicted: boolean;
}

/** The run record's part (RunRecord.guard). */
export interface CheckpointGuardRecord {
  /** The run's first step: 0, or the step of the checkpoint it resumed. */
  startStep: number;
  reported: ReportedHash[];
  pending: PendingCheckpoint[];
}

/** A checkpoint whose trust a report changed, for the store to write down. */
export interface TrustChange {
  id: string;
  trust: CheckpointTrust;
}

/** A run's guard at its start: `startStep` is 0, or the step of the checkpoint it resumed. */
export const newCheckpointGuard = (startStep: number): CheckpointGuardRecord => ({ startStep, reported: [], pending: [] });

export class CheckpointGuard {
  constructor(private readonly g: CheckpointGuardRecord) {}

  /** Throws ERR_STEP_OUT_OF_RANGE unless a checkpoint of `step` may be stored while the room is at `roomStep`. */
  admitStep(step: number, roomStep: number, stepsPerTurn = 1): void {
    if (step < this.g.startStep) {
      throw new WebringError('ERR_STEP_OUT_OF_RANGE', `checkpoint of step ${step}; this run started at step ${this.g.startStep}`, 'step');
    }
    const highest = roomStep + CHECKPOINT_STEPS_AHEAD * stepsPerTurn;
    if (step > highest) {
      throw new WebringError('ERR_STEP_OUT_OF_RANGE', `checkpoint of step ${step}; the class has reported step ${roomStep}, so at most ${highest} is accepted`, 'step');
    }
  }

  /**
   * A ring member other than the chief reported `hash` after `step`: remembered for a
   * while, and it vouches for (or contradicts) a waiting checkpoint of that step written by
   * someone else. Reports far past the room's step are not kept: no checkpoint can be there.
   */
  noteReport(by: string, step: number, hash: string, roomStep: number, saveEverySteps: number, stepsPerTurn = 1): TrustChange[] {
    if (step > roomStep + CHECKPOINT_STEPS_AHEAD * stepsPerTurn || step < this.g.startStep) return [];
    const reported = this.g.reported;
    const same = reported.find((r) => r.step === step && r.hash === hash);
    if (same) {
      if (same.by.length < REPORTERS_PER_HASH && !same.by.includes(by)) same.by.push(by);
    } else if (!reported.some((r) => r.step === step && r.by.includes(by))) {
      // One new hash per reporter and step: a lying member cannot crowd out the honest hash.
      reported.push({ step, hash, by: [by] });
    }
    // The window follows what the other ranks reported, not the chief's own (forgeable) step.
    this.trim(reported.reduce((top, r) => Math.max(top, r.step), step), saveEverySteps, stepsPerTurn);

    const changes: TrustChange[] = [];
    for (const p of [...this.g.pending]) {
      if (p.step !== step || p.writer === by) continue;
      if (p.hash === hash) {
        this.g.pending.splice(this.g.pending.indexOf(p), 1);
        changes.push({ id: p.id, trust: { state: 'vouched', by } });
      } else if (!p.contradicted) {
        p.contradicted = true;
        changes.push({ id: p.id, trust: { state: 'contradicted', by: null } });
      }
    }
    return changes;
  }

  /**
   * The trust of checkpoint `id` as it is stored: vouched when another rank already
   * reported its hash at its step, or when its writer trains alone (then the chief is the
   * class); otherwise it waits here for a report of its step.
   */
  noteCheckpoint(id: string, step: number, hash: string, writer: string, writerAlone: boolean): CheckpointTrust {
    if (writerAlone) return { state: 'vouched', by: writer };
    const others = this.g.reported.filter((r) => r.step === step && r.by.some((b) => b !== writer));
    const match = others.find((r) => r.hash === hash);
    if (match) return { state: 'vouched', by: match.by.find((b) => b !== writer)! };
    const contradicted = others.length > 0;
    this.g.pending.push({ id, step, hash, writer, contradicted });
    if (this.g.pending.length > MAX_PENDING_CHECKPOINTS) this.g.pending.splice(0, this.g.pending.length - MAX_PENDING_CHECKPOINTS);
    return { state: contradicted ? 'contradicted' : 'unvouched', by: null };
  }

  /** Keeps recent steps and recent save steps: each reporter's newest REPORTS_PER_REPORTER pairs, at most MAX_REPORTED_HASHES in all. */
  private trim(top: number, saveEverySteps: number, stepsPerTurn: number): void {
    const recent = (s: number) => s > top - VOUCH_RECENT_STEPS * stepsPerTurn || (s % saveEverySteps === 0 && s > top - VOUCH_SAVE_STEPS * saveEverySteps);
    const held = new Map<string, number>();
    const newestFirst = this.g.reported.filter((r) => recent(r.step)).sort((a, b) => b.step - a.step);
    const kept = newestFirst.filter((r) => {
      // A pair stays while any of its reporters is under its own limit; it counts against all of them.
      if (!r.by.some((b) => (held.get(b) ?? 0) < REPORTS_PER_REPORTER)) return false;
      for (const b of r.by) held.set(b, (held.get(b) ?? 0) + 1);
      return true;
    });
    kept.splice(MAX_REPORTED_HASHES);
    this.g.reported.splice(0, this.g.reported.length, ...kept);
  }
}
