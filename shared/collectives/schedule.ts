/**
 * What an algorithm's schedule is to the engine: which messages it sends first, what it
 * does with each admitted message, which link and which floats a queued message takes,
 * and when the collective is done. The engine owns the rest: admission of headers, the
 * ordering of collectives, stash, timeout, framing.
 */
import type { WebringError } from '../protocol/errors';
import type { Admission } from './admission';
import type { ChunkLayout } from './chunk-layout';
import type { CollectiveStats, CollectiveTag, RingLink } from './collective';
import type { PayloadReader } from './payload';
import type { SendQueue } from './send-queue';
import type { ChunkHeader } from './wire';

/** The collective in flight. */
export interface ActiveCollective {
  startedAt: number;
  bytesAtStart: number;
  buf: Float32Array;
  step: number;
  tag: CollectiveTag;
  key: number;
  /** Some rank clamped a non-finite value (its own, or FLAG_SATURATED arrived): fail alike at the end. */
  saturated: boolean;
  schedule: Schedule;
  resolve: () => void;
  reject: (err: WebringError) => void;
  timer: unknown;
}

/** The engine's parts a schedule works with; one set per engine, shared by its schedules. */
export interface EngineParts {
  readonly rank: number;
  readonly worldSize: number;
  readonly stats: CollectiveStats;
  readonly layout: ChunkLayout;
  readonly admission: Admission;
  readonly payload: PayloadReader;
  readonly queue: SendQueue;
  /** Sends what is queued and finishes the collective once it is done. */
  pump(): void;
  /** Still the collective in flight (a rejection or a timeout may have ended it). */
  isActive(c: ActiveCollective): boolean;
}

export interface Schedule {
  /** Resets this schedule's state and arrival marks for `c`, and queues its first sends. */
  start(c: ActiveCollective): void;
  /** After the stash replay: moves on with whatever is complete and sends. */
  resume(c: ActiveCollective): void;
  /** One message of `c` whose header passed admission. */
  receive(c: ActiveCollective, h: ChunkHeader, bytes: Uint8Array, from: number): void;
  /** The link a queued (phase, step) message leaves by. */
  linkFor(phase: number, step: number): RingLink | null;
  /** Why linkFor found none. */
  missingLinkDetail(phase: number, step: number): string;
  /** Fills the layout's place with the floats of a queued message. */
  locateSend(phase: number, step: number, chunk: number): void;
  isDone(): boolean;
  /**
   * Messages of the collective in flight that `from` still owes while it already sends a
   * later one's; over an ordered link that means it skipped them. 0 when it cannot tell.
   */
  owedBy(from: number): number;
  /** The collective failed: release what it held. */
  stop(): void;
}

/** fp16 values that overflowed where this rank rounded its own copy: the collective fails alike everywhere. */
export function noteOverflows(stats: CollectiveStats, c: ActiveCollective, overflows: number): void {
  if (overflows === 0) return;
  stats.fp16Overflows += overflows;
  c.saturated = true;
}
