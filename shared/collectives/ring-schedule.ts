/**
 * The ring schedule (reduce-scatter, then all-gather), pipelined at chunk granularity: a
 * chunk received in ring step k is added and forwarded in ring step k+1 at once, without
 * waiting for the rest of its segment. Every peer sends 2(N-1)/N of the buffer, the
 * bandwidth-optimal amount. Each segment is summed exactly once, in ring order, and then
 * copied, so every replica ends with bit-identical results.
 */
import { roundToHalves } from './fp16';
import { noteOverflows, type ActiveCollective, type EngineParts } from './schedule';
import { CountingSchedule } from './counting-schedule';
import { PHASE_ALL_GATHER, PHASE_REDUCE_SCATTER, WIRE_FP16, type ChunkHeader } from './wire';
import type { RingLink } from './collective';

const mod = (a: number, n: number): number => ((a % n) + n) % n;

export class RingSchedule extends CountingSchedule {
  /** Chunks per (phase, ring step) in the arrival marks: segment 0 is never shorter than another. */
  private seenStride = 0;

  constructor(parts: EngineParts, right: RingLink | null, left: number) {
    super(parts, right, 'no right neighbour', left);
  }

  start(_c: ActiveCollective): void {
    const { rank: r, worldSize: n, layout, queue } = this.parts;
    this.seenStride = layout.segmentChunks(0);
    this.parts.admission.resetSeen(2 * (n - 1) * this.seenStride);
    let expected = 0;
    for (let k = 0; k < n - 1; k++) {
      expected += layout.segmentChunks(mod(r - k - 1, n)) + layout.segmentChunks(mod(r - k, n));
    }
    this.expect(expected);
    const own = layout.segmentChunks(r);
    for (let c = 0; c < own; c++) queue.push(PHASE_REDUCE_SCATTER, 0, c);
  }

  receive(c: ActiveCollective, h: ChunkHeader, bytes: Uint8Array, from: number): void {
    const { rank, worldSize: n, layout, admission } = this.parts;
    if (!admission.phase(h, from, PHASE_REDUCE_SCATTER, PHASE_ALL_GATHER, n - 1)) return;
    const reduce = h.phase === PHASE_REDUCE_SCATTER;
    // Reduce-scatter step k delivers segment (r-k-1); all-gather step k delivers segment (r-k).
    const s = reduce ? mod(rank - h.ringStep - 1, n) : mod(rank - h.ringStep, n);
    if (!admission.wire(h, from, layout.wire)) return;
    const at = layout.place;
    if (h.chunk >= this.seenStride || !layout.locateInSegment(s, h.chunk)) {
      admission.malformed(from, `chunk ${h.chunk}, beyond segment ${s}`);
      return;
    }
    const seenAt = ((h.phase - 1) * (n - 1) + h.ringStep) * this.seenStride + h.chunk;
    if (!admission.chunk(h, bytes, from, at, seenAt)) return;
    const last = h.ringStep === n - 2;
    this.take(c, h, bytes, reduce);
    // The owner keeps what it will send, so that it ends equal to every other rank.
    if (reduce && last && at.wire === WIRE_FP16) noteOverflows(this.parts.stats, c, roundToHalves(c.buf, at.start, at.length));
    const queue = this.parts.queue;
    if (reduce) {
      // The partial sum moves on at once (pipelining). After the last reduce step this
      // chunk is final and becomes the first all-gather message.
      if (!last) queue.push(PHASE_REDUCE_SCATTER, h.ringStep + 1, h.chunk);
      else queue.push(PHASE_ALL_GATHER, 0, h.chunk);
    } else if (!last) {
      queue.push(PHASE_ALL_GATHER, h.ringStep + 1, h.chunk);
    }
    this.parts.pump();
  }

  override locateSend(phase: number, ringStep: number, chunk: number): void {
    const { rank, worldSize: n } = this.parts;
    // Reduce-scatter step k sends segment (r-k); all-gather step k sends segment (r+1-k).
    const s = phase === PHASE_REDUCE_SCATTER ? mod(rank - ringStep, n) : mod(rank + 1 - ringStep, n);
    this.parts.layout.locateInSegment(s, chunk);
  }
}
