/**
 * Shares of the global batch sized to each device's speed (`balanceShares`): a ring in
 * lock-step runs at the pace of its slowest member, so a phone that takes a quarter of a
 * laptop's share keeps up with the laptops instead of holding them back.
 *
 * Every step's tail already carries each rank's compute time, and its overhead: the time
 * from the end of its previous all-reduce to the start of this step (applying the update,
 * reporting, the event loop), which it pays whatever its share. All-reduced, every replica
 * sees the same times and the same example counts; from them each keeps the same moving
 * average of milliseconds per example for every rank, and the median of its recent
 * overheads, and every REBALANCE_EVERY_STEPS steps proposes the shares with which every
 * rank would be ready for the all-reduce at the same moment: overhead + ms per example ×
 * examples equal for all. Without overheads that is shares proportional to speed; a phone
 * whose overhead alone is most of a laptop's step takes less than its speed suggests,
 * instead of holding the class up by its overhead. A proposal is taken only when some rank's
 * share would move by more than SHARE_HYSTERESIS of itself, so shares do not flap with
 * noise. The global batch stays perWorker × N and each step's update stays the sum of
 * gradients over it: only the split changes, and the cursor still trains every example of
 * an epoch exactly once.
 *
 * A new generation (a join or a leave) starts again, from shares sized by the members'
 * admission probes (device-probe.ts) when every member has one, else from equal shares; so
 * does a resumed run. The probes are in the generation every replica holds, so every
 * replica starts from the same shares.
 */
import type { StepFacts, TailSection } from './step-ledger';
import { MAX_SHARE_FACTOR, MIN_SHARE_FACTOR } from '../data/batch-plan';

/** Steps between two re-balancings: enough samples for a stable average. */
export const REBALANCE_EVERY_STEPS = 5;
/** A proposal moving no rank's share by more than this fraction of it is ignored. */
export const SHARE_HYSTERESIS = 0.15;
/** Weight of the newest step in the moving average of ms per example. */
const AVERAGE_WEIGHT = 0.3;
/**
 * A rank's overhead is the median of its last this-many samples: a checkpoint capture or an
 * evaluation between two steps is one long sample, not a slower device.
 */
const OVERHEAD_WINDOW = 5;

export class ShareBalancer {
  private worldSize = 1;
  /** Each rank's share of the global batch (sums to 1), the same on every replica. */
  private weights: Float64Array = new Float64Array([1]);
  private msPerExample: Float64Array = new Float64Array([0]);
  /** Each rank's last OVERHEAD_WINDOW overhead samples (ms), a ring per rank, and how many it has taken. */
  private overheadSamples: Float64Array = new Float64Array(OVERHEAD_WINDOW);
  private overheadSeen: Uint32Array = new Uint32Array(1);
  /** Each rank's median overhead, taken when shares are proposed, and the scratch the median is taken in. */
  private overheadMs: Float64Array = new Float64Array([0]);
  private readonly overheadScratch = new Float64Array(OVERHEAD_WINDOW);
  /** The global batch of the last step observed: the proposal splits this many examples. */
  private batchSize = 0;
  /** Each rank's speed against the median rank's, updated once a step; and the scratch for the median. */
  private vsMedian: Float64Array = new Float64Array([0]);
  private sorted: Float64Array = new Float64Array([0]);
  private stepsSinceRebalance = 0;

  constructor(private readonly enabled: boolean) {}

  /**
   * Shares for a new generation of `worldSize` ranks, and no measurements yet: sized by
   * `probeMsPerExample` (each rank's admission probe, by rank) when balancing is on and every
   * rank has one, else equal. The probe's times only set the first shares: they were taken
   * on the default model, alone, so the ring's own measurements replace them.
   */
  reset(worldSize: number, probeMsPerExample: ArrayLike<number> | null = null): void {
    this.worldSize = worldSize;
    this.msPerExample = new Float64Array(worldSize);
    this.overheadSamples = new Float64Array(worldSize * OVERHEAD_WINDOW);
    this.overheadSeen = new Uint32Array(worldSize);
    this.overheadMs = new Float64Array(worldSize);
    this.batchSize = 0;
    this.vsMedian = new Float64Array(worldSize);
    this.sorted = new Float64Array(worldSize);
    this.stepsSinceRebalance = 0;
    const probed = this.enabled && worldSize > 1 && probeMsPerExample !== null && probeMsPerExample.length === worldSize ? this.propose(probeMsPerExample) : null;
    this.weights = probed ?? new Float64Array(worldSize).fill(1 / worldSize);
  }

