/**
 * Where a replica is in its run: the step, the data cursor, the evaluation still owed,
 * whether the ring agreed to stop, and the class's account of the epochs (epoch-tally.ts).
 * Every replica holds the same position after every step;
 * the hand-over carries it to a joiner as the first section of the state (state-sync.ts).
 */
import type { DataCursor } from '../data/batch-plan';
import type { LedgerSection } from './ledger';
import { EPOCH_TALLY_FLOATS, EpochTally, type EpochAccount } from './epoch-tally';

/** A round of local steps every survivor trained before its all-reduce failed (local-rounds.ts): where it ends. */
export interface FinishingRound {
  end: DataCursor;
  steps: number;
}

export class RunPosition {
  step = 0;
  cursor: DataCursor = { epoch: 0, offset: 0 };
  /** The epoch whose closing evaluation is still owed (after an epoch's last step), or null. */
  pendingEvaluation: number | null = null;
  /** Set once the ring agreed to stop. */
  stopped = false;
  /** Outer steps so far: all-reduces of the class's work (one per step, or one per round of local steps). */
  round = 0;
  /**
   * A round whose local steps are trained and whose sum is still owed, or null: the next
   * turn sums what the survivors kept instead of training it again (local-rounds.ts).
   */
  finishing: FinishingRound | null = null;
  /** Examples trained and mean loss of the open epoch and the one before. */
  readonly tally = new EpochTally();

  /** Positions the run anew (a resumed checkpoint) with the epochs' accounts it kept (none: counted from here). */
  moveTo(step: number, cursor: DataCursor, accounts: readonly EpochAccount[]): void {
    this.step = step;
    this.cursor = { ...cursor };
    this.tally.restore(accounts);
  }

  /** Its section of the hand-over: step, data cursor, owed evaluation, stop, round, the round being finished, the epochs' account. */
  readonly section: LedgerSection<unknown> = {
    floats: () => 10 + EPOCH_TALLY_FLOATS,
    write: (s) => {
      s[0] = this.step;
      s[1] = this.cursor.epoch;
      s[2] = this.cursor.offset;
      s[3] = this.pendingEvaluation === null ? 0 : this.pendingEvaluation + 1;
      s[4] = this.stopped ? 1 : 0;
      s[5] = this.round;
      const f = this.finishing;
      s[6] = f ? 1 : 0;
      s[7] = f?.end.epoch ?? 0;
      s[8] = f?.end.offset ?? 0;
      s[9] = f?.steps ?? 0;
      this.tally.write(s, 10);
    },
    read: (s) => {
      this.step = s[0]!;
      this.cursor = { epoch: s[1]!, offset: s[2]! };
      this.pendingEvaluation = s[3] === 0 ? null : s[3]! - 1;
      this.stopped = s[4]! > 0;
      this.round = s[5]!;
      this.finishing = s[6]! > 0 ? { end: { epoch: s[7]!, offset: s[8]! }, steps: s[9]! } : null;
      this.tally.read(s, 10);
    },
  };
}
