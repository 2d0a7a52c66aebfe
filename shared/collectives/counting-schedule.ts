/**
 * What the ring, the hub and the chain schedules share: each sends by one link, hears from
 * one rank over an ordered channel, and is done once it has taken the number of messages it
 * expects. A schedule built on this base states only what differs: how many messages it
 * expects and its first sends (start), how a message is admitted and where it goes on
 * (receive), and which floats a queued message carries when not the whole buffer's chunks.
 */
import { flagsSaturated } from './admission';
import type { ActiveCollective, EngineParts, Schedule } from './schedule';
import type { ChunkHeader } from './wire';
import type { RingLink } from './collective';

export abstract class CountingSchedule implements Schedule {
  private received = 0;
  private expected = 0;

  constructor(
    protected readonly parts: EngineParts,
    /** The link every message of this schedule leaves by. */
    private readonly link: RingLink | null,
    /** Why there is no link, for the engine's error. */
    private readonly noLinkDetail: string,
    /** The rank every message comes from, in order. */
    private readonly sender: number,
  ) {}

  abstract start(c: ActiveCollective): void;
  abstract receive(c: ActiveCollective, h: ChunkHeader, bytes: Uint8Array, from: number): void;

  /** Messages this rank takes in the collective in flight; set by start(). */
  protected get expectedMessages(): number {
    return this.expected;
  }

  /** A new collective: nothing taken yet, `expected` messages to take. */
  protected expect(expected: number): void {
    this.received = 0;
    this.expected = expected;
  }

  /** Adds (or copies) an admitted message into the layout's place, and counts it. */
  protected take(c: ActiveCollective, h: ChunkHeader, bytes: Uint8Array, add: boolean): void {
    if (flagsSaturated(h)) c.saturated = true;
    this.parts.payload.addOrCopy(bytes, c.buf, this.parts.layout.place, add);
    this.received++;
  }

  resume(_c: ActiveCollective): void {
    this.parts.pump();
  }

  linkFor(_phase: number, _step: number): RingLink | null {
    return this.link;
  }

  missingLinkDetail(): string {
    return this.noLinkDetail;
  }

  /** By default a queued message carries a chunk of the whole buffer. */
  locateSend(_phase: number, _step: number, chunk: number): void {
    const layout = this.parts.layout;
    layout.locateInRange(0, layout.length, chunk);
  }

  isDone(): boolean {
    return this.received === this.expected;
  }

  owedBy(from: number): number {
    return from === this.sender ? this.expected - this.received : 0;
  }

  stop(): void {}
}
