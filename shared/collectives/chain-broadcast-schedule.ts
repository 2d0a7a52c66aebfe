/**
 * A chain broadcast: rank `from` holds the values, and ranks from+1, …, `to` (rightwards
 * around the ring) receive them. Each receiver copies a chunk as it arrives and forwards it
 * at once, so the chain is pipelined at chunk granularity: it takes about B / β plus one
 * chunk's time per hop, where an all-reduce against zeros takes 2(N-1)/N · B / β. Ranks off
 * the chain take no part and finish at once.
 *
 * It uses only the ring's own links (each rank sends to its right neighbour), so a joiner
 * appended at the end of the ring is served by its left neighbour over one link, and a
 * drifted replica in the middle by the rank before it. The chain's length is carried in
 * the arrival marks: a message to a rank off the chain is malformed.
 *
 * Always float32: the hand-over it carries must arrive bit-exact.
 */
import type { ActiveCollective, EngineParts } from './schedule';
import { CountingSchedule } from './counting-schedule';
import { PHASE_CHAIN, type ChunkHeader } from './wire';
import type { BroadcastChain, RingLink } from './collective';

const mod = (a: number, n: number): number => ((a % n) + n) % n;

/** Hops from `chain.from` to `rank` going right, and the chain's length in hops. */
export function chainPosition(rank: number, n: number, chain: BroadcastChain): { at: number; hops: number } {
  return { at: mod(rank - chain.from, n), hops: mod(chain.to - chain.from, n) };
}

export class ChainBroadcastSchedule extends CountingSchedule {
  /** This rank forwards what it receives (it is on the chain, before its end). */
  private forwards = false;
  private chain: BroadcastChain = { from: 0, to: 0 };

  constructor(parts: EngineParts, right: RingLink | null, left: number) {
    super(parts, right, 'no right neighbour', left);
  }

  /** The next collective's chain; set by the engine before start(). */
  setChain(chain: BroadcastChain): void {
    this.chain = chain;
  }

  start(c: ActiveCollective): void {
    const { rank, worldSize: n, layout, admission, queue } = this.parts;
    const { at, hops } = chainPosition(rank, n, this.chain);
    const chunks = layout.rangeChunks(0, c.buf.length);
    this.expect(at >= 1 && at <= hops ? chunks : 0);
    this.forwards = at < hops;
    admission.resetSeen(chunks);
    if (at === 0 && hops > 0) for (let chunk = 0; chunk < chunks; chunk++) queue.push(PHASE_CHAIN, 0, chunk);
  }

  receive(c: ActiveCollective, h: ChunkHeader, bytes: Uint8Array, from: number): void {
    const { layout, admission } = this.parts;
    if (!admission.phase(h, from, PHASE_CHAIN, PHASE_CHAIN, 1)) return;
    const expected = this.expectedMessages;
    if (h.chunk >= expected || !layout.locateInRange(0, c.buf.length, h.chunk)) {
      admission.malformed(from, expected === 0 ? 'a broadcast chunk to a rank off the chain' : `chunk ${h.chunk} of a ${expected}-chunk broadcast`);
      return;
    }
    if (!admission.wire(h, from, layout.wire)) return;
    if (!admission.chunk(h, bytes, from, layout.place, h.chunk)) return;
    this.take(c, h, bytes, false);
    if (this.forwards) this.parts.queue.push(PHASE_CHAIN, 0, h.chunk);
    this.parts.pump();
  }
}
