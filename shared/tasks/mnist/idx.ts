/**
 * The IDX format the official MNIST files come in (http://yann.lecun.com/exdb/mnist/):
 * a big-endian header, then the values as unsigned bytes.
 *
 *   0  0x00 0x00 type ndim   4  ndim × u32 dimension sizes   then the data, row-major
 *
 * Labels are type 0x08 (unsigned byte) with one dimension; images are type 0x08 with three
 * (count, rows, cols). Anything else, or a file whose length does not match its header, is
 * ERR_BAD_DATA naming the file: training on a misread file would learn noise.
 */
import { WebringError } from '../../protocol/errors';
import { MNIST_COLS, MNIST_ROWS } from './format';

/** The magic number's third byte: the values are unsigned bytes. */
const IDX_TYPE_UBYTE = 0x08;
const IDX_MAGIC_BYTES = 4;
const IDX_DIM_BYTES = 4;

export interface IdxArray {
  dims: number[];
  /** The values, row-major: a view into the file's bytes, not a copy. */
  data: Uint8Array;
}

/** Parses one IDX file of unsigned bytes with `ndim` dimensions; `name` goes into any error. */
export function parseIdx(bytes: Uint8Array, ndim: number, name: string): IdxArray {
  const headerBytes = IDX_MAGIC_BYTES + ndim * IDX_DIM_BYTES;
  if (bytes.byteLength < headerBytes) {
    throw new WebringError('ERR_BAD_DATA', `${name}: ${bytes.byteLength} B is shorter than an IDX header of ${ndim} dimensions`);
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const magic = view.getUint32(0, false);
  const expectedMagic = (IDX_TYPE_UBYTE << 8) | ndim;
  if (magic !== expectedMagic) {
    throw new WebringError('ERR_BAD_DATA', `${name}: magic number 0x${hex(magic)}, expected 0x${hex(expectedMagic)} (unsigned bytes, ${ndim} dimensions)`);
  }
  const dims: number[] = [];
  let values = 1;
  for (let d = 0; d < ndim; d++) {
    const size = view.getUint32(IDX_MAGIC_BYTES + d * IDX_DIM_BYTES, false);
    dims.push(size);
    values *= size;
  }
  if (bytes.byteLength !== headerBytes + values) {
    throw new WebringError('ERR_BAD_DATA', `${name}: ${bytes.byteLength} B, but its header (${dims.join('×')}) says ${headerBytes + values} B`);
  }
  return { dims, data: bytes.subarray(headerBytes) };
}

/** An images file and its labels file, checked against each other: `count` 28×28 digits. */
export function parseIdxDigits(
  images: { bytes: Uint8Array; name: string },
  labels: { bytes: Uint8Array; name: string },
  expectedCount: number,
  classes: number,
): { labels: Uint8Array; pixels: Uint8Array } {
  const img = parseIdx(images.bytes, 3, images.name);
  const lab = parseIdx(labels.bytes, 1, labels.name);
  const [count, rows, cols] = img.dims as [number, number, number];
  if (rows !== MNIST_ROWS || cols !== MNIST_COLS) throw new WebringError('ERR_BAD_DATA', `${images.name}: ${rows}×${cols} images, expected ${MNIST_ROWS}×${MNIST_COLS}`);
  if (count !== expectedCount) throw new WebringError('ERR_BAD_DATA', `${images.name}: ${count} images, expected ${expectedCount}`);
  if (lab.dims[0] !== count) throw new WebringError('ERR_BAD_DATA', `${labels.name}: ${lab.dims[0]} labels for ${count} images`);
  const bad = lab.data.findIndex((l) => l >= classes);
  if (bad >= 0) throw new WebringError('ERR_BAD_DATA', `${labels.name}: label ${lab.data[bad]} at ${bad} is not one of ${classes} classes`);
  return { labels: lab.data, pixels: img.data };
}

function hex(n: number): string {
  return n.toString(16).padStart(8, '0');
}
