/**
 * The class's own account of each epoch: how many examples it trained and the mean of its
 * steps' losses (the all-reduced loss every replica holds alike). On the task's dataset the
 * count equals the training split's size exactly when every example was trained once,
 * whatever joined, left or crashed meanwhile (a step that failed is not counted, and is
 * trained again).
 *
 * It is part of the replicated state (run-position.ts), not each replica's view: a replica
 * the hand-over moves past a step it never finished (the chief finished it, the survivor's
 * all-reduce broke) takes the chief's account with the chief's weights, and one moved back
 * to redo a step drops what it counted of it. So every replica, a joiner too, reports the
 * same epochs. Checkpoints keep it too, so a run resumed from one counts on exactly; one
 * resumed from a checkpoint written before (which holds none) counts from there, and says so.
 */
export interface EpochCount {
  epoch: number;
  examples: number;
  /** The mean of the epoch's step losses (float32: the hand-over carries it bit-exact). */
  meanLoss: number;
  /** Steps (rounds, in local-steps mode) the mean is over. */
  steps: number;
  /** Whether the account began at the epoch's first example. */
  whole: boolean;
}

/** One epoch's running account, as the hand-over and a checkpoint carry it. */
export interface EpochAccount {
  epoch: number;
  examples: number;
  /** Summed in float32, so that a replica that took it in the hand-over sums on exactly as the chief. */
  lossSum: number;
  steps: number;
  whole: boolean;
}

/** Floats one account takes in the hand-over. */
const ACCOUNT_FLOATS = 5;
/** The open epoch's and the one closed before it. */
export const EPOCH_TALLY_FLOATS = 2 * ACCOUNT_FLOATS;

const none = (): EpochAccount => ({ epoch: -1, examples: 0, lossSum: 0, steps: 0, whole: false });

export class EpochTally {
  private current: EpochAccount = none();
  private closed: EpochAccount = none();

  /**
   * A step trained `examples` in `epoch` with mean loss `loss`, starting `offset` examples
   * into the epoch. A step that trained nothing (every example of it deleted) has no loss.
   */
  add(epoch: number, offset: number, examples: number, loss: number): void {
    if (epoch !== this.current.epoch) {
      // Whole: it starts the epoch, or the account of the epoch before was open when this one began.
      const whole = offset === 0 || (this.current.epoch >= 0 && this.current.epoch === epoch - 1);
      if (this.current.epoch >= 0) this.closed = this.current;
      this.current = { epoch, examples: 0, lossSum: 0, steps: 0, whole };
    }
    this.current.examples += examples;
    if (examples > 0 && Number.isFinite(loss)) {
      this.current.lossSum = Math.fround(this.current.lossSum + Math.fround(loss));
      this.current.steps++;
    }
  }

  /** The account of `epoch`, if the run's replicated state holds one. */
  of(epoch: number): EpochCount | null {
    const a = this.current.epoch === epoch ? this.current : this.closed.epoch === epoch && epoch >= 0 ? this.closed : null;
    if (!a) return null;
    return { epoch, examples: a.examples, meanLoss: a.steps > 0 ? Math.fround(a.lossSum / a.steps) : 0, steps: a.steps, whole: a.whole };
  }

  /** The open epoch's account and the one before it (most recent first), for a status. */
  recent(): EpochCount[] {
    return [this.current.epoch, this.closed.epoch].filter((e) => e >= 0).map((e) => this.of(e)!);
  }

  /** The open epoch's account and the one before it (most recent first): what a checkpoint keeps. */
  accounts(): EpochAccount[] {
    return [this.current, this.closed].filter((a) => a.epoch >= 0).map((a) => ({ ...a }));
  }

  /** Takes a checkpoint's accounts (none: a run positioned anew counts from there). */
  restore(accounts: readonly EpochAccount[]): void {
    this.current = accounts[0] ? { ...accounts[0] } : none();
    this.closed = accounts[1] ? { ...accounts[1] } : none();
  }

  write(s: Float32Array, at: number): void {
    for (const [i, a] of [this.current, this.closed].entries()) {
      const o = at + i * ACCOUNT_FLOATS;
      s[o] = a.epoch;
      s[o + 1] = a.examples;
      s[o + 2] = a.lossSum;
      s[o + 3] = a.steps;
      s[o + 4] = a.whole ? 1 : 0;
    }
  }

  read(s: Float32Array, at: number): void {
    const account = (o: number): EpochAccount => ({ epoch: s[o]!, examples: s[o + 1]!, lossSum: s[o + 2]!, steps: s[o + 3]!, whole: s[o + 4]! > 0 });
    this.current = account(at);
    this.closed = account(at + ACCOUNT_FLOATS);
  }
}
