/**
 * Admission of peer messages. A message is checked whole before any of its values is
 * added: header (phase, ring step or stage, tag, wire format, generation), chunk index,
 * exact length, that its chunk has not already arrived in this collective, and every value
 * finite. An honest sender never frames a message that fails a check of its own
 * generation (see chunk-writer.ts), so such a message fails the collective at once with a
 * PeerMisbehavedError naming the sender's rank (the worker asks the server to evict it).
 * Messages of an older generation or an earlier collective are dropped and counted: honest
 * peers send those around a generation change.
 */
import { WebringError } from '../protocol/errors';
import { HUB_RANK, type Misbehaviour } from '../protocol';
import { HALF_EXPONENT_BITS } from './fp16';
import { TAG_SPACE, type CollectiveStats } from './collective';
import { FLAG_SATURATED, HEADER_BYTES, PHASE_ALL_GATHER, PHASE_CHAIN, PHASE_EXCHANGE, PHASE_HUB_DOWN, PHASE_REDUCE_SCATTER, WIRE_FP16, isWireCode, isWordWire, readHeader, wireFloatBytes, type ChunkHeader, type WireCode } from './wire';
import type { ChunkPlace } from './chunk-layout';
import type { PayloadReader } from './payload';

/**
 * A collective failed because a peer sent what no honest peer sends.
 * `rank` is that peer's rank in the collective's generation.
 */
export class PeerMisbehavedError extends WebringError {
  readonly rank: number;
  readonly misbehaviour: Misbehaviour;

  constructor(rank: number, misbehaviour: Misbehaviour, message: string) {
    super('ERR_PEER_MISBEHAVED', message);
    this.rank = rank;
    this.misbehaviour = misbehaviour;
  }
}

/** Fails the generation's collectives, naming `from`; bound once by the engine. */
export type RejectSender = (from: number, misbehaviour: Misbehaviour, detail: string) => void;

export interface AdmissionOptions {
  generation: number;
  /** The left neighbour: the only rank that sends ring messages to this one. */
  left: number;
  /** Every rank that sends to this one in some schedule. */
  senders: ReadonlySet<number>;
  stats: CollectiveStats;
  payload: PayloadReader;
  reject: RejectSender;
}

/**
 * The checks, in the order a message meets them. Each returns false when the message is
 * dropped or its sender rejected (counted either way); the caller then stops.
 */
export class Admission {
  private readonly generation: number;
  private readonly left: number;
  private readonly senders: ReadonlySet<number>;
  private readonly stats: CollectiveStats;
  private readonly payload: PayloadReader;
  private readonly reject: RejectSender;
  /** Which chunks of the collective in flight have arrived (a second copy is a replay), reused. */
  private seen = new Uint8Array(0);

  constructor(options: AdmissionOptions) {
    this.generation = options.generation;
    this.left = options.left;
    this.senders = options.senders;
    this.stats = options.stats;
    this.payload = options.payload;
    this.reject = options.reject;
  }

  /**
   * Reads the header into `h` and checks what needs no collective: a known phase, the
   * generation, that `from` sends to this rank at all, and that tag and wire are in range.
   */
  header(bytes: Uint8Array, h: ChunkHeader, from: number): boolean {
    if (!readHeader(bytes, h) || (h.phase !== PHASE_REDUCE_SCATTER && h.phase !== PHASE_ALL_GATHER && h.phase !== PHASE_EXCHANGE && h.phase !== PHASE_HUB_DOWN && h.phase !== PHASE_CHAIN)) {
      this.malformed(from, `a ${bytes.byteLength}-byte message with no valid header`);
      return false;
    }
    if (h.generation < this.generation) {
      // Sent before the sender applied this generation: honest around every change.
      this.stats.droppedStaleGeneration++;
      return false;
    }
    if (!this.senders.has(from)) {
      this.stats.droppedWrongSender++;
      return false;
    }
    if (h.generation > this.generation) {
      // The network holds a newer generation's messages back until it is applied here.
      this.reject(from, 'generation', `a message of generation ${h.generation} into generation ${this.generation}`);
      return false;
    }
    if ((h.phase === PHASE_REDUCE_SCATTER || h.phase === PHASE_ALL_GATHER || h.phase === PHASE_CHAIN) && from !== this.left) {
      this.reject(from, 'malformed', `a ring message, but it is not this rank's left neighbour`);
      return false;
    }
    if ((h.phase === PHASE_HUB_DOWN) !== (from === HUB_RANK)) {
      this.reject(from, 'malformed', from === HUB_RANK ? `phase ${h.phase} from the hub, which only sends sums` : 'a hub sum, but it is not the hub');
      return false;
    }
    if (h.tag >= TAG_SPACE || !isWireCode(h.wire)) {
      this.malformed(from, `tag ${h.tag}, wire ${h.wire}`);
      return false;
    }
    return true;
  }

