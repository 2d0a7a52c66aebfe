/**
 * What a receiver learns of one student's own values from the messages that student sent
 * in one gradient all-reduce: its ring neighbour gets the student's first segment
 * unsummed (reduce-scatter step 0), its halving-doubling partner the first range it
 * exchanges (or its whole buffer, for an "extra" rank beyond the largest power of two),
 * the hub the whole buffer. The messages are read as a receiver reads them: the header
 * says the phase, step and chunk; the buffer's length, which places the chunks, is
 * inferred from the sizes of the messages themselves, so a recording from real tabs
 * needs nothing else.
 */
import { ChunkLayout } from '../../shared/collectives/chunk-layout';
import { halfToFloat } from '../../shared/collectives/fp16';
import { halvingDoublingPlan } from '../../shared/collectives/halving-doubling';
import { HEADER_BYTES, PHASE_ALL_GATHER, PHASE_EXCHANGE, PHASE_HUB_UP, PHASE_REDUCE_SCATTER, WIRE_FP16, WIRE_FP32, WIRE_U32, readHeader, wireFloatBytes, type ChunkHeader, type WireCode } from '../../shared/collectives/wire';
import { SCALE } from '../../shared/secagg/fixed-point';

export type Vantage = 'ring neighbour' | 'halving-doubling partner' | 'hub';
export const VANTAGES: readonly Vantage[] = ['ring neighbour', 'halving-doubling partner', 'hub'];

interface Read {
  h: ChunkHeader;
  bytes: Uint8Array;
  floats: number;
}

const mod = (a: number, n: number) => ((a % n) + n) % n;

function read(messages: readonly Uint8Array[]): Read[] {
  return messages.map((bytes) => {
    const h: ChunkHeader = { phase: 0, ringStep: 0, tag: 0, wire: 0, flags: 0, generation: 0, run: 0, step: 0, chunk: 0 };
    if (!readHeader(bytes, h)) throw new RangeError('a message shorter than a header');
    return { h, bytes, floats: (bytes.byteLength - HEADER_BYTES) / wireFloatBytes(h.wire as WireCode) };
  });
}

/** The value a receiver reads: a float, a half, or a masked fixed-point word read as if it were a gradient. */
function valueAt(r: Read, i: number): number {
  const at = HEADER_BYTES;
  const view = new DataView(r.bytes.buffer, r.bytes.byteOffset);
  if (r.h.wire === WIRE_FP16) return halfToFloat(view.getUint16(at + 2 * i, true));
  if (r.h.wire === WIRE_U32) return view.getInt32(at + 4 * i, true) / SCALE;
  return view.getFloat32(at + 4 * i, true);
}

const sum = (rs: readonly Read[]) => rs.reduce((a, r) => a + r.floats, 0);

/** The buffer length, from what the student sent in the collective's messages of `vantage`. */
export function inferLength(messages: readonly Uint8Array[], vantage: Vantage, victim: number, n: number): number {
  const rs = read(messages);
  if (vantage === 'hub') return sum(rs.filter((r) => r.h.phase === PHASE_HUB_UP));
  if (vantage === 'ring neighbour') {
    // Reduce-scatter step k sends segment r-k, all-gather step k segment r+1-k: together every segment.
    const segment = new Map<number, number>();
    for (const r of rs) {
      if (r.h.phase !== PHASE_REDUCE_SCATTER && r.h.phase !== PHASE_ALL_GATHER) continue;
      const s = r.h.phase === PHASE_REDUCE_SCATTER ? mod(victim - r.h.ringStep, n) : mod(victim + 1 - r.h.ringStep, n);
      const key = s * 2 + (r.h.phase === PHASE_REDUCE_SCATTER ? 0 : 1);
      segment.set(key, (segment.get(key) ?? 0) + r.floats);
    }
    let length = 0;
    for (let s = 0; s < n; s++) length += segment.get(2 * s) ?? segment.get(2 * s + 1) ?? 0;
    return length;
  }
  // Halving-doubling: the length whose plan sends exactly what was sent, stage by stage.
  const sent = new Map<number, number>();
  for (const r of rs) if (r.h.phase === PHASE_EXCHANGE) sent.set(r.h.ringStep, (sent.get(r.h.ringStep) ?? 0) + r.floats);
  const total = [...sent.values()].reduce((a, b) => a + b, 0);
  for (let length = Math.floor(total / 2); length <= 2 * total + n; length++) {
    const plan = halvingDoublingPlan(victim, n, length);
    if (plan.stages.every((st, i) => (st.sendTo < 0 ? 0 : st.sendEnd - st.sendStart) === (sent.get(i) ?? 0))) return length;
  }
  throw new RangeError('no buffer length fits these halving-doubling messages');
}

/**
 * The student's own values that the receiver at `vantage` saw, placed in a buffer of the
 * collective's length (NaN where it saw none of the student's values alone), or null when
 * that receiver gets only sums of several students.
 */
export function ownValuesSeen(messages: readonly Uint8Array[], vantage: Vantage, victim: number, n: number, length = inferLength(messages, vantage, victim, n)): Float32Array | null {
  const rs = read(messages);
  const layout = new ChunkLayout();
  const wire = (rs[0]?.h.wire ?? WIRE_FP32) as WireCode;
  layout.reset(length, n, wire, 0);
  const seen = new Float32Array(length).fill(Number.NaN);
  let own: Read[];
  let place: (r: Read) => boolean;
  if (vantage === 'ring neighbour') {
    own = rs.filter((r) => r.h.phase === PHASE_REDUCE_SCATTER && r.h.ringStep === 0);
    place = (r) => layout.locateInSegment(victim, r.h.chunk);
  } else if (vantage === 'hub') {
    own = rs.filter((r) => r.h.phase === PHASE_HUB_UP);
    place = (r) => layout.locateInRange(0, length, r.h.chunk);
  } else {
    const plan = halvingDoublingPlan(victim, n, length);
    const first = plan.stages.findIndex((st) => st.sendTo >= 0);
    // A rank that took an extra rank's buffer first sends the two students' sum.
    if (first < 0 || plan.stages.slice(0, first).some((st) => st.recvFrom >= 0 && st.add)) return null;
    const st = plan.stages[first]!;
    own = rs.filter((r) => r.h.phase === PHASE_EXCHANGE && r.h.ringStep === first);
    place = (r) => layout.locateInRange(st.sendStart, st.sendEnd, r.h.chunk);
  }
  for (const r of own) {
    if (!place(r)) continue;
    const at = layout.place;
    // A masked collective's float tail lies elsewhere than one part would put it: read what the message holds.
    for (let i = 0; i < Math.min(at.length, r.floats); i++) seen[at.start + i] = valueAt(r, i);
  }
  return seen;
}
