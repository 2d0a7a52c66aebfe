import { startConfigSchema } from '../../shared/tasks/start-config';
import { mnist, mnistShards } from './mnist';
import { type StartConfig } from '../../shared/protocol';
import { Trainer } from '../../shared/training/trainer';
import { captureCheckpoint, type CapturedCheckpoint } from '../../shared/checkpoints/checkpoint-io';
import type { CheckpointUpload } from '../../signaling-server/rooms/checkpoint-store';
import { createMemoryRing } from './memory-ring';

export { mnist } from './mnist';

/** A lone replica trained for `steps` real steps (so Adam has moments worth saving). */
export async function trainedReplica(steps: number, overrides: Partial<StartConfig> = {}): Promise<Trainer> {
  const config = startConfigSchema.parse({ model: 'mlp', batchSizePerWorker: 8, ...overrides });
  const trainer = new Trainer(config, mnistShards(config, await mnist()), createMemoryRing(1).rings[0]!);
  for (let i = 0; i < steps; i++) await trainer.trainStep();
  return trainer;
}

export async function capture(trainer: Trainer, room: string): Promise<CapturedCheckpoint> {
  return captureCheckpoint(trainer, { room, run: 1, backend: 'cpu', members: [] });
}

/** The five files as the server's multipart parser hands them to the store. */
export function asUpload(c: CapturedCheckpoint): CheckpointUpload {
  const modelJson = {
    modelTopology: c.artifacts.modelTopology,
    format: c.artifacts.format,
    generatedBy: c.artifacts.generatedBy,
    convertedBy: c.artifacts.convertedBy,
    weightsManifest: [{ paths: ['./model.weights.bin'], weights: c.artifacts.weightSpecs }],
  };
  return {
    modelJson: Buffer.from(JSON.stringify(modelJson)),
    weights: Buffer.from(c.weights),
    optimizerSpecs: Buffer.from(JSON.stringify(c.optimizerSpecs)),
    optimizerData: Buffer.from(c.optimizerData),
    metadata: Buffer.from(JSON.stringify(c.metadata)),
  };
}
