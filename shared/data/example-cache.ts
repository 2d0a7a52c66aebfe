/**
 * A bounded store of examples by dataset index, for a worker that streams its share of
 * the training set (shared/data/streamed-dataset.ts). It holds at most `capacity`
 * examples in two preallocated arrays; a new example takes the slot of the oldest one
 * stored (first in, first out: a worker consumes its examples in the order it fetched
 * them), so memory stays at capacity × (1 + F) B however long the run.
 *
 * The step being assembled pins its examples (`pin`, then `unpinAll` once it has read
 * them). A pinned example is never evicted: eviction passes over it to the next oldest.
 * Pins are bounded by `maxPinned` (a step's shard), which is below `capacity`, so the cache
 * is never full of pinned examples and the capacity above holds with pins too. So a
 * prefetch plan that drifts ahead by more than the cache (the dataset+own livelock: its
 * replies evicted what the step waited for, and the step fetched it again, forever) can
 * delay a step, never starve it.
 */
import { WebringError } from '../protocol/errors';

const EMPTY = -1;

/** What one cached example is: F feature bytes, which training reads as byte × scale. */
export interface CachedFormat {
  features: number;
  byteScale: number;
}

export class ExampleCache {
  private readonly labels: Uint8Array;
  private readonly featureBytes: Uint8Array;
  private readonly features: number;
  private readonly byteScale: number;
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
    format: CachedFormat,
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
    this.features = format.features;
    this.byteScale = format.byteScale;
    this.labels = new Uint8Array(capacity);
    this.featureBytes = new Uint8Array(capacity * this.features);
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

  /** Stores example `index` from a reply: its target, and its features at `features[at * F …]`. */
  put(index: number, label: number, features: Uint8Array, at: number): void {
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
    const f = this.features;
    this.featureBytes.set(features.subarray(at * f, (at + 1) * f), slot * f);
  }

  /**
   * Writes example `index` as training input: its features scaled as the task says into
   * `out[at * F …]` and its target into `labels[at]`. The caller checked has(index).
   */
  read(index: number, out: Float32Array, labels: Int32Array, at: number): void {
    const slot = this.slotOf[index]!;
    const f = this.features;
    const scale = this.byteScale;
    const src = slot * f;
    const dst = at * f;
    for (let p = 0; p < f; p++) out[dst + p] = this.featureBytes[src + p]! * scale;
    labels[at] = this.labels[slot]!;
  }
}
