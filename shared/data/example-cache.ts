/**
 * A bounded store of examples by dataset index, for a worker that streams its share of
 * the training set (shared/training/streamed-mnist.ts). It holds at most `capacity`
 * examples in two preallocated arrays; a new example takes the slot of the oldest one
 * stored (first in, first out: a worker consumes its examples in the order it fetched
 * them), so memory stays at capacity × 785 B however long the run.
 */
import { MNIST_PIXELS } from './mnist-format';

const EMPTY = -1;

export class ExampleCache {
  private readonly labels: Uint8Array;
  private readonly pixels: Uint8Array;
  /** Dataset index held by each slot, or EMPTY. */
  private readonly indexOf: Int32Array;
  /** Slot of each dataset index, or EMPTY. */
  private readonly slotOf: Int32Array;
  private next = 0;
  private stored = 0;

  constructor(
    readonly capacity: number,
    /** Examples in the split: indices run 0 … size − 1. */
    size: number,
  ) {
    this.labels = new Uint8Array(capacity);
    this.pixels = new Uint8Array(capacity * MNIST_PIXELS);
    this.indexOf = new Int32Array(capacity).fill(EMPTY);
    this.slotOf = new Int32Array(size).fill(EMPTY);
  }

  /** Examples held now; never more than capacity. */
  get size(): number {
    return this.stored;
  }

  has(index: number): boolean {
    return this.slotOf[index] !== EMPTY;
  }

  /** Stores example `index` from a reply: its label, and its pixels at `pixels[at * 784 …]`. */
  put(index: number, label: number, pixels: Uint8Array, at: number): void {
    let slot = this.slotOf[index]!;
    if (slot === EMPTY) {
      slot = this.next;
      this.next = (this.next + 1) % this.capacity;
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