  /** The shares the next step splits its global batch by; null when they are equal by rule (balancing off). */
  get current(): Float64Array | null {
    return this.enabled ? this.weights : null;
  }

  /**
   * One step's all-reduced compute times, the examples each rank trained, and each rank's
   * overhead before the step (ms; 0 where it was not measured: the first step of a
   * generation, or after an evaluation). Returns true when the shares changed for the next
   * step.
   */
  observe(computeMs: ArrayLike<number>, examples: ArrayLike<number>, overheadMs: ArrayLike<number> | null = null): boolean {
    const n = this.worldSize;
    let batch = 0;
    for (let r = 0; r < n; r++) {
      const count = examples[r]!;
      batch += Math.max(0, count);
      if (overheadMs && overheadMs[r]! > 0) this.overheadSamples[r * OVERHEAD_WINDOW + (this.overheadSeen[r]!++ % OVERHEAD_WINDOW)] = overheadMs[r]!;
      if (count <= 0) continue;
      const sample = computeMs[r]! / count;
      const prev = this.msPerExample[r]!;
      this.msPerExample[r] = prev === 0 ? sample : AVERAGE_WEIGHT * sample + (1 - AVERAGE_WEIGHT) * prev;
    }
    this.batchSize = batch;
    this.updateVsMedian();
    if (!this.enabled || n < 2 || ++this.stepsSinceRebalance < REBALANCE_EVERY_STEPS) return false;
    this.stepsSinceRebalance = 0;
    this.takeOverheadMedians();
    const proposal = this.propose(this.msPerExample, this.overheadMs, this.batchSize);
    if (!proposal) return false;
    let moved = 0;
    for (let r = 0; r < n; r++) moved = Math.max(moved, Math.abs(proposal[r]! - this.weights[r]!) / this.weights[r]!);
    if (moved <= SHARE_HYSTERESIS) return false;
    this.weights = proposal;
    return true;
  }

  /** Each rank's overhead: the median of the samples its window holds (0 with none). */
  private takeOverheadMedians(): void {
    for (let r = 0; r < this.worldSize; r++) {
      const held = Math.min(this.overheadSeen[r]!, OVERHEAD_WINDOW);
      const window = this.overheadScratch.subarray(0, held);
      window.set(this.overheadSamples.subarray(r * OVERHEAD_WINDOW, r * OVERHEAD_WINDOW + held));
      this.overheadMs[r] = median(window);
    }
  }

  /**
   * The shares of a batch of `batchSize` with which every rank would be ready at the same
   * moment, overhead + ms per example × examples = T for all, within the bounds: with
   * a = ms per example and f = overhead, a rank's examples are (T − f) / a, and they add up
   * to the batch when T = (batch + Σ f/a) / Σ 1/a. Without overheads, shares proportional
   * to speed. Null until every rank is measured.
   */
  private propose(msPerExample: ArrayLike<number>, overheadMs: ArrayLike<number> | null = null, batchSize = 0): Float64Array | null {
    const n = this.worldSize;
    let perMs = 0;
    let fixed = 0;
    for (let r = 0; r < n; r++) {
      const ms = msPerExample[r]!;
      if (!(ms > 0)) return null;
      perMs += 1 / ms;
      fixed += (overheadMs?.[r] ?? 0) / ms;
    }
    // With no batch known yet the overheads cannot be weighed against it: speed alone.
    const withOverheads = batchSize > 0 && overheadMs !== null;
    const readyAt = withOverheads ? (batchSize + fixed) / perMs : 1 / perMs;
    const lo = MIN_SHARE_FACTOR / n;
    const hi = MAX_SHARE_FACTOR / n;
    const out = new Float64Array(n);
    for (let r = 0; r < n; r++) {
      const share = withOverheads ? (readyAt - overheadMs[r]!) / msPerExample[r]! / batchSize : readyAt / msPerExample[r]!;
      out[r] = Math.min(hi, Math.max(lo, share));
    }
    // Clamping moved the sum off 1: spread the difference over the ranks still inside the bounds.
    for (let pass = 0; pass < 4; pass++) {
      let sum = 0;
      let free = 0;
      for (let r = 0; r < n; r++) {
        sum += out[r]!;
        if (out[r]! > lo && out[r]! < hi) free += out[r]!;
      }
      if (Math.abs(sum - 1) < 1e-12 || free === 0) break;
      const scale = (free + 1 - sum) / free;
      for (let r = 0; r < n; r++) if (out[r]! > lo && out[r]! < hi) out[r] = Math.min(hi, Math.max(lo, out[r]! * scale));
    }
    let sum = 0;
    for (let r = 0; r < n; r++) sum += out[r]!;
    for (let r = 0; r < n; r++) out[r] = out[r]! / sum;
    return out;
  }

