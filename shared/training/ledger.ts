/**
 * A ledger: floats that the participants of a step share in one buffer, each in a section
 * of its own. The gradient all-reduce carries one after the gradients (the tail: the step's
 * counts and metrics, the votes, the share balancer's times, link selection, the data
 * agreement: step-ledger.ts), and the state hand-over one around the weights (the position,
 * the learning-rate ramp, the link measurements, the data's roster). A participant owns its
 * section: how many floats it takes, what it writes before the collective, what it reads
 * after. The trainer only loops over the sections; a new participant is one new section,
 * registered where the trainer lists them.
 *
 * The layout is fixed once, at the ring's capacity (MAX_ROOM_MEMBERS), so the buffer, its
 * bytes on the wire and the chunks the collectives cut it into never change with the ring's
 * size. A new generation only binds the sections to its world size: a section that reads
 * one value per rank makes its views of the first N slots there, never in a step.
 */

export interface LedgerSection<C> {
  /** Floats this section takes in a ring of up to `capacity` ranks; asked once, when the ledger is laid out. */
  floats(capacity: number): number;
  /** The ring now has `worldSize` ranks (a new generation): make any views of `view` here. */
  bind?(view: Float32Array, worldSize: number): void;
  /** This replica's values into `view`, which the ledger zeroed (a rank writes only its own slots). */
  write(view: Float32Array, context: C): void;
  /** The agreed values, the same on every replica after the collective. */
  read(view: Float32Array, context: C): void;
}

export class Ledger<C> {
  /** Floats of all sections together. */
  readonly length: number;
  private readonly sizes: number[];
  private views: Float32Array[] = [];
  private worldSize = 0;

  constructor(
    private readonly sections: ReadonlyArray<LedgerSection<C>>,
    capacity: number,
  ) {
    this.sizes = sections.map((s) => s.floats(capacity));
    this.length = this.sizes.reduce((a, b) => a + b, 0);
  }

  /** Lays the sections over `buffer` from `at`, in the order they were listed, and binds them to `worldSize`. */
  attach(buffer: Float32Array, at: number, worldSize: number): void {
    if (buffer.length < at + this.length) throw new RangeError(`a ledger of ${this.length} floats does not fit ${buffer.length - at}`);
    this.views = [];
    for (const size of this.sizes) {
      this.views.push(buffer.subarray(at, at + size));
      at += size;
    }
    this.worldSize = 0;
    this.bind(worldSize);
  }

  /** A new generation of `worldSize` ranks; nothing to do when the size stays. */
  bind(worldSize: number): void {
    if (worldSize === this.worldSize || this.views.length === 0) return;
    this.worldSize = worldSize;
    this.sections.forEach((s, i) => s.bind?.(this.views[i]!, worldSize));
  }

  /** Zeroes every section, then lets each write its own values. */
  write(context: C): void {
    for (let i = 0; i < this.sections.length; i++) {
      const view = this.views[i]!;
      view.fill(0);
      this.sections[i]!.write(view, context);
    }
  }

  /** Lets every section read the agreed values, in layout order. */
  read(context: C): void {
    for (let i = 0; i < this.sections.length; i++) this.sections[i]!.read(this.views[i]!, context);
  }
}
