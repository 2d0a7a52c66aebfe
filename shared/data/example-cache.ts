/**
 * A bounded store of examples by dataset index, for a worker that streams its share of
 * the training set (shared/data/streamed-mnist.ts). It holds at most `capacity`
 * examples in two preallocated arrays; a new example takes the slot of the oldest one
 * stored (first in, first out: a worker consumes its examples in the order it fetched
 * them), so memory stays at capacity × 785 B however long the run.
 *
 * The step being assembled pins its examples (`pin`, then `unpinAll` once it has read
 * them). A pinned example is never evicted: eviction passes over it to the next oldest.
 * Pins are bounded by `maxPinned` (a step's shard), which is below `capacity`, so the cache
 * is never full of pinned examples and the capacity above holds with pins too. So a
 * prefetch plan that drifts ahead by more than the cache (the mnist+own livelock: its
 * replies evicted what the step waited for, and the step fetched it again, forever) can
 * delay a step, never starve it.
 */
import { WebringError } from '../protocol/errors';
import { MNIST_PIXELS } from './mnist-format';

const EMPTY = -1;

export class ExampleCache {
  private readonly labels: Uint8Array;
  private readonly pixels: Uint8Array;
  /** Dataset index held by each slot, or EMPTY. */
  private readonly indexOf: Int32Array;
  /** Slot of each dataset index, or EMPTY. */
  private readonly slotOf: Int32Array;
  /** 1 for each dataset index the current step holds, held or still on its way. */
  private readonly isPinned: Uint8Array;
  /** The pinned indices, so unpinAll clears only those. */
  private readonly pinnedList: Int32Array;
  private pinned = 0;
  private next = 0;
  private stored = 0;

  constructor(
    readonly capacity: number,
    /** Examples in the split: indices run 0 … size − 1. */
    size: number,
    /**
     * The most indices pinned at once: a step's shard. Below capacity, unless the cache
     * holds the whole split (capacity ≥ size), where nothing is ever evicted.
     */
    readonly maxPinned = 0,
  ) {
    if (maxPinned >= capacity && capacity < size) {
      throw new WebringError('ERR_INTERNAL', `an example cache of ${capacity} cannot keep ${maxPinned} pinned examples and still take new ones`);
    }
    this.labels = new Uint8Array(capacity);
    this.pixels = new Uint8Array(capacity * MNIST_PIXELS);
    this.indexOf = new Int32Array(capacity).fill(EMPTY);
    this.slotOf = new Int32Array(size).fill(EMPTY);
    this.isPinned = new Uint8Array(maxPinned > 0 ? size : 0);
    this.pinnedList = new Int32Array(maxPinned);
  }

  /** Examples held now; never more than capacity. */
  get size(): number {
    return this.stored;
  }

  has(index: number): boolean {
    return this.slotOf[index] !== EMPTY;
  }

  /**
   * Keeps example `index` until unpinAll, whether it is held now or put later. More than
   * maxPinned distinct pins is a shard larger than its source's bound: ERR_INTERNAL.
   */
  pin(index: number): void {
    if (this.isPinned[index] === 1) return;
    if (this.pinned === this.maxPinned) {
      throw new WebringError('ERR_INTERNAL', `a step pinned more than ${this.maxPinned} examples of the cache`);
    }
    this.isPinned[index] = 1;
    this.pinnedList[this.pinned++] = index;
  }

  /** Releases every pin: the step has read its examples, and they age out as any other. */
  unpinAll(): void {
    for (let i = 0; i < this.pinned; i++) this.isPinned[this.pinnedList[i]!] = 0;
    this.pinned = 0;
  }

  /** Stores example `index` from a reply: its label, and its pixels at `pixels[at * 784 …]`. */
  put(index: number, label: number, pixels: Uint8Array, at: number): void {
    let slot = this.slotOf[index]!;
    if (slot === EMPTY) {
      slot = this.next;
      // At most maxPinned < capacity slots are pinned, so this finds a slot within maxPinned + 1 tries.
      while (this.indexOf[slot] !== EMPTY && this.isPinned[this.indexOf[slot]!] === 1) slot = (slot + 1) % this.capacity;
      this.next = (slot + 1) % this.capacity;
      const evicted = this.indexOf[slot]!;
      if (evicted === EMPTY) this.stored++;
      else this.slotOf[evicted] = EMPTY;
      this.indexOf[slot] = index;
      this.slotOf[index] = slot;
    }
    this.labels[slot] = label;
    this.pixels.set(pixels.subarray(at * MNIST_PIXELS, (at + 1) * MNIST_PIXELS), slot * MNIST_PIXELS);
  }

  /**
   * Writes example `index` as training input: its pixels scaled to 0..1 into
   * `images[at * 784 …]` and its label into `labels[at]`. The caller checked has(index).
   */
  read(index: number, images: Float32Array, labels: Int32Array, at: number): void {
    const slot = this.slotOf[index]!;
    const src = slot * MNIST_PIXELS;
    const dst = at * MNIST_PIXELS;
    for (let p = 0; p < MNIST_PIXELS; p++) images[dst + p] = this.pixels[src + p]! * PIXEL_SCALE;
    labels[at] = this.labels[slot]!;
  }
}

/** uint8 pixels to the 0..1 the models take. */
export const PIXEL_SCALE = 1 / 255;
