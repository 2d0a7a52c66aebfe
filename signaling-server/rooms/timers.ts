/**
 * One server's pending one-shot timers (admission windows, automatic resumes, the sweep
 * after a restart), so that closing the server clears them all and none fires into a
 * closed server, or keeps a test process alive.
 */
import type { Clock } from '../../shared/util/clock';

export class Timers {
  private readonly pending = new Map<string, unknown>();
  private unnamed = 0;
  private closed = false;

  constructor(private readonly clock: Clock) {}

  /** Whether a timer named `key` is pending. */
  has(key: string): boolean {
    return this.pending.has(key);
  }

  /** Runs `fn` after `ms`, unless a timer named `key` is pending already or the server closed. */
  once(key: string, ms: number, fn: () => void): void {
    if (this.closed || this.pending.has(key)) return;
    const handle = this.clock.setTimeout(() => {
      this.pending.delete(key);
      fn();
    }, ms);
    this.pending.set(key, handle);
  }

  /** Runs `fn` after `ms`, unless the server closed by then. */
  after(ms: number, fn: () => void): void {
    this.once(`#${this.unnamed++}`, ms, fn);
  }

  /** Clears every pending timer; later ones are not scheduled (effects of closing connections may still ask). */
  close(): void {
    this.closed = true;
    for (const handle of this.pending.values()) this.clock.clearTimeout(handle);
    this.pending.clear();
  }
}
