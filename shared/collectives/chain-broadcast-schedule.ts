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
import { flagsSaturated } from './admission';
import type { ActiveCollective, EngineParts, Schedule } from './schedule';
import { PHASE_CHAIN, type ChunkHeader } from './wire';
import type { RingLink } from './collective';

/** Who sends and who receives: `from` holds the values, from+1 … `to` (mod N) receive them. */
export interface BroadcastChain {
  from: number;
  to: number;
}

const mod = (a: number, n: number): number => ((a % n) + n) % n;

/** Hops from `chain.from` to `rank` going right, and the chain's length in hops. */
export function chainPosition(rank: number, n: number, chain: BroadcastChain): { at: number; hops: number } {
  return { at: mod(rank - chain.from, n), hops: mod(chain.to - chain.from, n) };
}

export class ChainBroadcastSchedule implements Schedule {
  private received = 0;
  private expected = 0;
  /** This rank forwards what it receives (it is on the chain, before its end). */
  private forwards = false;
  private chain: BroadcastChain = { from: 0, to: 0 };

  constructor(
    private readonly parts: EngineParts,
    private readonly right: RingLink | null,
    private readonly left: number,
  ) {}

  /** The next collective's chain; set by the engine before start(). */
  setChain(chain: BroadcastChain): void {
    this.chain = chain;
  }

  start(c: ActiveCollective): void {
    const { rank, worldSize: n, layout, admission, queue } = this.parts;
    const { at, hops } = chainPosition(rank, n, this.chain);
    const chunks = layout.rangeChunks(0, c.buf.length);
    this.received = 0;
    this.expected = at >= 1 && at <= hops ? chunks : 0;
    this.forwards = at < hops;
    admission.resetSeen(chunks);
    if (at === 0 && hops > 0) for (let chunk = 0; chunk < chunks; chunk++) queue.push(PHASE_CHAIN, 0, chunk);
  }

  resume(_c: ActiveCollective): void {
    this.parts.pump();
  }

  receive(c: ActiveCollective, h: ChunkHeader, bytes: Uint8Array, from: number): void {
    const { layout, admission } = this.parts;
    if (!admission.phase(h, from, PHASE_CHAIN, PHASE_CHAIN, 1)) return;
    if (h.chunk >= this.expected || !layout.locateInRange(0, c.buf.length, h.chunk)) {
      admission.malformed(from, this.expected === 0 ? 'a broadcast chunk to a rank off the chain' : `chunk ${h.chunk} of a ${this.expected}-chunk broadcast`);
      return;
    }
    if (!admission.wire(h, from, layout.wire)) return;
    if (!admission.chunk(h, bytes, from, layout.place, h.chunk)) return;
    if (flagsSaturated(h)) c.saturated = true;
    this.parts.payload.addOrCopy(bytes, c.buf, layout.place, false);
    if (this.forwards) this.parts.queue.push(PHASE_CHAIN, 0, h.chunk);
    this.received++;
    this.parts.pump();
  }

  linkFor(_phase: number, _step: number): RingLink | null {
    return this.right;
  }

  missingLinkDetail(): string {
    return 'no right neighbour';
  }

  locateSend(_phase: number, _step: number, chunk: number): void {
    const layout = this.parts.layout;
    layout.locateInRange(0, layout.length, chunk);
  }

  isDone(): boolean {
    return this.received === this.expected;
  }

  owedBy(from: number): number {
    return from === this.left ? this.expected - this.received : 0;
  }

  stop(): void {}
}
