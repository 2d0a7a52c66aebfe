/**
 * Who needs the chief's state at the start of a generation, and who sends it.
 *
 * Every replica writes its fingerprint (position, owed evaluation, stop, whether it holds an
 * optimizer state of its own, weights hash) into
 * its own slot of a buffer of N slots; one small all-reduce of that buffer gives every
 * replica every fingerprint, exactly (each slot is one replica's values plus zeros). The
 * replicas that differ from rank 0 need the state. It is sent along a chain of the ring
 * (chain-broadcast-schedule.ts) from the rank just before the first of them, which agrees
 * with rank 0 because the first differing rank is the lowest: a joiner appended at the end
 * of the ring is served by its left neighbour over one link, a drifted replica by the rank
 * before it, and the survivors of a leave, who agree, send nothing at all.
 */
import type { BroadcastChain } from '../collectives/collective';

const FP_STEP = 0;
const FP_EPOCH = 1;
const FP_OFFSET = 2;
const FP_PENDING_EVAL = 3;
const FP_STOPPED = 4;
const FP_OWN_STATE = 5;
const FP_FINISHING = 6;
const FP_HASH = 7;
/** The 64-bit weights hash as 16-bit words: integers a float32 holds exactly. */
const HASH_WORDS = 4;
const HEX_PER_WORD = 4;
export const FINGERPRINT_FLOATS = FP_HASH + HASH_WORDS;

export interface Fingerprint {
  step: number;
  epoch: number;
  offset: number;
  /** The epoch whose evaluation is owed, or null. */
  pendingEvaluation: number | null;
  stopped: boolean;
  /**
   * The replica's optimizer state is its own, not the class's: a joiner that rehearsed a
   * step (trainer.ts rehearse) holds its weights unchanged but Adam's moments moved, which
   * the weights hash cannot see. Admitted at step 0 (a secure ring of two that held for a
   * third), its position and weights would match rank 0's, and it must still take the state.
   */
  ownState: boolean;
  /**
   * Steps of the round of local steps this replica trained and still owes the sum of, 0 for
   * none (run-position.ts finishing): the survivors of a lost member agree on it, and a
   * replica that does not takes the state, so every rank finishes the same round.
   */
  finishingSteps: number;
  /** 16 hex digits (shared/util/weights-hash.ts). */
  weightsHash: string;
}

/** Writes `fp` into slot `rank` of `buf` (N slots of FINGERPRINT_FLOATS); the caller zeroed the rest. */
export function writeFingerprint(buf: Float32Array, rank: number, fp: Fingerprint): void {
  const at = rank * FINGERPRINT_FLOATS;
  buf[at + FP_STEP] = fp.step;
  buf[at + FP_EPOCH] = fp.epoch;
  buf[at + FP_OFFSET] = fp.offset;
  buf[at + FP_PENDING_EVAL] = fp.pendingEvaluation === null ? 0 : fp.pendingEvaluation + 1;
  buf[at + FP_STOPPED] = fp.stopped ? 1 : 0;
  buf[at + FP_OWN_STATE] = fp.ownState ? 1 : 0;
  buf[at + FP_FINISHING] = fp.finishingSteps;
  for (let w = 0; w < HASH_WORDS; w++) buf[at + FP_HASH + w] = parseInt(fp.weightsHash.slice(w * HEX_PER_WORD, (w + 1) * HEX_PER_WORD), 16);
}

/** Rank `rank`'s data cursor, read back from its fingerprint. */
export function fingerprintCursor(buf: Float32Array, rank: number): { epoch: number; offset: number } {
  const at = rank * FINGERPRINT_FLOATS;
  return { epoch: buf[at + FP_EPOCH]!, offset: buf[at + FP_OFFSET]! };
}

/** The ranks whose fingerprint differs from rank 0's, in rank order. */
export function ranksBehind(buf: Float32Array, worldSize: number): number[] {
  const out: number[] = [];
  for (let r = 1; r < worldSize; r++) {
    const at = r * FINGERPRINT_FLOATS;
    for (let i = 0; i < FINGERPRINT_FLOATS; i++) {
      if (buf[at + i] !== buf[i]) {
        out.push(r);
        break;
      }
    }
  }
  return out;
}

/**
 * The chain that brings every rank in `behind` (ascending, not containing 0) to rank 0's
 * state: from the rank before the first of them to the last of them. Ranks in between that
 * already agree receive the same values again. Null when nobody is behind.
 */
export function handOverChain(behind: readonly number[]): BroadcastChain | null {
  if (behind.length === 0) return null;
  return { from: behind[0]! - 1, to: behind.at(-1)! };
}

/**
 * The first rank to sit the step after a hand-over out, when the ranks that took it are
 * the last of the ring (joiners are appended there): the chain's sender, the rank just
 * before them, sits out with them, because a device that computes while it sends starves
 * its own sending (measured in the lab: 1.2 MB took 2.6 s from a 0.2-core laptop that was
 * computing, against 1.3 s from an idle one). Rank 0 always trains, so a step never has
 * no examples. Null, and everyone trains, for a drifted replica in the middle of the ring:
 * resyncs are rare, and the ranks after it would lose their share too.
 */
export function sitOutFrom(behind: readonly number[], worldSize: number): number | null {
  const first = behind[0];
  if (first === undefined || behind.length !== worldSize - first) return null;
  return Math.max(1, first - 1);
}