  /**
   * The phase and step (ring step or exchange stage) must be ones the collective's algorithm
   * has: the same rejection whichever algorithm runs.
   */
  phase(h: ChunkHeader, from: number, firstPhase: number, lastPhase: number, steps: number): boolean {
    if (h.phase < firstPhase || h.phase > lastPhase || h.ringStep >= steps) {
      this.malformed(from, `phase ${h.phase} step ${h.ringStep}, where this collective has phases ${firstPhase}..${lastPhase} of ${steps} step(s)`);
      return false;
    }
    return true;
  }

  /** An exchange must come from the partner its stage names. */
  partner(h: ChunkHeader, from: number, partner: number): boolean {
    if (from !== partner) {
      this.stats.droppedWrongSender++;
      this.reject(from, 'malformed', `an exchange of stage ${h.ringStep}, whose partner is rank ${partner}`);
      return false;
    }
    return true;
  }

  /** Every rank runs a collective in the same format: values of another cannot be summed. */
  wire(h: ChunkHeader, from: number, wire: number): boolean {
    if (h.wire !== wire) {
      this.stats.droppedWireMismatch++;
      this.reject(from, 'malformed', `wire format ${h.wire} into a collective of format ${wire}`);
      return false;
    }
    return true;
  }

  /** A message that no honest sender frames: counted, and its sender rejected. */
  malformed(from: number, detail: string): void {
    this.stats.droppedMalformed++;
    this.reject(from, 'malformed', detail);
  }

  /** Sizes and clears the arrival marks for a new collective (grown only when a larger one needs it). */
  resetSeen(slots: number): void {
    if (this.seen.length < slots) this.seen = new Uint8Array(slots);
    else this.seen.fill(0, 0, slots);
  }

  /**
   * The checks that need the chunk's place `at`: exact length, first arrival (slot
   * `seenAt`), every value finite. All of them pass before a single value is added.
   */
  chunk(h: ChunkHeader, bytes: Uint8Array, from: number, at: ChunkPlace, seenAt: number): boolean {
    const { length: len, wire } = at;
    const expectedBytes = HEADER_BYTES + len * wireFloatBytes(wire);
    if (bytes.byteLength !== expectedBytes) {
      this.stats.droppedMalformed++;
      this.reject(from, 'length', `${bytes.byteLength} bytes where chunk ${h.chunk} takes ${expectedBytes}`);
      return false;
    }
    if (this.seen[seenAt] === 1) {
      this.reject(from, 'duplicate', `chunk ${h.chunk} of phase ${h.phase} step ${h.ringStep} a second time`);
      return false;
    }
    const bad = firstNonFinite(this.payload, bytes, len, wire);
    if (bad >= 0) {
      this.reject(from, 'non-finite', `a non-finite value at element ${bad} of chunk ${h.chunk}`);
      return false;
    }
    this.seen[seenAt] = 1;
    return true;
  }
}

/** True when the sender flagged its collective as saturated (see chunk-writer.ts). */
export const flagsSaturated = (h: ChunkHeader): boolean => (h.flags & FLAG_SATURATED) !== 0;

/** Index of the first value of a payload of `len` values in `wire` that is ±Infinity or NaN, or -1 (words are never). */
export function firstNonFinite(payload: PayloadReader, bytes: Uint8Array, len: number, wire: number): number {
  if (isWordWire(wire as WireCode)) return -1;
  return wire === WIRE_FP16 ? firstNonFiniteHalf(payload.halves(bytes, len), len) : firstNonFiniteFloat(payload.floats(bytes, len), len);
}

/** Index of the first value that is ±Infinity or NaN, or -1. */
export function firstNonFiniteFloat(values: Float32Array, length: number): number {
  for (let i = 0; i < length; i++) {
    const v = values[i]!;
    if (v - v !== 0) return i;
  }
  return -1;
}

/** The same for halves: all exponent bits set. */
export function firstNonFiniteHalf(halves: Uint16Array, length: number): number {
  for (let i = 0; i < length; i++) if ((halves[i]! & HALF_EXPONENT_BITS) === HALF_EXPONENT_BITS) return i;
  return -1;
}
