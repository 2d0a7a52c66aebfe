/** What a Trainer (trainer.ts) is built with beyond its run, data and collective, and how often replicas compare their weights. */
import type { Clock } from '../util/clock';
import type { FaultInjector } from './faults';
import type { Replica } from '../compute/replica';

/** Replicas compare weight hashes at least this often (every step whose number is a multiple). */
export const HASH_CHECK_EVERY_STEPS = 10;

export interface TrainerOptions {
  /** Measures compute and communication times, and paces injected slowness. */
  clock?: Clock;
  /** Faults a test plays on purpose (slowness, drift); production passes none. */
  faults?: FaultInjector;
  /** The model and its maths (compute/replica.ts), in a compute thread or not; default one in this thread. */
  replica?: Replica;
}
