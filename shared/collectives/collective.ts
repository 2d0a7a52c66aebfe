/**
 * What the rest of the project sees of a collective: the all-reduce the trainer and the
 * link measurement call, the broadcast of the state hand-over, and the engine-facing part the network and the worker drive
 * (run, generation, abort, the message feed, statistics). Implemented by RingAllReduce.
 */
import { MAX_RUN, type Algorithm } from '../protocol';
import type { CollectiveWire } from './wire';
import type { WebringError } from '../protocol/errors';

/**
 * Which collective of a step a message belongs to. Collectives run in (step, tag) order, so
 * the values follow the order within one step number: the check whether the replicas
 * already agree, the chief's state hand-over, the evaluation that closes the previous
 * step's epoch, the link probes, then the step's gradients.
 */
export const COLLECTIVE_TAG = {
  agree: 0,
  sync: 1,
  evaluation: 2,
  // Link measurements (choice.ts), just before the step's gradients.
  probeBarrier: 3,
  probeRingLatency: 4,
  probeHdLatency: 5,
  probeHubLatency: 6,
  probeRingBandwidth: 7,
  probeHdBandwidth: 8,
  probeHubBandwidth: 9,
  probeRingBandwidthAgain: 10,
  probeHdBandwidthAgain: 11,
  probeHubBandwidthAgain: 12,
  // A quantized sum (quantized-sum.ts) first sums each block's largest magnitude, then the words.
  gradientScales: 13,
  gradients: 14,
  // PowerSGD's second sum of a step (power-sgd.ts): the factors Q' after the gradients' P,
  // each after its own scales when quantized.
  gradientFactorScales: 15,
  gradientFactors: 16,
} as const;
export type CollectiveTag = (typeof COLLECTIVE_TAG)[keyof typeof COLLECTIVE_TAG];

/**
 * Collectives are ordered by (run, step, tag); the key packs the three into one safe
 * integer: tag < TAG_SPACE, step < 2^32, run ≤ MAX_RUN.
 */
export const TAG_SPACE = 32;
const RUN_SPACE = 2 ** 37;
export { MAX_RUN };

/** The order key of collective (run, step, tag): a later collective has a larger key. */
export const collectiveKey = (run: number, step: number, tag: number): number => run * RUN_SPACE + step * TAG_SPACE + tag;

/**
 * `out` (a decorator's own options object, reused every sum) with the caller's algorithm and
 * patience, and `exactTail` floats exact; the decorator sets the wire it sends on.
 */
export function passOptions(out: CollectiveOptions, from: CollectiveOptions, exactTail: number): CollectiveOptions {
  out.algorithm = from.algorithm;
  out.patienceMs = from.patienceMs;
  out.exactTail = exactTail;
  return out;
}

/** What a poisoned rank's sender writes into its messages (fault injection: tests and the bench only). */
export type PoisonKind = 'nan' | 'length';

/** How one collective's floats travel. Every rank of a collective passes the same options. */
export interface CollectiveOptions {
  /** Default 'ring'. 'halving-doubling' needs links to its partners (RingAllReduceOptions.peer). */
  algorithm?: Algorithm;
  /**
   * Number format on the wire; 'fp16' halves the bytes at the cost bounded in
   * ring-allreduce.ts; 'u32' sums the buffer's bits as 32-bit words modulo 2^32 (secure
   * aggregation's masked values: shared/secagg/). Default 'fp32'.
   */
  wire?: CollectiveWire;
  /**
   * The last `exactTail` floats travel as float32 whatever `wire` says: sums that must be
   * exact, such as votes and counts. Default 0.
   */
  exactTail?: number;
  /**
   * How long this collective may wait for the slowest rank, in ms, when longer than the
   * engine's timeout: a round of local steps waits for every rank's whole round of compute.
   * Default: the engine's timeout.
   */
  patienceMs?: number;
}

export interface CollectiveStats {
  messagesSent: number;
  bytesSent: number;
  droppedStaleGeneration: number;
  droppedStaleStep: number;
  droppedMalformed: number;
  droppedOverflow: number;
  /** Messages in another wire format than this rank's collective uses for that chunk. */
  droppedWireMismatch: number;
  /** Messages from a peer that is not this message's sender in the schedule. */
  droppedWrongSender: number;
  /** Finite values that became ±Infinity on the fp16 wire (|value| ≥ 65520). */
  fp16Overflows: number;
  /** Messages this rank framed with a non-finite value clamped (the collective then fails alike everywhere). */
  saturatedSends: number;
  /** Messages rejected as misbehaviour: each failed its collective and named the sender. */
  rejectedMisbehaviour: number;
}
/** The engine's statistics under the name they had when the ring was the only algorithm. */
export type RingStats = CollectiveStats;

