/**
 * A device's own examples (a run with `data: 'own'`): what one student collected, in the
 * order they collected it. They stay on the device; the ring only ever sees gradients and
 * counts (own-data.ts). The browser keeps them in IndexedDB, a Node worker reads them from a
 * folder; both hand the trainer this in-memory form.
 *
 * Examples are never renumbered: each has a sequence number that only grows, and a deleted
 * example stays as a tombstone (its place, without its pixels) so that an epoch that
 * already counted it still finds every other example where it was. Clearing the store
 * starts a new store, with a new key: to the class it is another device.
 */
import { mixSeed } from '../util/random';
import { MAX_OWN_SEQ } from '../protocol';

/** Every device holds out this fraction of its own examples to score the model on (custom classes). */
export const HOLDOUT_FRACTION = 0.2;
const UINT32_RANGE = 2 ** 32;

export interface OwnExample {
  /** Its place in collection order on this device: increasing, never reused. */
  readonly seq: number;
  readonly label: string;
  /**
   * The item's numbers (shared/tasks/task.ts OwnData): a drawing's F features as the model
   * takes them (0..1, row-major, ink = 1), a name's symbols; null once the student deleted it.
   */
  pixels: Float32Array | null;
  /** How many numbers it had, kept by its tombstone: a text item gives examples by its length. Absent: as many as the task's items have. */
  size?: number;
}

/** Turns a live item into its tombstone, which keeps its place and its size. */
export function tombstone(example: OwnExample): void {
  if (example.pixels === null) return;
  example.size = example.pixels.length;
  example.pixels = null;
}

/** One device's examples as the trainer reads them. */
export interface OwnExamples {
  /** A random 32-bit key, new whenever the store is cleared: the device's identity in an epoch's roster. */
  readonly key: number;
  /** Every example in seq order, tombstones included. */
  readonly examples: readonly OwnExample[];
}

/**
 * True when the example `seq` of the store `key` is held out for scoring rather than
 * trained on: a hash of the two, so the split of an example never changes, whatever is
 * added or deleted around it, and about HOLDOUT_FRACTION of a store is held out.
 */
export function isHeldOut(key: number, seq: number): boolean {
  return mixSeed(key, seq) / UINT32_RANGE < HOLDOUT_FRACTION;
}

/** A random store key (never 0: a rank with no store writes 0). */
export function newStoreKey(random: () => number = Math.random): number {
  return 1 + Math.floor(random() * (UINT32_RANGE - 1));
}

/** Examples kept in memory: the Node worker's folder once read, and the unit tests. */
export class MemoryOwnExamples implements OwnExamples {
  private list: OwnExample[] = [];
  private storeKey: number;

  constructor(key: number = newStoreKey()) {
    this.storeKey = key;
  }

  get key(): number {
    return this.storeKey;
  }

  get examples(): readonly OwnExample[] {
    return this.list;
  }

  /** Adds one item (the caller checks it against its task's OwnData); returns its seq. */
  add(label: string, pixels: ArrayLike<number>): number {
    if (pixels.length === 0) throw new RangeError('an item has at least one number');
    const seq = this.list.length === 0 ? 0 : this.list.at(-1)!.seq + 1;
    if (seq > MAX_OWN_SEQ) throw new RangeError(`a store holds at most ${MAX_OWN_SEQ + 1} examples`);
    this.list.push({ seq, label, pixels: Float32Array.from(pixels) });
    return seq;
  }

  /** Deletes the example `seq`, leaving its tombstone; false when there is none. */
  delete(seq: number): boolean {
    const example = this.list.find((e) => e.seq === seq);
    if (!example || example.pixels === null) return false;
    tombstone(example);
    return true;
  }

  /** Empties the store; it becomes a new store, with a new key. */
  clear(key: number = newStoreKey()): void {
    this.list = [];
    this.storeKey = key;
  }
}

/** Live examples per label: what the student sees and what the teacher's page counts. */
export function countByLabel(store: OwnExamples): Record<string, number> {
  const out: Record<string, number> = {};
  for (const e of store.examples) if (e.pixels !== null) out[e.label] = (out[e.label] ?? 0) + 1;
  return out;
}
