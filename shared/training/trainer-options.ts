/** What a Trainer (trainer.ts) is built with beyond its run, data and collective, and how often replicas compare their weights. */
import type { Clock } from '../util/clock';
import type { FaultInjector } from './faults';
import type { Replica } from '../compute/replica';

/** Replicas compare weight hashes at least this often (every step whose number is a multiple). */
export const HASH_CHECK_EVERY_STEPS = 10;
/**
 * Examples in a joiner's rehearsed step (Trainer.rehearse), at most: a few warm the same
 * kernels and optimizer slots as a whole share, and a share's worth of compute kept a slow
 * tab out a second longer (bench:join: 4.11 s to lock-step with a 32-example rehearsal,
 * 2.85 s with 8; its first step 1.06 s against 1.16 s, the class's pause 0 either way).
 */
export const REHEARSAL_EXAMPLES = 8;

export interface TrainerOptions {
  /** Measures compute and communication times, and paces injected slowness. */
  clock?: Clock;
  /** Faults a test plays on purpose (slowness, drift); production passes none. */
  faults?: FaultInjector;
  /** The model and its maths (compute/replica.ts), in a compute thread or not; default one in this thread. */
  replica?: Replica;
}