/** Every counter at zero. */
export const createCollectiveStats = (): CollectiveStats => ({
  messagesSent: 0,
  bytesSent: 0,
  droppedStaleGeneration: 0,
  droppedStaleStep: 0,
  droppedMalformed: 0,
  droppedOverflow: 0,
  droppedWireMismatch: 0,
  droppedWrongSender: 0,
  fp16Overflows: 0,
  saturatedSends: 0,
  rejectedMisbehaviour: 0,
});

/** One direction of a link: where this peer sends (its right neighbour, or a halving-doubling partner). */
export interface RingLink {
  /** Sends one message. Must copy `bytes` before returning, as RTCDataChannel.send does. */
  send(bytes: Uint8Array): void;
  isOpen(): boolean;
  bufferedAmount(): number;
  /** Resolves once the link is open and its send buffer is below the low-water mark; rejects if the link fails. */
  whenWritable(): Promise<void>;
}

/** Who sends and who receives in a broadcast: `from` holds the values, from+1 … `to` (mod N) receive them. */
export interface BroadcastChain {
  from: number;
  to: number;
}

/** Bytes this rank sent in one collective, and how long the collective took. */
export interface Transfer {
  bytes: number;
  ms: number;
  /** The (step, tag) of the collective it ended with. */
  step?: number;
  tag?: number;
}

/** The collectives of one step's gradient sum, in the order they run (a quantized or factored sum is several): what secure aggregation masks. */
export const GRADIENT_SUM_TAGS: ReadonlySet<number> = new Set([COLLECTIVE_TAG.gradientScales, COLLECTIVE_TAG.gradients, COLLECTIVE_TAG.gradientFactorScales, COLLECTIVE_TAG.gradientFactors]);

/**
 * The transfer after the collective (step, tag) sent `bytes` in `ms`: added to `last` when
 * both are parts of one step's gradient sum, so a step's bytes are all of its sum's; that
 * collective alone otherwise (a retried sum starts again from its first tag).
 */
export function sumTransfer(last: Transfer, step: number, tag: number, bytes: number, ms: number): Transfer {
  const together = GRADIENT_SUM_TAGS.has(tag) && last.step === step && last.tag !== undefined && GRADIENT_SUM_TAGS.has(last.tag) && tag > last.tag;
  return together ? { bytes: last.bytes + bytes, ms: last.ms + ms, step, tag } : { bytes, ms, step, tag };
}

/**
 * The all-reduce the trainer and the link measurement depend on. Small on purpose: a unit
 * test passes an in-memory fake with just these three members.
 */
export interface Collective {
  readonly rank: number;
  readonly worldSize: number;
  /**
   * Sums `buf` elementwise across all ranks, in place. Without options the collective is
   * float32 and exact: the hand-over and evaluations rely on that.
   */
  allReduce(buf: Float32Array, step: number, tag: CollectiveTag, options?: CollectiveOptions): Promise<void>;
  /**
   * Copies rank `chain.from`'s `buf` into ranks from+1 … `chain.to`, rightwards around the
   * ring; the others' buffers stay as they are. float32 and exact: the state hand-over.
   */
  broadcast(buf: Float32Array, step: number, tag: CollectiveTag, chain: BroadcastChain): Promise<void>;
}

/** A collective of one membership generation, as the network builds it and the worker drives it. */
export interface CollectiveEngine extends Collective {
  readonly generation: number;
  readonly stats: Readonly<CollectiveStats>;
  /** The last finished collective's bytes sent and duration. */
  readonly lastTransfer: Transfer;
  readonly isAborted: boolean;
  /** Sets the run that the following collectives belong to (every rank of a run alike). */
  setRun(run: number): void;
  /** Feeds one message that arrived from rank `from`. */
  receive(bytes: Uint8Array, from?: number): void;
  /** Fails the collective in flight and every later one: the generation is over. */
  abort(error: WebringError): void;
  /** Fails the collective in flight, if any; later collectives of this generation still run. */
  cancel(error: WebringError): void;
}
