/**
 * The two models that learn MNIST. Both take [batch, 28, 28, 1] images in 0..1 and output
 * one logit per class; the softmax lives in the loss (numerically stable) and in
 * prediction. Initialisers are seeded so every replica starts from identical weights even
 * before the chief's state is broadcast.
 */
import * as tf from '@tensorflow/tfjs';
import { WebringError } from '../../protocol/errors';
import type { TaskModels } from '../task';
import { MNIST_COLS, MNIST_ROWS } from './format';

const INPUT_SHAPE = [MNIST_ROWS, MNIST_COLS, 1];

/** A multilayer perceptron, 784-128-10: learns visibly within a few dozen steps. */
function mlp(seed: number, outputs: number): tf.Sequential {
  const init = (offset: number) => tf.initializers.glorotUniform({ seed: seed + offset });
  const model = tf.sequential();
  model.add(tf.layers.flatten({ inputShape: INPUT_SHAPE }));
  model.add(tf.layers.dense({ units: 128, activation: 'relu', kernelInitializer: init(1) }));
  model.add(tf.layers.dense({ units: outputs, kernelInitializer: init(2) }));
  return model;
}

/** A small CNN (conv 5×5×8, pool, conv 5×5×16, pool, dense): above 98% after one epoch of the official MNIST. */
function cnn(seed: number, outputs: number): tf.Sequential {
  const init = (offset: number) => tf.initializers.glorotUniform({ seed: seed + offset });
  const model = tf.sequential();
  model.add(tf.layers.conv2d({ inputShape: INPUT_SHAPE, filters: 8, kernelSize: 5, activation: 'relu', kernelInitializer: init(1) }));
  model.add(tf.layers.maxPooling2d({ poolSize: 2, strides: 2 }));
  model.add(tf.layers.conv2d({ filters: 16, kernelSize: 5, activation: 'relu', kernelInitializer: init(2) }));
  model.add(tf.layers.maxPooling2d({ poolSize: 2, strides: 2 }));
  model.add(tf.layers.flatten());
  model.add(tf.layers.dense({ units: outputs, kernelInitializer: init(3) }));
  return model;
}

const BUILDERS: Record<string, (seed: number, outputs: number) => tf.Sequential> = { mlp, cnn };

export const mnistModels: TaskModels = {
  build(model, seed, outputs) {
    const build = BUILDERS[model];
    if (!build) throw new WebringError('ERR_BAD_REQUEST', `the mnist task has no model ${model}`, 'model');
    return build(seed, outputs);
  },
};
