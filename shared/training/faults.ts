/**
 * Faults a test or the benchmark plays on purpose: a slow laptop, a replica whose weights
 * drift, a hostile tab writing NaN into the ring. Production code never builds one; the
 * trainer and the worker only consult one they were handed.
 */
import type { PoisonKind } from '../collectives/collective';

export interface FaultInjector {
  /** Extra milliseconds of "compute" in `step`: plays a slow laptop (straggler detection). */
  slowComputeMs?(step: number): number;
  /** Extra milliseconds per example trained in `step`: a device whose slowness grows with its share (balanceShares). */
  slowMsPerExample?(step: number): number;
  /**
   * Milliseconds each gradient computation holds the compute thread, busy: a device whose
   * maths is slow and blocks the thread it runs on (in its own thread, the network still answers).
   */
  busyComputeMs?: number;
  /**
   * Sends no signal to its peers, so that no link of it ever opens, not even through the
   * server's relay: a device that answers nobody (the class sheds it as unreachable).
   */
  noPeerLinks?: boolean;
  /** Whether to nudge this replica's weights just before `step`: plays backend drift (resync). */
  driftBefore?(step: number): boolean;
  /** What to write into this replica's ring messages of `step`, past its own check; null for nothing. */
  poison?(step: number): PoisonKind | null;
}

/** The page's fault flags: each one is a step number or a duration, absent when not set. */
export interface FaultFlags {
  slowMs?: number;
  slowPerExampleMs?: number;
  driftAtStep?: number;
  poisonAtStep?: number;
}

/**
 * A FaultInjector from fixed settings: `slowMs` in every step (and `slowPerExampleMs` for
 * each example of it), one drift before
 * `driftAtStep`, NaN from `poisonAtStep` on. Returns undefined when nothing is set, so
 * callers pass no injector at all.
 */
export function faultsFromFlags(flags: FaultFlags): FaultInjector | undefined {
  const { slowMs, slowPerExampleMs, driftAtStep, poisonAtStep } = flags;
  if (slowMs === undefined && slowPerExampleMs === undefined && driftAtStep === undefined && poisonAtStep === undefined) return undefined;
  return {
    slowComputeMs: () => slowMs ?? 0,
    slowMsPerExample: () => slowPerExampleMs ?? 0,
    driftBefore: (step) => step === driftAtStep,
    poison: (step) => (poisonAtStep !== undefined && step >= poisonAtStep ? 'nan' : null),
  };
}
