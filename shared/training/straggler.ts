/**
 * Straggler detection for a synchronous ring. Every step, every replica learns each rank's
 * compute time (it rides in the gradient all-reduce). A step's deadline is derived from the
 * recent compute times of the whole ring: the median plus k median absolute deviations,
 * never below a floor, so one slow laptop cannot drag the deadline up with it and ordinary
 * jitter never trips it. A member that misses the deadline `strikes` steps in a row is a
 * straggler: the chief asks the server to drop it, and it may come back as a joiner. The
 * policy is the protocol's (shared/protocol/liveness.ts): the server checks a drop by it.
 */
import { DEFAULT_STRAGGLER_POLICY, type StragglerPolicy } from '../protocol';

export interface Straggler {
  id: string;
  computeMs: number;
  deadlineMs: number;
  strikes: number;
}

export function median(sorted: ArrayLike<number>): number {
  const n = sorted.length;
  if (n === 0) return 0;
  const mid = n >> 1;
  return n % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

export class StragglerDetector {
  private readonly policy: StragglerPolicy;
  /** Per step, the compute times of the ranks of that step. */
  private readonly history: number[][] = [];
  private readonly misses = new Map<string, number>();
  private deadline: number | null = null;

  constructor(policy: Partial<StragglerPolicy> = {}) {
    this.policy = { ...DEFAULT_STRAGGLER_POLICY, ...policy };
  }

  /** The deadline the last observed step was held to, or null during warm-up. */
  get deadlineMs(): number | null {
    return this.deadline;
  }

  /**
   * Records one step: `computeMs[r]` is the compute time of rank r, whose member id is
   * `memberIds[r]`. Returns the members that have now missed `strikes` deadlines in a row.
   */
  observe(memberIds: readonly string[], computeMs: readonly number[]): Straggler[] {
    const deadline = this.currentDeadline();
    this.deadline = deadline;
    const out: Straggler[] = [];
    const present = new Set(memberIds);
    for (const id of [...this.misses.keys()]) if (!present.has(id)) this.misses.delete(id);
    memberIds.forEach((id, r) => {
      const ms = computeMs[r] ?? 0;
      const missed = deadline !== null && ms > deadline ? (this.misses.get(id) ?? 0) + 1 : 0;
      this.misses.set(id, missed);
      if (missed >= this.policy.strikes) out.push({ id, computeMs: ms, deadlineMs: deadline!, strikes: missed });
    });
    this.history.push(computeMs.slice(0, memberIds.length));
    if (this.history.length > this.policy.windowSteps) this.history.shift();
    return out;
  }

  /** Forget a member's misses (it was dropped, or the ring changed around it). */
  forget(id: string): void {
    this.misses.delete(id);
  }

  private currentDeadline(): number | null {
    const samples = this.history.flat().sort((a, b) => a - b);
    if (samples.length < this.policy.minSamples) return null;
    const m = median(samples);
    const deviations = samples.map((x) => Math.abs(x - m)).sort((a, b) => a - b);
    return Math.max(this.policy.floorMs, m + this.policy.k * median(deviations));
  }
}
