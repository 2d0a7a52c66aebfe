/**
 * The link to one peer of the ring network: its WebRTC connection, which may be replaced
 * underneath, whether it is open, and the senders waiting for it to drain. The network that
 * owns it decides when it is dialled, retired or dialled again.
 */
import { WebringError } from '../protocol/errors';
import { LOW_WATER_BYTES, type PeerFactory, type PeerHandle } from './peer';
import type { RingLink } from '../collectives/collective';
import type { LinkPath } from '../protocol';
import type { Clock } from '../util/clock';

/** What a link needs from the network that owns it (ring-network.ts). */
export interface LinkOwner {
  readonly factory: PeerFactory;
  sendSignal(to: string, linkId: string, data: Record<string, unknown>): void;
  log(message: string): void;
  /** Timers of the link (the drain poll, the retired connection's grace). */
  readonly clock: Clock;
  /** One whole message that arrived on the link from `peerId`. */
  route(peerId: string, bytes: Uint8Array): void;
  /** The link closed or errored while it was current. */
  linkFailed(link: PeerLink): void;
}

/**
 * While a sender waits for a full link to drain, the link looks at its buffer this often
 * as well as listening for bufferedamountlow: @roamhq/wrtc never fires that event (checked
 * with 16 MB queued on a channel), so a Node peer with more than the high-water mark queued
 * would wait forever.
 */
export const DRAIN_POLL_MS = 20;

let linkCounter = 0;
/** A fresh id for a connection this worker dials: its id's prefix, the time and a counter. */
export function newLinkId(selfId: string): string {
  linkCounter++;
  return `${selfId.slice(0, 8)}-${Date.now().toString(36)}-${linkCounter}`;
}

/** The link to one neighbour; its WebRTC connection may be replaced underneath. */
export class PeerLink implements RingLink {
  linkId: string | null = null;
  /** Automatic redials of this link in the current generation. */
  autoRedials = 0;
  private handle: PeerHandle | null = null;
  private open = false;
  private failure: WebringError | null = null;
  private waiters: Array<{ resolve: () => void; reject: (e: WebringError) => void }> = [];
  private drainPoll: unknown = null;

  constructor(
    readonly peerId: string,
    private readonly network: LinkOwner,
  ) {}

  connect(initiator: boolean, linkId: string): PeerHandle {
    this.handle?.destroy();
    this.linkId = linkId;
    this.open = false;
    this.failure = null;
    const handle = this.network.factory({ initiator, peerId: this.peerId, linkId }, {
      onSignal: (data) => this.network.sendSignal(this.peerId, linkId, data),
      onConnect: () => {
        if (this.handle !== handle) return;
        this.open = true;
        this.network.log(`link to ${this.peerId} open`);
        this.wake();
      },
      onData: (bytes) => {
        if (this.handle === handle) this.network.route(this.peerId, bytes);
      },
      onDrain: () => this.wake(),
      onClose: () => this.fail(handle, new WebringError('ERR_PEER_FAILED', `link to ${this.peerId} closed`)),
      onError: (code, message) => this.fail(handle, new WebringError(code, `link to ${this.peerId}: ${message}`)),
    });
    this.handle = handle;
    return handle;
  }

  signal(data: Record<string, unknown>): void {
    this.handle?.signal(data);
  }

  send(bytes: Uint8Array): void {
    if (!this.handle || !this.open) throw new WebringError('ERR_PEER_FAILED', `link to ${this.peerId} is not open`);
    this.handle.send(bytes);
  }

  isOpen(): boolean {
    return this.open;
  }

  /** How the open link carries its messages; 'shut' while it is not open. */
  get path(): LinkPath {
    return this.open ? (this.handle?.path?.() ?? 'direct') : 'shut';
  }

  /** Closed or errored: it must be dialled again before it can carry a ring. */
  get failed(): boolean {
    return this.failure !== null;
  }

  bufferedAmount(): number {
    return this.handle?.bufferedAmount() ?? 0;
  }

  whenWritable(): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    if (this.open && this.bufferedAmount() <= LOW_WATER_BYTES) return Promise.resolve();
    return new Promise((resolve, reject) => {
      this.waiters.push({ resolve, reject });
      this.pollDrain();
    });
  }

  /** Looks at the buffer every DRAIN_POLL_MS while anyone waits (see DRAIN_POLL_MS). */
  private pollDrain(): void {
    if (this.drainPoll !== null) return;
    const clock = this.network.clock;
    const tick = () => {
      this.drainPoll = null;
      this.wake();
      if (this.waiters.length > 0 && this.failure === null && this.handle !== null) this.drainPoll = clock.setTimeout(tick, DRAIN_POLL_MS);
    };
    this.drainPoll = clock.setTimeout(tick, DRAIN_POLL_MS);
  }

  /**
   * No longer needed: whoever waits on it is let go now, and the connection closes after
   * `graceMs`, so that what is still queued or in flight on it arrives.
   */
  retire(graceMs: number): void {
    this.rejectAll(new WebringError('ERR_ABORTED', `link to ${this.peerId} no longer needed`));
    this.network.clock.setTimeout(() => this.destroy(), graceMs);
  }

  destroy(): void {
    const h = this.handle;
    this.handle = null;
    this.open = false;
    h?.destroy();
    this.rejectAll(new WebringError('ERR_ABORTED', `link to ${this.peerId} no longer needed`));
  }

  private wake(): void {
    if (!this.open || this.bufferedAmount() > LOW_WATER_BYTES) return;
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w.resolve();
  }

  private fail(handle: PeerHandle, error: WebringError): void {
    if (this.handle !== handle) return;
    this.open = false;
    this.failure = error;
    this.network.log(error.message);
    this.rejectAll(error);
    this.network.linkFailed(this);
  }

  private rejectAll(error: WebringError): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w.reject(error);
  }
}
