/**
 * What a checkpoint reads from a replica and writes back into it: the model, the optimizer,
 * the position in the data and the learning-rate ramp. The trainer (shared/training/
 * trainer.ts) satisfies it as it is, so checkpoints never import training; a unit test may
 * pass anything with these members.
 */
import type * as tf from '@tensorflow/tfjs';
import type { StartConfig } from '../protocol';
import type { CheckpointMetadata } from './checkpoint';

type DataPosition = CheckpointMetadata['dataCursor'];
type RateRamp = NonNullable<CheckpointMetadata['learningRateRamp']>;
type Roster = NonNullable<CheckpointMetadata['ownRoster']>;

export interface ReplicaState {
  readonly model: Pick<tf.LayersModel, 'save'>;
  readonly optimizer: Pick<tf.Optimizer, 'getWeights'>;
  readonly config: StartConfig;
  readonly step: number;
  readonly worldSize: number;
  readonly dataCursor: DataPosition;
  readonly dataRoster: Roster | null;
  readonly schedule: { readonly state: RateRamp | null; restore(ramp: RateRamp | null): void };
  /** The weights in variable order. */
  setWeights(values: tf.Tensor[]): void;
  loadOptimizerWeights(weights: Parameters<tf.Optimizer['setWeights']>[0]): Promise<void>;
  setPosition(step: number, cursor: DataPosition, roster: Roster | null): void;
  /** The weights' fingerprint (shared/util/weights-hash.ts), read from the replica itself. */
  weightsHash(): Promise<string>;
}
