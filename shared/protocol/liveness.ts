/**
 * When a member counts as too slow or a ring as stuck: the numbers a worker acts on and the
 * server checks its reports against, so both sides read them from one place. The worker's
 * straggler detector (shared/training/straggler.ts) holds each rank to a deadline by this
 * policy and the server believes a chief's drop only when it is a miss by the same policy
 * (signaling-server/rooms/drop-check.ts); a worker asks the server to re-form a stuck ring
 * only after REFORM_AFTER_MS (shared/training/generation-tracker.ts), and the server
 * refuses younger asks (signaling-server/rooms/room.ts).
 */

export interface StragglerPolicy {
  /** No deadline below this; browsers stall for GC and tab switches. */
  floorMs: number;
  /** Deadline = median + k × MAD. */
  k: number;
  /** Consecutive misses before a member is dropped. */
  strikes: number;
  /** Compute times (all ranks pooled) needed before deadlines apply. */
  minSamples: number;
  /** Steps of history the statistics look back over. */
  windowSteps: number;
}

export const DEFAULT_STRAGGLER_POLICY: StragglerPolicy = { floorMs: 1_000, k: 6, strikes: 3, minSamples: 12, windowSteps: 30 };

/** A broken link with nobody gone: ask the server to re-form the ring after this long. */
export const REFORM_AFTER_MS = 3_000;
