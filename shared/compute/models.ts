/**
 * The two models a class can train. Both take [batch, 28, 28, 1] images in 0..1 and
 * output 10 logits; the softmax lives in the loss (numerically stable) and in prediction.
 * Initialisers are seeded so every replica starts from identical weights even before the
 * chief's state is broadcast.
 */
import * as tf from '@tensorflow/tfjs';
import type { ModelKind } from '../protocol';
import { MNIST_CLASSES, MNIST_COLS, MNIST_ROWS } from '../data/mnist-format';
import { useFastCpuKernels } from './cpu-kernels';

// Before any model trains: the CPU backend's own filter gradient makes a CNN step 10× slower.
useFastCpuKernels();

export const INPUT_SHAPE = [MNIST_ROWS, MNIST_COLS, 1];

/** The model of `kind` with `classes` outputs (MNIST's 10 unless the run names its own classes). */
export function buildModel(kind: ModelKind, seed: number, classes: number = MNIST_CLASSES): tf.LayersModel {
  const init = (offset: number) => tf.initializers.glorotUniform({ seed: seed + offset });
  const model = tf.sequential();
  if (kind === 'mlp') {
    model.add(tf.layers.flatten({ inputShape: INPUT_SHAPE }));
    model.add(tf.layers.dense({ units: 128, activation: 'relu', kernelInitializer: init(1) }));
    model.add(tf.layers.dense({ units: classes, kernelInitializer: init(2) }));
  } else {
    model.add(
      tf.layers.conv2d({ inputShape: INPUT_SHAPE, filters: 8, kernelSize: 5, activation: 'relu', kernelInitializer: init(1) }),
    );
    model.add(tf.layers.maxPooling2d({ poolSize: 2, strides: 2 }));
    model.add(tf.layers.conv2d({ filters: 16, kernelSize: 5, activation: 'relu', kernelInitializer: init(2) }));
    model.add(tf.layers.maxPooling2d({ poolSize: 2, strides: 2 }));
    model.add(tf.layers.flatten());
    model.add(tf.layers.dense({ units: classes, kernelInitializer: init(3) }));
  }
  return model;
}

/** Class probabilities for one 28×28 image (values 0..1): one forward pass and a softmax. */
export async function predictDigit(model: tf.LayersModel, image: Float32Array): Promise<Float32Array> {
  const probabilities = tf.tidy(() => tf.softmax(model.predict(tf.tensor4d(image, [1, MNIST_ROWS, MNIST_COLS, 1])) as tf.Tensor2D));
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
  return kind === 'adam' ? tf.train.adam(learningRate) : tf.train.sgd(learningRate);
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
