/**
 * What a program registers for its own model, as a thread module: a custom layer (tfjs's
 * registerClass, as loading one requires) and a custom loss (registerLoss). The tests list
 * this file's URL in the model's thread modules, and import it themselves too.
 */
import * as tf from '@tensorflow/tfjs';
import { registerLoss } from '../../shared/compute/program-model';

/** Multiplies its input by one trainable scalar per feature. */
export class FeatureScale extends tf.layers.Layer {
  static readonly className = 'FeatureScale';
  private scale: tf.LayerVariable | null = null;

  override build(inputShape: tf.Shape | tf.Shape[]): void {
    const shape = inputShape as tf.Shape;
    this.scale = this.addWeight('scale', [shape[shape.length - 1]!], 'float32', tf.initializers.ones());
    this.built = true;
  }

  override call(inputs: tf.Tensor | tf.Tensor[]): tf.Tensor {
    return tf.tidy(() => tf.mul(Array.isArray(inputs) ? inputs[0]! : inputs, this.scale!.read()));
  }

  override getClassName(): string {
    return FeatureScale.className;
  }
}
tf.serialization.registerClass(FeatureScale);

/** Half the squared error, per example: a loss tfjs does not name. */
export function halfSquaredError(yTrue: tf.Tensor, yPred: tf.Tensor): tf.Tensor {
  return tf.tidy(() => tf.mul(0.5, tf.mean(tf.square(tf.sub(yPred, yTrue)), -1)));
}
registerLoss('halfSquaredError', halfSquaredError);

export const CUSTOM_PARTS_URL = import.meta.url;
