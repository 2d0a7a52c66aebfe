/**
 * What every model needs whatever its task (the models themselves are the tasks':
 * shared/tasks/models.ts): the build, seeded for the run; prediction; the optimizers.
 * Initialisers are seeded so every replica starts from identical weights even before the
 * chief's state is broadcast.
 */
import * as tf from '@tensorflow/tfjs';
import type { StartConfig } from '../protocol';
import { modelsOf } from '../tasks/models';
import { taskOf } from '../tasks/registry';
import { useFastCpuKernels } from './cpu-kernels';
import { ADAM_BETA1, ADAM_BETA2, ADAM_EPSILON } from './flat-optimizer';

// Before any model trains: the CPU backend's own filter gradient makes a convolutional model's step 10× slower.
useFastCpuKernels();

/** The run's model: the task's builder, seeded, with one output per class or symbol. */
export function buildModel(config: Pick<StartConfig, 'task' | 'model' | 'seed' | 'classes'>): tf.LayersModel {
  return modelsOf(config.task).build(config.model, config.seed, config.classes.length);
}

/** The shape of a batch of `n` examples of the task of `config`: [n, ...the task's example shape]. */
export function batchShape(task: string, n: number): number[] {
  return [n, ...taskOf(task).example.shape];
}

/** Output probabilities for `n` examples (their features in `features`): one forward pass and a softmax. */
export async function predictBatch(model: tf.LayersModel, features: Float32Array, shape: number[]): Promise<Float32Array> {
  const probabilities = tf.tidy(() => tf.softmax(model.predict(tf.tensor(features, shape, 'float32')) as tf.Tensor2D));
  try {
    return (await probabilities.data()) as Float32Array;
  } finally {
    probabilities.dispose();
  }
}

/** A WebGPU adapter's name for people: "vendor architecture description", as far as known. */
export function describeAdapter(info: Record<string, string> | undefined): string | undefined {
  if (!info) return undefined;
  return [info.vendor, info.architecture, info.description].filter(Boolean).join(' ') || undefined;
}

export function buildOptimizer(kind: 'sgd' | 'adam', learningRate: number): tf.Optimizer {
  // Adam's constants named, not left to tfjs: its epsilon defaults to the backend's, 1e-4 on
  // a WebGL context without 32-bit float textures, so a local step on such a tab would take
  // other steps than the fused update's (flat-optimizer.ts) on every other tab.
  return kind === 'adam' ? tf.train.adam(learningRate, ADAM_BETA1, ADAM_BETA2, ADAM_EPSILON) : tf.train.sgd(learningRate);
}

/**
 * Sets the rate the optimizer's next update uses; both tfjs optimizers read it at every
 * update. (`instanceof tf.SGDOptimizer` is true of Adam too, so the setter is looked up.)
 */
export function setLearningRate(optimizer: tf.Optimizer, rate: number): void {
  const o = optimizer as unknown as { setLearningRate?: (rate: number) => void; learningRate: number };
  if (typeof o.setLearningRate === 'function') o.setLearningRate(rate);
  else o.learningRate = rate;
}
