/**
 * Decisions the replicas must take together, carried in the tail of every step's gradient
 * all-reduce at no extra round trip. Every replica reads the same reduced floats, so every
 * replica reaches the same decision; a value that differs between replicas shows up as a
 * non-zero variance, which a plain sum would hide.
 *
 * All voted values are small integers, so the float32 sums (and sums of squares) are exact.
 */
import type { StepFacts, TailSection } from './step-ledger';

/** Values at most this, so that N·v² stays an exact float32 integer for N ≤ 32. */
const MAX_VOTE = 511;

/** Two slots: Σv and Σv². */
export const VOTE_FLOATS = 2;

/** Writes this replica's vote (0 = no). */
export function writeVote(buf: Float32Array, at: number, vote: number): void {
  buf[at] = vote;
  buf[at + 1] = vote * vote;
}

/** True when every replica voted the same non-zero value. */
export function unanimous(buf: Float32Array, at: number, worldSize: number): boolean {
  const sum = buf[at]!;
  const sumSq = buf[at + 1]!;
  return sum > 0 && worldSize * sumSq - sum * sum === 0;
}

/** True when some replica voted a different value from another (all zeros agree). */
export function disagreement(buf: Float32Array, at: number, worldSize: number): boolean {
  return worldSize * buf[at + 1]! - buf[at]! * buf[at]! !== 0;
}

/** A counter's vote (a generation, a step): equal for equal values, never 0. */
export function counterVote(value: number): number {
  return (value % MAX_VOTE) + 1;
}

/** Bytes of the weights hash compared around the ring: all 8 of the 64-bit hash. */
export const HASH_VOTE_BYTES = 8;
export const HASH_VOTE_FLOATS = HASH_VOTE_BYTES * VOTE_FLOATS;

/** Writes the first bytes of a 16-hex-digit weights hash as votes. */
export function writeHashVotes(buf: Float32Array, at: number, hash: string): void {
  for (let b = 0; b < HASH_VOTE_BYTES; b++) writeVote(buf, at + b * VOTE_FLOATS, parseInt(hash.slice(2 * b, 2 * b + 2), 16));
}

export function hashesDiffer(buf: Float32Array, at: number, worldSize: number): boolean {
  for (let b = 0; b < HASH_VOTE_BYTES; b++) if (disagreement(buf, at + b * VOTE_FLOATS, worldSize)) return true;
  return false;
}

/** Where the votes lie in their section: stop, pause, the admission vote, the hash votes. */
const VOTES_STOP = 0;
const VOTES_PAUSE = 1;
const VOTES_ADMIT = 2;
const VOTES_HASH = VOTES_ADMIT + VOTE_FLOATS;

/**
 * The step's votes, the tail's section for them: stop and pause (any replica's flag), the
 * generation every replica is ready to switch to, and on a step that compares them the
 * weights hashes.
 */
export class StepVotes implements TailSection {
  stop = false;
  pause = false;
  /** Every replica was ready for the same pending generation: switch to it now. */
  admit = false;
  /** The step compared the weights hashes and they differed. */
  hashMismatch = false;

  floats(): number {
    return VOTES_HASH + HASH_VOTE_FLOATS;
  }

  write(view: Float32Array, facts: StepFacts): void {
    const { options, hash } = facts;
    view[VOTES_STOP] = options.requestStop ? 1 : 0;
    view[VOTES_PAUSE] = options.requestPause ? 1 : 0;
    const readyFor = typeof options.readyFor === 'function' ? options.readyFor() : options.readyFor;
    writeVote(view, VOTES_ADMIT, readyFor == null ? 0 : counterVote(readyFor));
    if (hash) writeHashVotes(view, VOTES_HASH, hash);
  }

  read(view: Float32Array, facts: StepFacts): void {
    const n = facts.worldSize;
    this.stop = view[VOTES_STOP]! > 0;
    this.pause = view[VOTES_PAUSE]! > 0;
    this.admit = unanimous(view, VOTES_ADMIT, n);
    this.hashMismatch = facts.hash !== null && hashesDiffer(view, VOTES_HASH, n);
  }
}
