/**
 * An epoch's roster as the ring agrees it and carries it (own-data.ts explains the line):
 * each device's place on the epoch's line, and the roster's entries as exact float32
 * integers in the agreement's sum and the hand-over's state, checked when peers send them.
 */
import { MAX_OWN_EXAMPLES_PER_DEVICE, MAX_OWN_SEQ, MAX_ROOM_MEMBERS } from '../protocol';
import { WebringError } from '../protocol/errors';
import type { EpochRoster, RosterDevice } from './data-source';

/** Floats each rank contributes per agreement: its key as two 16-bit words, its count, its last seq + 1. */
export const RANK_FLOATS = 4;
const WORD = 0x10000;
/** Floats of the roster in the hand-over's state: epoch + 1 (0: none), devices, then RANK_FLOATS per device. */
export const ROSTER_STATE_FLOATS = 2 + MAX_ROOM_MEMBERS * RANK_FLOATS;

/** The epoch's line: where each device's examples sit, and cᵢ(O) (own-data.ts). */
export class EpochLine {
  /** Each device's places on the line, ascending. */
  private readonly placesOf: Uint32Array[];
  readonly places: number;

  /** Built once per epoch: a merge of the devices' evenly spread examples, T × devices comparisons. */
  constructor(readonly roster: EpochRoster) {
    const counts = roster.devices.map((d) => d.examples);
    this.placesOf = counts.map((n) => new Uint32Array(n));
    this.places = counts.reduce((a, b) => a + b, 0);
    const next = counts.map(() => 0);
    for (let place = 0; place < this.places; place++) {
      // The device whose next example sits earliest: (2k + 1) / 2n compared exactly in integers.
      let best = -1;
      for (let i = 0; i < counts.length; i++) {
        if (next[i]! >= counts[i]!) continue;
        if (best < 0 || (2 * next[i]! + 1) * counts[best]! < (2 * next[best]! + 1) * counts[i]!) best = i;
      }
      this.placesOf[best]![next[best]!++] = place;
    }
  }

  /** cᵢ(O): how many of device `index`'s places are among the first `placesConsumed`. */
  consumed(index: number, placesConsumed: number): number {
    const places = this.placesOf[index]!;
    let lo = 0;
    let hi = places.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (places[mid]! < placesConsumed) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}

/** A roster entry (or a rank's holding) as RANK_FLOATS float32 integers from `at`: the key in two 16-bit words, and the last seq + 1. */
export function writeEntry(out: Float32Array, at: number, e: RosterDevice): void {
  out[at] = Math.floor(e.key / WORD);
  out[at + 1] = e.key % WORD;
  out[at + 2] = e.examples;
  out[at + 3] = e.lastSeq + 1;
}

function readEntry(from: Float32Array, at: number): RosterDevice {
  return { key: from[at]! * WORD + from[at + 1]!, examples: from[at + 2]!, lastSeq: from[at + 3]! - 1 };
}

export const isIntegerIn = (v: number, min: number, max: number): boolean => Number.isInteger(v) && v >= min && v <= max;

/**
 * A roster entry as peers sent it (the agreement's sum, the hand-over's state), checked
 * before anything is built from it: key words of 16 bits, a count and a last seq + 1 within
 * what a store can hold (own-examples.ts), as the checkpoint schema checks a stored roster.
 * Honest peers never send anything else; a count of 1e10 or −5 would otherwise throw a
 * RangeError out of EpochLine on every replica. ERR_BAD_DATA, like a non-finite sum: every
 * replica reads the same floats, so every replica refuses them alike, and the sum cannot
 * say which peer wrote them.
 */
export function readPeerEntry(from: Float32Array, at: number, what: string): RosterDevice {
  const [hi, lo, examples, seqPlusOne] = [from[at]!, from[at + 1]!, from[at + 2]!, from[at + 3]!];
  if (!isIntegerIn(hi, 0, WORD - 1) || !isIntegerIn(lo, 0, WORD - 1) || !isIntegerIn(examples, 0, MAX_OWN_SEQ + 1) || !isIntegerIn(seqPlusOne, 0, MAX_OWN_SEQ + 1)) {
    throw new WebringError('ERR_BAD_DATA', `${what}: [${hi}, ${lo}, ${examples}, ${seqPlusOne}] is no roster entry (16-bit key words, at most ${MAX_OWN_SEQ + 1} examples)`);
  }
  return readEntry(from, at);
}

/** The line's positions travel as exact float32 integers: a roster whose devices hold more examples in all is refused. */
export function checkRosterTotal(devices: readonly RosterDevice[], what: string): void {
  const total = devices.reduce((sum, d) => sum + d.examples, 0);
  if (total > MAX_OWN_EXAMPLES_PER_DEVICE) throw new WebringError('ERR_BAD_DATA', `${what}: ${total} examples in all, more than the ${MAX_OWN_EXAMPLES_PER_DEVICE} a line can place`);
}
