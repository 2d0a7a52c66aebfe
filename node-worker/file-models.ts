/**
 * `file://` models in Node without tfjs-node: model.save('file://dir') writes dir/model.json
 * and dir/weights.bin in tfjs's own layout (what tfjs-node writes, and what
 * tf.loadLayersModel reads back), so a Node program saves its trained model to disk with the
 * same line it would write with tfjs-node. Registered by webring/node only where no other
 * handler (tfjs-node's) already serves the scheme. fitDataset's `backup` keeps its
 * checkpoint copies under a `file://` folder too: one model folder per checkpoint, listed
 * and pruned here (tf.io itself lists no folder).
 */
import * as tf from '@tensorflow/tfjs';
import { mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { registerCheckpointCatalog } from '../shared/checkpoints/tfio-checkpoints';

const SCHEME = 'file://';
const MODEL_FILE = 'model.json';
const WEIGHTS_FILE = 'weights.bin';

/** The folder a URL names: 'file://dir' saves into dir; 'file://dir/model.json' (as tfjs-node loads) is the same folder. */
function folderOf(url: string): string {
  const where = url.startsWith('file:///') ? fileURLToPath(url) : path.resolve(url.slice(SCHEME.length));
  return path.basename(where) === MODEL_FILE ? path.dirname(where) : where;
}

/** The handler for a folder: it holds model.json and weights.bin. */
export function fileModelHandler(folder: string): tf.io.IOHandler {
  return {
    async save(artifacts: tf.io.ModelArtifacts): Promise<tf.io.SaveResult> {
      await mkdir(folder, { recursive: true });
      const weights = tf.io.concatenateArrayBuffers(Array.isArray(artifacts.weightData) ? artifacts.weightData : artifacts.weightData ? [artifacts.weightData] : []);
      const { modelTopology, format, generatedBy, convertedBy, trainingConfig, userDefinedMetadata } = artifacts;
      const modelJson = { modelTopology, format, generatedBy, convertedBy, trainingConfig, userDefinedMetadata, weightsManifest: [{ paths: [WEIGHTS_FILE], weights: artifacts.weightSpecs ?? [] }] };
      // Written beside and renamed: a reader never finds half a model.
      await writeFile(path.join(folder, `${WEIGHTS_FILE}.tmp`), new Uint8Array(weights));
      await writeFile(path.join(folder, `${MODEL_FILE}.tmp`), JSON.stringify(modelJson));
      await rename(path.join(folder, `${WEIGHTS_FILE}.tmp`), path.join(folder, WEIGHTS_FILE));
      await rename(path.join(folder, `${MODEL_FILE}.tmp`), path.join(folder, MODEL_FILE));
      return { modelArtifactsInfo: tf.io.getModelArtifactsInfoForJSON(artifacts) };
    },
    async load(): Promise<tf.io.ModelArtifacts> {
      const modelJson = JSON.parse(await readFile(path.join(folder, MODEL_FILE), 'utf8')) as tf.io.ModelJSON;
      return tf.io.getModelArtifactsForJSON(modelJson, async (manifest) => {
        const specs = manifest.flatMap((group) => group.weights);
        const parts = await Promise.all(manifest.flatMap((group) => group.paths).map((p) => readFile(path.join(folder, p))));
        const bytes = Buffer.concat(parts);
        return [specs, bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength)];
      });
    },
  };
}

/** Serves `file://` URLs with fileModelHandler, unless another handler already does. */
export function registerFileModels(): void {
  // tfjs's routers answer null for a URL that is not theirs, though its type says otherwise.
  const router = ((url: string | string[]) => (typeof url === 'string' && url.startsWith(SCHEME) ? fileModelHandler(folderOf(url)) : null)) as Parameters<typeof tf.io.registerSaveRouter>[0];
  if (tf.io.getSaveHandlers(`${SCHEME}probe`).length === 0) tf.io.registerSaveRouter(router);
  if (tf.io.getLoadHandlers(`${SCHEME}probe`).length === 0) tf.io.registerLoadRouter(router);
  registerCheckpointCatalog(SCHEME, fileCatalog);
}

/** The model folders right under a `file://` prefix's folder, newest pruned last by the caller. */
const fileCatalog = {
  async list(prefix: string): Promise<string[]> {
    const folder = folderOf(prefix);
    let entries;
    try {
      entries = await readdir(folder, { withFileTypes: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return []; // no copy saved yet
      throw err;
    }
    const base = prefix.endsWith('/') ? prefix : `${prefix}/`;
    return entries.filter((e) => e.isDirectory()).map((e) => `${base}${e.name}`);
  },
  async remove(url: string): Promise<void> {
    await rm(folderOf(url), { recursive: true, force: true });
  },
};
