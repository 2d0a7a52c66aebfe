/**
 * The rank's side of the hub collective: send the whole buffer to the hub (PHASE_HUB_UP),
 * then take the sum the hub sends back (PHASE_HUB_DOWN) in place of it. The hub sums every
 * range once, in rank order (hub-reducer.ts), and every rank copies the same bytes, so the
 * replicas end bit-identical in either wire format: on the fp16 wire the sum comes back as
 * halves, and every rank decodes the same halves.
 *
 * Each rank's link carries B up and B down, whatever N is: on one shared medium that is
 * half the airtime of the ring, where every frame between two peers crosses the air twice;
 * on independent ports the hub's own port carries N·B each way (choice.ts weighs this).
 */
import { flagsSaturated } from './admission';
import type { ActiveCollective, EngineParts, Schedule } from './schedule';
import { PHASE_HUB_DOWN, PHASE_HUB_UP, type ChunkHeader } from './wire';
import type { RingLink } from './collective';
import { HUB_RANK } from './topology';

export class HubSchedule implements Schedule {
  private received = 0;
  private expected = 0;

  constructor(
    private readonly parts: EngineParts,
    private readonly hub: RingLink | null,
  ) {}

  start(c: ActiveCollective): void {
    const { layout, admission, queue } = this.parts;
    this.received = 0;
    this.expected = layout.rangeChunks(0, c.buf.length);
    admission.resetSeen(this.expected);
    for (let chunk = 0; chunk < this.expected; chunk++) queue.push(PHASE_HUB_UP, 0, chunk);
  }

  resume(_c: ActiveCollective): void {
    this.parts.pump();
  }

  receive(c: ActiveCollective, h: ChunkHeader, bytes: Uint8Array, from: number): void {
    const { layout, admission } = this.parts;
    if (!admission.phase(h, from, PHASE_HUB_DOWN, PHASE_HUB_DOWN, 1)) return;
    if (h.chunk >= this.expected || !layout.locateInRange(0, c.buf.length, h.chunk)) {
      admission.malformed(from, `chunk ${h.chunk} of a ${this.expected}-chunk buffer`);
      return;
    }
    // The hub's messages name their own payload's format (an fp16 collective's exact tail is float32).
    if (!admission.wire(h, from, layout.place.wire)) return;
    if (!admission.chunk(h, bytes, from, layout.place, h.chunk)) return;
    if (flagsSaturated(h)) c.saturated = true;
    this.parts.payload.addOrCopy(bytes, c.buf, layout.place, false);
    this.received++;
    this.parts.pump();
  }

  linkFor(_phase: number, _step: number): RingLink | null {
    return this.hub;
  }

  missingLinkDetail(): string {
    return 'no link to the hub';
  }

  locateSend(_phase: number, _step: number, chunk: number): void {
    const layout = this.parts.layout;
    layout.locateInRange(0, layout.length, chunk);
  }

  isDone(): boolean {
    return this.received === this.expected;
  }

  /** The hub sends the sums in chunk order over one ordered channel, one collective after another. */
  owedBy(from: number): number {
    return from === HUB_RANK ? this.expected - this.received : 0;
  }

  stop(): void {}
}
