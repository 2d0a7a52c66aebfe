/**
 * The optimizer's state as plain variables, so that a live replica can hand it to another
 * (a joiner, or a replica that fell out of step) in one buffer.
 *
 * tfjs's Adam creates its moment slots lazily on the first step; here they are created up
 * front, with the names Adam itself would give them, so that every replica's state has the
 * same layout from step 0 on. This reaches into Adam's fields, which tfjs keeps stable
 * because its own getWeights/setWeights and the Keras converter depend on them.
 */
import * as tf from '@tensorflow/tfjs';
import type { OptimizerKind } from '../protocol';

interface AdamFields {
  accBeta1: tf.Variable;
  accBeta2: tf.Variable;
  accumulatedFirstMoment: Array<{ originalName: string; variable: tf.Variable }>;
  accumulatedSecondMoment: Array<{ originalName: string; variable: tf.Variable }>;
}

interface IterationField {
  iterations_: number;
}

const adam = (optimizer: tf.Optimizer) => optimizer as unknown as AdamFields;

/** Creates Adam's moment slots (zeros) for `variables`, as its first applyGradients would. */
export function createOptimizerSlots(kind: OptimizerKind, optimizer: tf.Optimizer, variables: tf.Variable[]): void {
  if (kind !== 'adam') return;
  const a = adam(optimizer);
  a.accumulatedFirstMoment = variables.map((v) => ({ originalName: `${v.name}/m`, variable: tf.tidy(() => tf.zerosLike(v).variable(false)) }));
  a.accumulatedSecondMoment = variables.map((v) => ({ originalName: `${v.name}/v`, variable: tf.tidy(() => tf.zerosLike(v).variable(false)) }));
}

/** The optimizer's state variables in a fixed order (Adam: β1^t, β2^t, first moments, second moments). */
export function optimizerStateVariables(kind: OptimizerKind, optimizer: tf.Optimizer): tf.Variable[] {
  if (kind !== 'adam') return [];
  const a = adam(optimizer);
  return [a.accBeta1, a.accBeta2, ...a.accumulatedFirstMoment.map((s) => s.variable), ...a.accumulatedSecondMoment.map((s) => s.variable)];
}

/** Floats of optimizer state for a model with `parameterCount` weights. */
export function optimizerStateLength(kind: OptimizerKind, parameterCount: number): number {
  return kind === 'adam' ? 2 + 2 * parameterCount : 0;
}

export function setOptimizerIterations(optimizer: tf.Optimizer, iterations: number): void {
  (optimizer as unknown as IterationField).iterations_ = iterations;
}

/**
 * Loads saved optimizer weights (a checkpoint's). tfjs's setWeights makes new slot
 * variables without disposing the old ones, so those are disposed first.
 */
export async function loadOptimizerWeights(
  kind: OptimizerKind,
  optimizer: tf.Optimizer,
  weights: Parameters<tf.Optimizer['setWeights']>[0],
  variables: tf.Variable[],
): Promise<void> {
  if (kind === 'adam') {
    const a = adam(optimizer);
    tf.dispose([...a.accumulatedFirstMoment.map((s) => s.variable), ...a.accumulatedSecondMoment.map((s) => s.variable)]);
    a.accumulatedFirstMoment = [];
    a.accumulatedSecondMoment = [];
  }
  await optimizer.setWeights(weights);
  // A checkpoint saved before Adam's first step has no slots; the layout needs them.
  if (kind === 'adam' && adam(optimizer).accumulatedFirstMoment.length === 0) createOptimizerSlots(kind, optimizer, variables);
}
