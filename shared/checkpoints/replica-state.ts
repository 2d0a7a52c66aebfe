/**
 * What a checkpoint reads from a trainer and writes back into it: the model, the optimizer,
 * the position in the data and the learning-rate ramp. The trainer (shared/training/
 * trainer.ts) satisfies it as it is, so checkpoints never import training; a unit test may
 * pass anything with these members.
 */
import type { StartConfig } from '../protocol';
import type { Replica } from '../compute/replica';
import type { CheckpointMetadata } from './checkpoint';

type DataPosition = CheckpointMetadata['dataCursor'];
type RateRamp = NonNullable<CheckpointMetadata['learningRateRamp']>;
type Roster = NonNullable<CheckpointMetadata['ownRoster']>;
type EpochAccounts = NonNullable<CheckpointMetadata['epochTally']>;

export interface ReplicaState {
  /** The model and optimizer: a checkpoint takes their snapshot and loads one back. */
  readonly replica: Pick<Replica, 'snapshot' | 'load'>;
  readonly config: StartConfig;
  readonly step: number;
  readonly worldSize: number;
  readonly dataCursor: DataPosition;
  readonly dataRoster: Roster | null;
  readonly schedule: { readonly state: RateRamp | null; restore(ramp: RateRamp | null): void };
  /** The class's account of the open epoch and the one before (shared/training/epoch-tally.ts). */
  readonly tally: { accounts(): EpochAccounts };
  setPosition(step: number, cursor: DataPosition, roster: Roster | null, accounts: EpochAccounts): void;
  /** Outer steps so far (one per step, or per round of local steps). */
  readonly round: number;
  /** A local-steps run's outer optimizer: its momentum is part of the checkpoint; null every step. */
  readonly outer: { readonly momentum: Float32Array } | null;
  /** Restores the round and the outer momentum (null: none in the checkpoint, start it at zero). */
  restoreOuter(round: number, momentum: Float32Array | null): void;
  /** The weights' fingerprint (shared/util/weights-hash.ts), read from the replica itself. */
  weightsHash(): Promise<string>;
}
