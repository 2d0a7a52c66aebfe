/**
 * The chief's own checkpoint copies through any tf.io store that can list and remove what
 * it saved: IndexedDB and localStorage in a tab (tf.io's model management), `file://` in
 * Node (webring/node registers it). One entry per checkpoint, `<base>/<room>/<step>` with
 * the step zero-padded, the newest `maxToKeep` kept. The model's weights come first in the
 * weight data, so `tf.loadLayersModel(url)` loads an entry as a model; the optimizer state
 * follows them, described with the run's metadata in the entry's userDefinedMetadata. A
 * restarted run finds its newest entry again (fitDataset's `backup`: BackupAndRestore).
 */
import * as tf from '@tensorflow/tfjs';
import { z } from 'zod';
import { WebringError } from '../protocol/errors';
import { CHECKPOINT_FILES, checkpointMetadataSchema, optimizerSpecsSchema, type CheckpointFiles } from './checkpoint';
import type { CapturedCheckpoint } from './checkpoint-io';
import type { LocalCheckpointStore } from './checkpoint-writer';
import { concatBuffers } from '../compute/weight-bytes';

/** Lists and removes a scheme's entries: tf.io saves and loads every scheme, but lists only some. */
export interface CheckpointCatalog {
  /** The URLs of the entries whose URL starts with `prefix`, in any order. */
  list(prefix: string): Promise<string[]>;
  remove(url: string): Promise<void>;
}

/** The tf.io stores with model management: IndexedDB and localStorage. */
const modelManagement: CheckpointCatalog = {
  async list(prefix) {
    return Object.keys(await tf.io.listModels()).filter((url) => url.startsWith(prefix));
  },
  async remove(url) {
    await tf.io.removeModel(url);
  },
};

const catalogs = new Map<string, CheckpointCatalog>([
  ['indexeddb://', modelManagement],
  ['localstorage://', modelManagement],
]);

/** Lets checkpoint copies live under `scheme` ('file://'): how its entries are listed and removed. */
export function registerCheckpointCatalog(scheme: string, catalog: CheckpointCatalog): void {
  catalogs.set(scheme, catalog);
}

function schemeOf(url: string): string {
  const at = url.indexOf('://');
  return at < 0 ? '' : url.slice(0, at + 3);
}

/** The digits of a step in an entry's URL: lexical order is step order. */
const STEP_DIGITS = 10;

/** What an entry keeps beside tf.io's own artifacts: enough to resume the run. */
const extrasSchema = z.object({
  metadata: checkpointMetadataSchema,
  optimizerSpecs: optimizerSpecsSchema,
  modelWeightBytes: z.number().int().min(0),
});

export interface TfIoCheckpoints extends LocalCheckpointStore {
  /** Where the copies live, e.g. 'indexeddb://webring' or 'file:///var/backup'. */
  readonly base: string;
  /** The URLs of `room`'s entries, newest first. */
  list(room: string): Promise<string[]>;
  /** Entry `url` as the chief captured it; ERR_BAD_DATA names what is wrong with a damaged one. */
  load(url: string): Promise<CapturedCheckpoint>;
}

/** The copies under `base`; ERR_BAD_REQUEST when no catalog lists its scheme. */
export function tfIoCheckpoints(base: string): TfIoCheckpoints {
  const root = base.replace(/\/+$/, '');
  const catalog = catalogs.get(schemeOf(root));
  if (!catalog) {
    throw new WebringError('ERR_BAD_REQUEST', `checkpoint copies cannot live at ${base}: use ${[...catalogs.keys()].join(', ')} (file:// with webring/node)`, 'backup');
  }
  const prefixOf = (room: string) => `${root}/${room}/`;
  const list = async (room: string) => (await catalog.list(prefixOf(room))).sort().reverse();
  return {
    base: root,
    list,
    async save(checkpoint, maxToKeep) {
      const { metadata } = checkpoint;
      const [handler] = tf.io.getSaveHandlers(`${prefixOf(metadata.room)}${String(metadata.step).padStart(STEP_DIGITS, '0')}`);
      if (!handler?.save) throw new WebringError('ERR_INTERNAL', `no tf.io handler saves to ${root}`);
      // One fresh buffer, weights first: tf.loadLayersModel reads the model's and stops there.
      const weightData = concatBuffers([checkpoint.weights.slice().buffer, checkpoint.optimizerData.slice().buffer]);
      const extras: z.input<typeof extrasSchema> = { metadata, optimizerSpecs: checkpoint.optimizerSpecs, modelWeightBytes: checkpoint.weights.byteLength };
      await handler.save({ ...checkpoint.artifacts, weightData: weightData.buffer as ArrayBuffer, userDefinedMetadata: { webring: extras as unknown as object } });
      for (const old of (await list(metadata.room)).slice(maxToKeep)) await catalog.remove(old);
    },
    async load(url) {
      const [handler] = tf.io.getLoadHandlers(url);
      if (!handler?.load) throw new WebringError('ERR_INTERNAL', `no tf.io handler loads ${url}`);
      const { weightData, userDefinedMetadata, ...artifacts } = await handler.load();
      const extras = extrasSchema.safeParse((userDefinedMetadata as { webring?: unknown } | undefined)?.webring);
      if (!extras.success || !weightData) throw new WebringError('ERR_BAD_DATA', `${url} is not a webring checkpoint: ${extras.error?.issues[0]?.message ?? 'no weights'}`);
      const bytes = concatBuffers(weightData);
      const { metadata, optimizerSpecs, modelWeightBytes } = extras.data;
      if (modelWeightBytes > bytes.byteLength) throw new WebringError('ERR_BAD_DATA', `${url}: its weights are cut short`);
      return {
        artifacts,
        weights: bytes.slice(0, modelWeightBytes),
        optimizerSpecs,
        optimizerData: bytes.slice(modelWeightBytes),
        metadata,
      };
    },
  };
}

/** A captured checkpoint as the server's five files, for RoomControl.importCheckpoint. */
export function checkpointFiles(checkpoint: CapturedCheckpoint): CheckpointFiles {
  const { modelTopology, format, generatedBy, convertedBy, trainingConfig, weightSpecs } = checkpoint.artifacts;
  const modelJson = { modelTopology, format, generatedBy, convertedBy, trainingConfig, weightsManifest: [{ paths: [`./${CHECKPOINT_FILES.weights}`], weights: weightSpecs ?? [] }] };
  const json = (value: unknown) => new Blob([JSON.stringify(value)], { type: 'application/json' });
  const bytes = (data: Uint8Array) => new Blob([data.slice()], { type: 'application/octet-stream' });
  return {
    [CHECKPOINT_FILES.model]: json(modelJson),
    [CHECKPOINT_FILES.weights]: bytes(checkpoint.weights),
    [CHECKPOINT_FILES.optimizerSpecs]: json(checkpoint.optimizerSpecs),
    [CHECKPOINT_FILES.optimizerData]: bytes(checkpoint.optimizerData),
    [CHECKPOINT_FILES.metadata]: json(checkpoint.metadata),
  };
}
