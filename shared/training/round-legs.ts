/**
 * A local-steps round's examples on their way to the replica (Replica.trainRound): the
 * network thread reads each local step's shard into a slot of one reusable buffer, and the
 * replica trains the slots one after another with no crossing between them. A round whose
 * examples would not fit ROUND_LEG_MAX_BYTES travels in several legs, each one message to
 * the compute thread and one back; a default round (10 steps of 32 digits) is one leg of
 * 1 MB. The buffers cross by transfer and come back, so a round allocates nothing.
 */
import type { Replica, RoundLeg, RoundLegDone } from '../compute/replica';
import { threadsNow } from '../util/clock';

/** The most bytes of examples one leg carries: a round beyond it (a long H of large shares) travels in several legs. */
export const ROUND_LEG_MAX_BYTES = 16 * 2 ** 20;

/** A leg's rows of one step: views into the current buffers, valid until the next train(). */
export interface LegSlot {
  features: Float32Array;
  labels: Int32Array;
}

export class RoundLegs {
  /** Steps one leg holds. */
  readonly capacity: number;
  private leg: RoundLeg;
  /** Floats of one example's row. */
  private readonly rowFloats: number;
  /** Each step's rows: views into the leg's buffers, made again only when a thread hands back new memory. */
  private slots: LegSlot[] = [];

  /** `stride`: the most examples of one step's shard; `maxBytes`: of examples a leg (a test makes legs short). */
  constructor(parameterCount: number, rowFloats: number, stride: number, localSteps: number, maxBytes = ROUND_LEG_MAX_BYTES) {
    this.rowFloats = rowFloats;
    const stepBytes = stride * rowFloats * Float32Array.BYTES_PER_ELEMENT;
    this.capacity = Math.max(1, Math.min(localSteps, Math.floor(maxBytes / stepBytes)));
    this.leg = {
      features: new Float32Array(this.capacity * stride * rowFloats),
      labels: new Int32Array(this.capacity * stride),
      counts: new Int32Array(this.capacity),
      rates: new Float32Array(this.capacity),
      steps: 0,
      stride,
      first: true,
      drift: null,
      last: true,
      weights: new Float32Array(parameterCount),
    };
    this.layOutSlots();
  }

  private layOutSlots(): void {
    const { features, labels, stride } = this.leg;
    const f = stride * this.rowFloats;
    this.slots = Array.from({ length: this.capacity }, (_, k) => ({ features: features.subarray(k * f, (k + 1) * f), labels: labels.subarray(k * stride, (k + 1) * stride) }));
  }

  /** Step `k`'s rows of the leg being filled. */
  slot(k: number): LegSlot {
    return this.slots[k]!;
  }

  /** Step `k` trains `count` examples (0: none here) at `rate`. */
  set(k: number, count: number, rate: number): void {
    this.leg.counts[k] = count;
    this.leg.rates[k] = rate;
  }

  /** The local weights the last leg of the last round read into the buffer. */
  get weights(): Float32Array {
    return this.leg.weights;
  }

  /**
   * The first `steps` slots through the replica: a round's first leg with its drift, its
   * last leg with the local weights back. Returns the leg's answer, with the time it spent
   * crossing between the threads (outside the replica's call) as `crossMs`.
   */
  async train(replica: Replica, steps: number, where: { first: boolean; last: boolean; drift: Float32Array | null }): Promise<RoundLegDone & { crossMs: number }> {
    const sentAt = threadsNow();
    const done = await replica.trainRound({ ...this.leg, steps, ...where });
    const receivedAt = threadsNow();
    const { features, labels, counts, rates, weights } = done;
    const moved = features !== this.leg.features;
    this.leg = { ...this.leg, features, labels, counts, rates, weights };
    if (moved) this.layOutSlots();
    return { ...done, crossMs: Math.max(0, receivedAt - sentAt - (done.endedAt - done.startedAt)) };
  }
}
