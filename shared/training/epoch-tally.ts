/**
 * How many examples the class trained in each epoch, as this replica saw its steps: the sum
 * of every step's all-reduced count, the same on every replica. On the task's dataset it
 * equals the training split's size exactly when every example was trained once, whatever
 * joined, left or crashed meanwhile (a step that failed is not counted, and is trained
 * again). A replica that came in mid-epoch saw only part of it, and says so.
 */
export interface EpochCount {
  epoch: number;
  examples: number;
  /** Whether this replica took part from the epoch's first step. */
  whole: boolean;
}

export class EpochTally {
  private current: EpochCount = { epoch: -1, examples: 0, whole: false };
  private closed: EpochCount | null = null;

  /** Whether steps of `epoch` are being counted (a step in it adds to the count, whatever its offset). */
  counting(epoch: number): boolean {
    return this.current.epoch === epoch;
  }

  /** A step trained `examples` in `epoch`, starting at `offset` places into it (read when the epoch is new to the tally). */
  add(epoch: number, offset: number, examples: number): void {
    if (epoch !== this.current.epoch) {
      if (this.current.epoch >= 0) this.closed = this.current;
      // Whole: it starts the epoch, or it counted the epoch before and so was there when this one began.
      this.current = { epoch, examples: 0, whole: offset === 0 || (this.current.epoch >= 0 && this.current.epoch === epoch - 1) };
    }
    this.current.examples += examples;
  }

  /** The count of `epoch`, if this replica took steps in it. */
  of(epoch: number): EpochCount | null {
    if (this.current.epoch === epoch) return { ...this.current };
    return this.closed?.epoch === epoch ? { ...this.closed } : null;
  }
}
