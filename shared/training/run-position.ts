/**
 * Where a replica is in its run: the step, the data cursor, the evaluation still owed and
 * whether the ring agreed to stop. Every replica holds the same position after every step;
 * the hand-over carries it to a joiner as the first section of the state (state-sync.ts).
 */
import type { DataCursor } from '../data/batch-plan';
import type { LedgerSection } from './ledger';

export class RunPosition {
  step = 0;
  cursor: DataCursor = { epoch: 0, offset: 0 };
  /** The epoch whose closing evaluation is still owed (after an epoch's last step), or null. */
  pendingEvaluation: number | null = null;
  /** Set once the ring agreed to stop. */
  stopped = false;

  /** Its section of the hand-over: step, data cursor, owed evaluation, stop. */
  readonly section: LedgerSection<unknown> = {
    floats: () => 5,
    write: (s) => {
      s[0] = this.step;
      s[1] = this.cursor.epoch;
      s[2] = this.cursor.offset;
      s[3] = this.pendingEvaluation === null ? 0 : this.pendingEvaluation + 1;
      s[4] = this.stopped ? 1 : 0;
    },
    read: (s) => {
      this.step = s[0]!;
      this.cursor = { epoch: s[1]!, offset: s[2]! };
      this.pendingEvaluation = s[3] === 0 ? null : s[3]! - 1;
      this.stopped = s[4]! > 0;
    },
  };
}
