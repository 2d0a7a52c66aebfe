/**
 * What an admission costs, measured on every replica: a joiner's time to the live state and
 * into lock-step, and a survivor's pause at the switch to the generation that admitted the
 * joiners. Each figure goes into the worker's status and out once with a progress report.
 */
import type { WorkerStatusView } from './worker-status';

/** Steps after a switch whose median is the new ring's normal step time, against which its pause is measured. */
const PAUSE_BASELINE_STEPS = 3;

/** A switch to a generation that admitted joiners, while its cost is being measured. */
interface SwitchClock {
  switchedAt: number;
  /** The end of the first step on the new ring, then of each later one until the baseline is complete. */
  firstStepEnd: number | null;
  lastStepEnd: number;
  stepMs: number[];
}

/** The join costs one step measured, for its progress report. */
export interface JoinCost {
  switchPauseMs?: number;
  lockStepMs?: number;
}

export class JoinCostMeter {
  /** For a late joiner: when it was admitted, until it holds the live state. */
  private joinedAt: number | null;
  /** For a late joiner: when it was admitted, until its first step in lock-step. */
  private admittedAt: number | null;
  /** The last switch to a generation with joiners, until its pause is measured. */
  private switchClock: SwitchClock | null = null;

  /** `admittedAt`: when this worker was admitted into a running ring, or null for a member from the start. */
  constructor(
    admittedAt: number | null,
    private readonly status: WorkerStatusView,
    private readonly log: (message: string) => void,
  ) {
    this.joinedAt = admittedAt;
    this.admittedAt = admittedAt;
  }

  /** The chief's state arrived at `now`: for a late joiner, its join time. */
  stateArrived(now: number): void {
    if (this.joinedAt === null) return;
    this.status.update({ joinMs: now - this.joinedAt });
    this.joinedAt = null;
  }

  /** This worker switched to a generation that admitted joiners at `now`. */
  switched(now: number): void {
    this.switchClock = { switchedAt: now, firstStepEnd: null, lastStepEnd: now, stepMs: [] };
  }

  /** Another ring change after the admission's first step: its cost is not the admission's. */
  ringChanged(): void {
    if (this.switchClock?.firstStepEnd != null) this.switchClock = null;
  }

  /**
   * What the last admission cost, once known: for a survivor, the class's pause (from the
   * switch to the end of the first step on the new ring, less the median of the next
   * PAUSE_BASELINE_STEPS steps); for the joiner, its time from admission to the end of its
   * first step with examples of its own (its first step on the new ring trains none while
   * the hand-over reaches it: Trainer.sitOutFrom). Each goes out once, with the step's
   * progress report.
   */
  stepEnded(stepEnd: number, trained: boolean): JoinCost {
    const cost: JoinCost = {};
    if (this.admittedAt !== null && trained) {
      cost.lockStepMs = stepEnd - this.admittedAt;
      this.status.update({ lockStepMs: cost.lockStepMs });
      this.log(`in lock-step ${cost.lockStepMs.toFixed(0)} ms after admission`);
      this.admittedAt = null;
    }
    const sc = this.switchClock;
    if (!sc) return cost;
    if (sc.firstStepEnd === null) {
      sc.firstStepEnd = stepEnd;
    } else {
      sc.stepMs.push(stepEnd - sc.lastStepEnd);
    }
    sc.lastStepEnd = stepEnd;
    if (sc.stepMs.length < PAUSE_BASELINE_STEPS) return cost;
    const baseline = [...sc.stepMs].sort((a, b) => a - b)[sc.stepMs.length >> 1]!;
    const pause = Math.max(0, sc.firstStepEnd! - sc.switchedAt - baseline);
    cost.switchPauseMs = pause;
    this.status.update({ switchPauseMs: pause });
    this.log(`the admission cost the class ${pause.toFixed(0)} ms (a step takes ${baseline.toFixed(0)} ms)`);
    this.switchClock = null;
    return cost;
  }
}
