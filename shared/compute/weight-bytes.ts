/**
 * A model's weights as bytes and specs, in tfjs's own formats (what model.save writes and
 * tf.io.decodeWeights reads): shared by the replicas, the program-model description and
 * the checkpoints.
 */
import * as tf from '@tensorflow/tfjs';
import { WebringError } from '../protocol/errors';

/** Tensors' and weights' names, shapes and types, as tfjs's weight specs give them. */
export interface WeightSpec {
  name: string;
  shape: number[];
  dtype: 'float32' | 'int32' | 'bool' | 'string' | 'complex64';
}

export function specsOf(specs: ReadonlyArray<tf.io.WeightsManifestEntry>): WeightSpec[] {
  return specs.map((s) => ({ name: s.name, shape: [...s.shape], dtype: s.dtype }));
}

/** tfjs weight data (one buffer or several) as one byte array. */
export function concatBuffers(data: tf.io.WeightData | undefined): Uint8Array {
  if (!data) return new Uint8Array(0);
  const parts = Array.isArray(data) ? data : [data];
  const out = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0));
  let at = 0;
  for (const p of parts) {
    out.set(new Uint8Array(p), at);
    at += p.byteLength;
  }
  return out;
}

/** What model.save writes (topology, weight specs and bytes), kept in memory. */
export async function artifactsOf(model: tf.LayersModel): Promise<tf.io.ModelArtifacts> {
  let artifacts: tf.io.ModelArtifacts | null = null;
  await model.save(
    tf.io.withSaveHandler(async (a) => {
      artifacts = a;
      return { modelArtifactsInfo: { dateSaved: new Date(), modelTopologyType: 'JSON' } };
    }),
  );
  if (!artifacts) throw new WebringError('ERR_INTERNAL', 'the model produced no artifacts');
  return artifacts;
}