  /** Rank `rank`'s measured speed against the median rank's (1 = median); 0 before it is measured. */
  speedVsMedian(rank: number): number {
    return this.vsMedian[rank] ?? 0;
  }

  private updateVsMedian(): void {
    let k = 0;
    for (let r = 0; r < this.worldSize; r++) if (this.msPerExample[r]! > 0) this.sorted[k++] = this.msPerExample[r]!;
    const middle = median(this.sorted.subarray(0, k));
    for (let r = 0; r < this.worldSize; r++) {
      const own = this.msPerExample[r]!;
      this.vsMedian[r] = own > 0 ? middle / own : 0;
    }
  }
}

/**
 * The balancer's section of the tail: each rank's compute time and its overhead before the
 * step, in its own slot (capacity slots each). Every replica reads the same times and
 * cuts the same batch, so every replica re-balances alike.
 */
export class ShareTimes implements TailSection {
  private capacity = 0;
  /** Views of the first N slots, made when the ring changes. */
  private computeView: Float32Array = new Float32Array(0);
  private overheadView: Float32Array = new Float32Array(0);
  private slowest = 0;

  constructor(private readonly balancer: ShareBalancer) {}

  floats(capacity: number): number {
    this.capacity = capacity;
    return 2 * capacity;
  }

  bind(view: Float32Array, worldSize: number): void {
    this.computeView = view.subarray(0, worldSize);
    this.overheadView = view.subarray(this.capacity, this.capacity + worldSize);
  }

  write(view: Float32Array, facts: StepFacts): void {
    view[facts.rank] = facts.computeMs;
    view[this.capacity + facts.rank] = facts.overheadMs;
  }

  read(_view: Float32Array, facts: StepFacts): void {
    // The slices the step's batch planned: what each rank's time was spent on.
    this.balancer.observe(this.computeView, facts.batch.slices, this.overheadView);
    let slowest = 0;
    for (const ms of this.computeView) slowest = Math.max(slowest, ms);
    this.slowest = slowest;
  }

  /** Each rank's compute time in the step just read, by rank. */
  computeMs(): number[] {
    return Array.from(this.computeView);
  }

  /**
   * The slowest rank's compute time of the last turn read, ms (0 before any). Kept at read:
   * the view is this rank's own next figure from the moment it writes it, before the sum.
   */
  slowestMs(): number {
    return this.slowest;
  }
}

/** The median of `values`, sorted in place (0 for none). */
function median(values: Float64Array): number {
  const k = values.length;
  if (k === 0) return 0;
  values.sort();
  const mid = k >> 1;
  return k % 2 === 1 ? values[mid]! : (values[mid - 1]! + values[mid]!) / 2;
}

/**
 * Why a device takes the share it takes, for people: "2.0× the class median: 2.0 shares".
 * `shares` counts equal shares (its part of the global batch × the ring's size).
 */
export function explainShare(speedVsMedian: number, shares: number): string {
  if (!(speedVsMedian > 0)) return '';
  return `${speedVsMedian.toFixed(1)}× the class median: ${shares.toFixed(1)} share${Math.abs(shares - 1) < 0.05 ? '' : 's'}`;
}
