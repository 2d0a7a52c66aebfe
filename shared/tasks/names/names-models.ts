/**
 * The "names" task's network: Bengio et al.'s (2003) neural language model over the
 * symbols of names-text.ts. The CONTEXT previous symbols come in as a [batch, CONTEXT]
 * float32 tensor of symbol indices (the engine feeds every feature as float32; the
 * embedding layer casts them to int32 before its gather, and 0..27 are exact in float32),
 * each is looked up in one shared embedding table, the vectors are concatenated (flatten),
 * a dense hidden layer with dropout follows, and a dense layer gives VOCAB_SIZE logits. No
 * softmax: the loss (softmaxCrossEntropy) and the helpers below apply it.
 *
 * Only embedding (gather; its gradient is unsortedSegmentSum, which shared/compute/
 * cpu-kernels.ts speeds up on the CPU backend), flatten, dense and dropout: kernels the cpu,
 * webgl and webgpu backends all have.
 *
 * Weights start from seeded initialisers, so every replica builds identical weights. The
 * dropout layers get no seed on purpose: tfjs's dropout draws its mask with
 * randomUniform(shape, 0, 1, 'float32', seed), which with a fixed seed returns the SAME
 * mask at every step (a fixed sub-network, not dropout). Unseeded, each replica draws its
 * own masks from Math.random, which data-parallel training does not need to agree on.
 */
import * as tf from '@tensorflow/tfjs';
import { CONTEXT, VOCAB_SIZE, type NameExamples } from './names-text';
import type { Ask } from './sampling';

export interface NamesModelShape {
  /** Previous symbols the model sees (the examples' context). */
  context: number;
  /** Width of each symbol's embedding. */
  embedding: number;
  /** Widths of the hidden dense layers, in order. */
  hidden: readonly number[];
  /** Dropout after each hidden layer (0: none). */
  dropout: number;
  /** Hidden layers' activation. */
  activation: 'tanh' | 'relu';
}

/**
 * The recipe's network: 6 symbols × 24-wide embeddings → 144 → dense 512 ReLU → dropout
 * 0.3 → 28 logits; 89,276 parameters (embedding 672, hidden 74,240, output 14,364).
 * Trained as the engine trains (global batch 192, Adam 0.005 after a 50-step warm-up, mean
 * SUM cross-entropy) it reaches 1.99 nats/char held out after 6 epochs, below the 4-gram's
 * 2.11. tanh in place of ReLU stalled at 2.23; without dropout it overfits from epoch 4.
 */
export const NAMES_MODEL: Readonly<NamesModelShape> = Object.freeze({
  context: CONTEXT,
  embedding: 24,
  hidden: Object.freeze([512]),
  dropout: 0.3,
  activation: 'relu',
});

/** Half-width of the embeddings' uniform initialiser (Keras's default). */
const EMBEDDING_INIT = 0.05;

/** The network of `shape`, its weights drawn from `seed`; input [batch, context] float32 symbol indices, output [batch, VOCAB_SIZE] logits. */
export function buildNamesModel(seed: number, shape: NamesModelShape = NAMES_MODEL): tf.LayersModel {
  const model = tf.sequential();
  model.add(
    tf.layers.embedding({
      inputShape: [shape.context],
      inputDim: VOCAB_SIZE,
      outputDim: shape.embedding,
      inputLength: shape.context,
      embeddingsInitializer: tf.initializers.randomUniform({ minval: -EMBEDDING_INIT, maxval: EMBEDDING_INIT, seed }),
    }),
  );
  model.add(tf.layers.flatten());
  shape.hidden.forEach((units, i) => {
    model.add(tf.layers.dense({ units, activation: shape.activation, kernelInitializer: tf.initializers.glorotUniform({ seed: seed + 1 + i }) }));
    if (shape.dropout > 0) model.add(tf.layers.dropout({ rate: shape.dropout }));
  });
  model.add(tf.layers.dense({ units: VOCAB_SIZE, kernelInitializer: tf.initializers.glorotUniform({ seed: seed + 1 + shape.hidden.length }) }));
  return model;
}

/** The parameters a network of `shape` has (what model.countParams() says, without building it). */
export function namesParameterCount(shape: NamesModelShape = NAMES_MODEL): number {
  let count = VOCAB_SIZE * shape.embedding;
  let width = shape.context * shape.embedding;
  for (const units of [...shape.hidden, VOCAB_SIZE]) {
    count += width * units + units;
    width = units;
  }
  return count;
}

/** The context width a names model was built for (its input's second dimension). */
export function modelContext(model: tf.LayersModel): number {
  const width = model.inputs[0]?.shape[1];
  if (typeof width !== 'number') throw new Error('names: the model has no fixed context width');
  return width;
}

/**
 * The mean cross-entropy of `model` on `examples`, in nats per predicted symbol (the
 * held-out loss the task reports), in batches of `batchSize`, dropout off.
 */
export async function meanNats(model: tf.LayersModel, examples: NameExamples, batchSize = 2048): Promise<number> {
  const { count, context, features, targets } = examples;
  let sum = 0;
  for (let start = 0; start < count; start += batchSize) {
    const n = Math.min(batchSize, count - start);
    const loss = tf.tidy(() => {
      const x = tf.tensor2d(Float32Array.from(features.subarray(start * context, (start + n) * context)), [n, context], 'float32');
      const y = tf.oneHot(tf.tensor1d(Int32Array.from(targets.subarray(start, start + n)), 'int32'), VOCAB_SIZE);
      const logits = model.apply(x, { training: false }) as tf.Tensor2D;
      return tf.losses.softmaxCrossEntropy(y, logits, undefined, undefined, tf.Reduction.SUM);
    });
    try {
      sum += (await loss.data())[0]!;
    } finally {
      loss.dispose();
    }
  }
  return count === 0 ? NaN : sum / count;
}

/**
 * A plain tfjs model as sampling.ts asks it: the next-symbol probabilities of a batch of
 * contexts, dropout off. A checkpoint loaded with tf.loadLayersModel samples names with
 * `sampleNames(modelAsk(model), mulberry32(seed), 10, { temperature: 0.8 })`.
 */
export function modelAsk(model: tf.LayersModel): Ask {
  return async (features, n) => {
    const probabilities = tf.tidy(() => tf.softmax(model.apply(tf.tensor2d(features, [n, features.length / n], 'float32'), { training: false }) as tf.Tensor2D));
    try {
      return (await probabilities.data()) as Float32Array;
    } finally {
      probabilities.dispose();
    }
  };
}
