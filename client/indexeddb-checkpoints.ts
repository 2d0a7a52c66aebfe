/**
 * The chief's own checkpoint copies in IndexedDB, through tfjs's `indexeddb://` handler.
 * One entry per checkpoint: `indexeddb://webring/<room>/<step>`. The model's weights come
 * first in the weight data, so `tf.loadLayersModel(key)` loads the entry as a model; the
 * optimizer state follows them, described together with the metadata in the entry's
 * userDefinedMetadata.
 */
import * as tf from '@tensorflow/tfjs';
import type { LocalCheckpointStore } from '../shared/checkpoints/checkpoint-writer';
import { WebringError } from '../shared/protocol/errors';

const SCHEME = 'indexeddb://';
const PREFIX = 'webring/';

const keyPrefix = (room: string) => `${SCHEME}${PREFIX}${room}/`;
const keyOf = (room: string, step: number) => `${keyPrefix(room)}${String(step).padStart(10, '0')}`;

interface StoredExtras {
  metadata: unknown;
  optimizerSpecs: unknown;
  modelWeightBytes: number;
}

async function keysOf(room: string): Promise<string[]> {
  const all = await tf.io.listModels();
  // Zero-padded steps: lexical order is step order. Newest first.
  return Object.keys(all)
    .filter((k) => k.startsWith(keyPrefix(room)))
    .sort()
    .reverse();
}

export const indexedDbCheckpoints: LocalCheckpointStore = {
  async save(checkpoint, maxToKeep) {
    const { metadata } = checkpoint;
    const weightData = new Uint8Array(checkpoint.weights.byteLength + checkpoint.optimizerData.byteLength);
    weightData.set(checkpoint.weights, 0);
    weightData.set(checkpoint.optimizerData, checkpoint.weights.byteLength);
    const extras: StoredExtras = {
      metadata,
      optimizerSpecs: checkpoint.optimizerSpecs,
      modelWeightBytes: checkpoint.weights.byteLength,
    };
    const [handler] = tf.io.getSaveHandlers(keyOf(metadata.room, metadata.step));
    if (!handler) throw new WebringError('ERR_INTERNAL', 'no IndexedDB handler in this browser');
    await handler.save!({ ...checkpoint.artifacts, weightData: weightData.buffer, userDefinedMetadata: { webring: extras as unknown as object } });
    for (const old of (await keysOf(metadata.room)).slice(maxToKeep)) await tf.io.removeModel(old);
  },

};
