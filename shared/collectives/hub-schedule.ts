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
import type { ActiveCollective, EngineParts } from './schedule';
import { CountingSchedule } from './counting-schedule';
import { PHASE_HUB_DOWN, PHASE_HUB_UP, type ChunkHeader } from './wire';
import type { RingLink } from './collective';
import { HUB_RANK } from '../protocol';

export class HubSchedule extends CountingSchedule {
  constructor(parts: EngineParts, hub: RingLink | null) {
    // What is owed comes from the hub: it sends the sums in chunk order over one ordered
    // channel, one collective after another.
    super(parts, hub, 'no link to the hub', HUB_RANK);
  }

  start(c: ActiveCollective): void {
    const { layout, admission, queue } = this.parts;
    const chunks = layout.rangeChunks(0, c.buf.length);
    this.expect(chunks);
    admission.resetSeen(chunks);
    for (let chunk = 0; chunk < chunks; chunk++) queue.push(PHASE_HUB_UP, 0, chunk);
  }

  receive(c: ActiveCollective, h: ChunkHeader, bytes: Uint8Array, from: number): void {
    const { layout, admission } = this.parts;
    if (!admission.phase(h, from, PHASE_HUB_DOWN, PHASE_HUB_DOWN, 1)) return;
    const expected = this.expectedMessages;
    if (h.chunk >= expected || !layout.locateInRange(0, c.buf.length, h.chunk)) {
      admission.malformed(from, `chunk ${h.chunk} of a ${expected}-chunk buffer`);
      return;
    }
    // The hub's messages name their own payload's format (an fp16 collective's exact tail is float32).
    if (!admission.wire(h, from, layout.place.wire)) return;
    if (!admission.chunk(h, bytes, from, layout.place, h.chunk)) return;
    this.take(c, h, bytes, false);
    this.parts.pump();
  }
}
