/**
 * The data service's wire format (TensorFlow's tf.data service, done for a class): how a
 * worker names the examples it wants, and how they come back. The server
 * (signaling-server/edge/data-api.ts) and every worker (shared/data/streamed-dataset.ts)
 * import this one file; which datasets exist is the tasks' business (shared/tasks/).
 *
 *   GET /api/rooms/:room/data/:dataset/:split?ranges=3-5,9,12-40
 *
 * `ranges` lists dataset indices in ascending order, as single indices or inclusive runs;
 * the reply is application/octet-stream: the examples' targets (one byte each), then their
 * features (F bytes each, the task's example row-major), in the same ascending order. A
 * worker asks for the indices its next steps train, so each example of an epoch travels
 * once, to the one worker that trains it.
 */
import { WebringError } from '../protocol/errors';

export const DATA_SPLITS = ['train', 'test'] as const;
export type DataSplit = (typeof DATA_SPLITS)[number];

/** Bytes one example of F features takes on the wire and in a cache: its target and its features. */
export function exampleBytes(features: number): number {
  return 1 + features;
}

/**
 * The most examples one request may name, whatever the run: 1024 examples of under a kilobyte are under 1 MB, and
 * the longest `ranges` that many scattered indices make (about 6 KB) stays inside every
 * server's URL limit. A run's own bound is smaller (examplesPerRequest in
 * shared/data/streamed-dataset.ts).
 */
export const MAX_EXAMPLES_PER_REQUEST = 1024;
/** A `ranges` longer than this is refused before it is parsed. */
export const MAX_RANGES_CHARS = 8 * 1024;

/** The counts of a dataset's two splits (shared/tasks/task.ts TaskDataset has them). */
export interface SplitCounts {
  trainCount: number;
  testCount: number;
}

export function isDataSplit(value: string): value is DataSplit {
  return (DATA_SPLITS as readonly string[]).includes(value);
}

/** Examples in a split of a dataset. */
export function splitCount(dataset: SplitCounts, split: DataSplit): number {
  return split === 'train' ? dataset.trainCount : dataset.testCount;
}

/** The training set's size on the wire: what one epoch costs the server at best. */
export function trainingSetBytes(dataset: SplitCounts, features: number): number {
  return dataset.trainCount * exampleBytes(features);
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

/** Checks a reply's length for `count` examples of `features` features; a short or long body is ERR_BAD_DATA, never zeros. */
export function checkExamplesReply(body: Uint8Array, count: number, features: number): { labels: Uint8Array; features: Uint8Array } {
  const expected = count * exampleBytes(features);
  if (body.byteLength !== expected) {
    throw new WebringError('ERR_BAD_DATA', `the data service sent ${body.byteLength} B for ${count} examples, expected ${expected} B`);
  }
  return { labels: body.subarray(0, count), features: body.subarray(count) };
}
