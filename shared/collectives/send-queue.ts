/**
 * The send queue: (phase, step, chunk) triples waiting to be framed and sent, in one
 * Int32Array reused across collectives, with backpressure: when a link is full or not yet
 * open, sending pauses until the link says it is writable again.
 */
import type { RingLink } from './collective';

/** What the queue sends through; the engine implements it. */
export interface SendTarget {
  /** The link a queued message leaves by, or null when there is none. */
  linkFor(phase: number, step: number): RingLink | null;
  /** Frames and sends one queued message over `link`, which has room. */
  send(phase: number, step: number, chunk: number, link: RingLink): void;
  /** linkFor had no link for a queued message; the queue stops. */
  missingLink(phase: number, step: number): void;
  /** A link that was full became writable: sending may go on. */
  writable(): void;
  /** A link failed while the queue waited on it. */
  linkFailed(error: unknown): void;
}

const TRIPLE = 3;

export class SendQueue {
  private triples = new Int32Array(0);
  private head = 0;
  private tail = 0;
  private waitingForLink = false;
  // Bound once, so waiting on a full link allocates no closures.
  private readonly onWritable: () => void;
  private readonly onLinkFailed: (error: unknown) => void;

  constructor(
    private readonly target: SendTarget,
    private readonly highWaterBytes: number,
  ) {
    this.onWritable = () => {
      this.waitingForLink = false;
      this.target.writable();
    };
    this.onLinkFailed = (error: unknown) => {
      this.waitingForLink = false;
      this.target.linkFailed(error);
    };
  }

  /** True while sending waits for a full link to drain. */
  get waiting(): boolean {
    return this.waitingForLink;
  }

  /** Empties the queue and makes room for `messages` triples (grown only when needed). */
  reset(messages: number): void {
    const needed = TRIPLE * messages;
    if (this.triples.length < needed) this.triples = new Int32Array(needed);
    this.clear();
  }

  clear(): void {
    this.head = 0;
    this.tail = 0;
  }

  push(phase: number, step: number, chunk: number): void {
    if (this.tail + TRIPLE > this.triples.length) {
      // Compact, then grow if still needed; happens only with a pathological backlog.
      this.triples.copyWithin(0, this.head, this.tail);
      this.tail -= this.head;
      this.head = 0;
      if (this.tail + TRIPLE > this.triples.length) {
        const bigger = new Int32Array(this.triples.length * 2 + TRIPLE);
        bigger.set(this.triples);
        this.triples = bigger;
      }
    }
    this.triples[this.tail++] = phase;
    this.triples[this.tail++] = step;
    this.triples[this.tail++] = chunk;
  }

  /**
   * Sends queued messages in order until the queue is empty (true) or a link is full,
   * missing or failing (false; a full link resumes through SendTarget.writable).
   */
  drain(): boolean {
    if (this.waitingForLink) return false;
    while (this.head < this.tail) {
      const phase = this.triples[this.head]!;
      const step = this.triples[this.head + 1]!;
      const chunk = this.triples[this.head + 2]!;
      const link = this.target.linkFor(phase, step);
      if (!link) {
        this.target.missingLink(phase, step);
        return false;
      }
      if (!link.isOpen() || link.bufferedAmount() > this.highWaterBytes) {
        this.waitingForLink = true;
        link.whenWritable().then(this.onWritable, this.onLinkFailed);
        return false;
      }
      this.head += TRIPLE;
      this.target.send(phase, step, chunk, link);
    }
    this.clear();
    return true;
  }
}
