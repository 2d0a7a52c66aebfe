/**
 * The relay: a link between two members that travels over the connections both already
 * have to the teacher's server, for a pair that could open no WebRTC link (school Wi-Fi
 * with client isolation, UDP blocked, a device without WebRTC). The server passes each ring
 * message on as it came (link:data, signaling-server/handlers/link-relay.ts), so the ring,
 * halving-doubling, the hub, the state hand-over and secure aggregation's masked words all
 * run over it unchanged.
 *
 * `withRelay` wraps a platform's PeerFactory: each link first tries WebRTC and falls back to
 * the relay when its data channel does not open within RELAY_FALLBACK_MS, or its handshake
 * fails before it opened. So the choice is made per link and per device, at admission, from
 * the links that did or did not open. Each side says `{type: 'relay'}` once, over the
 * signaling path; a side that has said it and heard it uses the relay. A link that opened
 * directly and fails later fails as before, and its redial tries WebRTC again.
 */
import { WebringError, toWebringError, type ErrorCode } from '../protocol/errors';
import type { Ack, LinkData, RelayedLinkData } from '../protocol';
import { LOW_WATER_BYTES, type PeerEvents, type PeerFactory, type PeerHandle } from './peer';
import type { Clock } from '../util/clock';

/** The signal by which each side of a link says it uses the relay. */
export const RELAY_SIGNAL = 'relay';
/**
 * The signal by which one side says its relayed link failed (the server refused its
 * messages): the other side would otherwise wait on the link until its collective's
 * timeout, and a re-form needs both ends' reports (signaling-server/rooms/reform-votes.ts).
 */
export const RELAY_FAILED_SIGNAL = 'relay-failed';
/**
 * A link whose data channel has not opened this long after it was dialled goes over the
 * relay. Direct links open in well under a second on a class network and in a few seconds
 * on a laptop running thirty workers; a link that has not opened by now is most likely
 * blocked, and ICE would take 10–30 s more to say so. Well under the link watchdog's
 * deadline (training/link-watchdog.ts, 10 s), so a relayed device is never shed.
 */
export const RELAY_FALLBACK_MS = 4_000;
/**
 * A link whose ICE found a path before RELAY_FALLBACK_MS is not blocked, only slow (a
 * device at a fifth of a core with eight links dialling at once): it gets this long from
 * the dial to open its channel before the relay. The lab's 0.2-core class on open Wi-Fi
 * relayed 7 of its 36 links at 4 s. Still under the link watchdog's deadline (10 s), with
 * the relay's own handshake (one signal each way) to spare.
 */
export const RELAY_FALLBACK_REACHABLE_MS = 7_000;
/**
 * A relayed link keeps at most this many bytes sent and not yet acknowledged by the server,
 * and queues the rest here: the server holds a message until the partner's connection can
 * take it and refuses a sender with more than twice this held for one partner
 * (signaling-server/edge/relay-backpressure.ts). A megabyte per round trip to the server is
 * far more than a school link carries.
 */
export const RELAY_WINDOW_BYTES = 1024 * 1024;
/** Relayed messages that arrive before this side has switched are kept up to this much. */
export const MAX_EARLY_RELAY_BYTES = 16 * 1024 * 1024;

/** What a relayed link needs: a way to send bytes to a member through the server, and to hear its bytes. */
export interface RelayChannel {
  /** Resolves once the server took the message; rejects with the server's code (the peer left: ERR_NOT_IN_ROOM). */
  send(to: string, linkId: string, bytes: Uint8Array<ArrayBuffer>): Promise<void>;
  /** Hears the bytes `from` sends on `linkId`; returns the call that stops listening. */
  listen(from: string, linkId: string, onData: (bytes: Uint8Array) => void): () => void;
}

/** The part of a member's socket.io socket the relay uses. */
export interface RelaySocket {
  emit(event: 'link:data', data: LinkData, ack: Ack<Record<string, never>>): unknown;
  on(event: 'link:data', listener: (data: RelayedLinkData, taken?: () => void) => void): unknown;
}

/** The relay over a member's socket to the server. One per socket. */
export class SocketRelay implements RelayChannel {
  private readonly listeners = new Map<string, (bytes: Uint8Array) => void>();
  /** Messages for links this worker no longer holds (a replaced link's last messages): counted, not kept. */
  unrouted = 0;

  constructor(
    private readonly socket: RelaySocket,
    private readonly log: (message: string) => void,
  ) {
    socket.on('link:data', (data, taken) => {
      // Acknowledged on arrival, whatever it holds: the server sends more only as this page takes it.
      if (typeof taken === 'function') taken();
      this.deliver(data);
    });
  }

  send(to: string, linkId: string, bytes: Uint8Array<ArrayBuffer>): Promise<void> {
    return new Promise((resolve, reject) => {
      this.socket.emit('link:data', { to, linkId, bytes }, (result) => {
        if (result.ok) resolve();
        else reject(new WebringError(result.error.code, result.error.message));
      });
    });
  }

  listen(from: string, linkId: string, onData: (bytes: Uint8Array) => void): () => void {
    const key = `${from}/${linkId}`;
    this.listeners.set(key, onData);
    return () => {
      if (this.listeners.get(key) === onData) this.listeners.delete(key);
    };
  }

  /** A message from the server, checked before it reaches a link: the server passes on what a peer sent. */
  private deliver(data: RelayedLinkData): void {
    const bytes = asBytes(data?.bytes);
    if (typeof data?.from !== 'string' || typeof data.linkId !== 'string' || bytes === null) {
      this.log('ignoring a relayed message that is not {from, linkId, bytes}');
      return;
    }
    const listener = this.listeners.get(`${data.from}/${data.linkId}`);
    if (listener) listener(bytes);
    else this.unrouted++;
  }
}

/** socket.io's binary attachment as bytes: an ArrayBuffer in a tab, a Buffer in Node; null for anything else. */
function asBytes(value: unknown): Uint8Array | null {
  if (value instanceof ArrayBuffer) return new Uint8Array(value);
  if (ArrayBuffer.isView(value)) return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
  return null;
}

export interface RelayOptions {
  relay: RelayChannel;
  clock: Clock;
  log(message: string): void;
  /** A link of this worker went over the relay (for its status), with why. */
  onRelayed?(peerId: string, reason: string): void;
  fallbackAfterMs?: number;
  /** The deadline from the dial for a link whose ICE is connected (RELAY_FALLBACK_REACHABLE_MS). */
  reachableFallbackAfterMs?: number;
}

/**
 * Links that try `direct` first and fall back to the relay; with `direct` null (a device
 * with WebRTC off or missing), every link goes over the relay at once.
 */
export function withRelay(direct: PeerFactory | null, options: RelayOptions): PeerFactory {
  return (peerOptions, events) => {
    if (!peerOptions.peerId || !peerOptions.linkId) throw new WebringError('ERR_INTERNAL', 'a relayed link needs its peer and link ids');
    return new FallbackPeer(peerOptions.peerId, peerOptions.linkId, peerOptions.initiator, direct, events, options);
  };
}

type Mode = 'direct' | 'relay' | 'closed';

/** One link: WebRTC until it opens or gives up, else the relay. */
class FallbackPeer implements PeerHandle {
  private mode: Mode = 'direct';
  private direct: PeerHandle | null = null;
  private open = false;
  /** This side said RELAY_SIGNAL; the peer said it. */
  private said = false;
  private heard = false;
  /** Relayed bytes handed to the socket whose forwarding by the server is not confirmed yet (at most RELAY_WINDOW_BYTES). */
  private inFlight = 0;
  /** Relayed messages waiting for the window, in order, and their bytes. */
  private queued: Uint8Array<ArrayBuffer>[] = [];
  private queuedBytes = 0;
  private early: Uint8Array[] = [];
  private earlyBytes = 0;
  private timer: unknown = null;
  /** When the direct connection was dialled (the clock's ms): the fallback deadlines count from it. */
  private dialledAt = 0;
  private readonly unlisten: () => void;

  constructor(
    private readonly peerId: string,
    private readonly linkId: string,
    initiator: boolean,
    directFactory: PeerFactory | null,
    private readonly events: PeerEvents,
    private readonly options: RelayOptions,
  ) {
    this.unlisten = options.relay.listen(peerId, linkId, (bytes) => this.relayed(bytes));
    if (!directFactory) {
      // The responder waits for the dialler's first signal, so the link id is the dialler's.
      if (initiator) this.toRelay('this device opens no WebRTC links');
      return;
    }
    let handle: PeerHandle;
    try {
      handle = directFactory({ initiator, peerId, linkId }, this.directEvents());
    } catch (err) {
      // A page whose RTCPeerConnection is missing or refused (a managed browser's policy).
      this.toRelay(`WebRTC would not start (${toWebringError(err).message})`);
      return;
    }
    if (this.mode === 'direct') this.direct = handle;
    else handle.destroy();
    this.dialledAt = options.clock.now();
    this.fallBackAfter(options.fallbackAfterMs ?? RELAY_FALLBACK_MS, 'no direct link opened');
  }

  /** Goes over the relay `ms` after the dial unless the direct channel opened by then. */
  private fallBackAfter(ms: number, why: string): void {
    this.clearTimer();
    this.timer = this.options.clock.setTimeout(
      () => {
        this.timer = null;
        if (!this.open) this.toRelay(`${why} within ${ms / 1000} s`);
      },
      Math.max(0, this.dialledAt + ms - this.options.clock.now()),
    );
  }

  /** The direct connection's events, heard only while this link is direct. */
  private directEvents(): PeerEvents {
    const direct = () => this.mode === 'direct';
    return {
      onSignal: (data) => direct() && this.events.onSignal(data),
      onReachable: () => {
        if (direct() && !this.open && this.timer !== null) this.fallBackAfter(this.options.reachableFallbackAfterMs ?? RELAY_FALLBACK_REACHABLE_MS, 'ICE found a path, but no channel opened');
      },
      onConnect: () => {
        if (!direct() || this.open) return;
        this.open = true;
        this.clearTimer();
        this.events.onConnect();
      },
      onData: (bytes) => direct() && this.events.onData(bytes),
      onDrain: () => direct() && this.events.onDrain(),
      // Before it opened, a failed handshake means the relay; after, the link failed.
      onClose: () => {
        if (!direct()) return;
        if (this.open) this.events.onClose();
        else this.toRelay('the direct connection closed before it opened');
      },
      onError: (code, message) => {
        if (!direct()) return;
        if (this.open) this.events.onError(code, message);
        else this.toRelay(`the direct connection failed (${message})`);
      },
    };
  }

  signal(data: Record<string, unknown>): void {
    if (this.mode === 'closed') return;
    if (data.type === RELAY_FAILED_SIGNAL) {
      if (this.mode === 'relay') this.failRelay('ERR_PEER_FAILED', `${this.peerId}'s side of the relayed link failed`, false);
      return;
    }
    if (data.type === RELAY_SIGNAL) {
      this.heard = true;
      if (this.mode === 'relay') this.openIfAgreed();
      else this.toRelay(`${this.peerId} could open no direct link`);
      return;
    }
    if (this.mode !== 'direct') return; // a direct handshake's late candidates
    if (this.direct) this.direct.signal(data);
    else this.toRelay('this device opens no WebRTC links');
  }

  send(bytes: Uint8Array): void {
    if (this.mode === 'direct') {
      if (!this.direct) throw new WebringError('ERR_PEER_FAILED', `link to ${this.peerId} is not open`);
      this.direct.send(bytes);
      return;
    }
    if (this.mode === 'closed' || !this.open) throw new WebringError('ERR_PEER_FAILED', `relayed link to ${this.peerId} is not open`);
    // A copy: the caller reuses its buffer as soon as send returns, and socket.io may hold
    // the message until its connection can write it.
    const copy = bytes.slice();
    this.queued.push(copy);
    this.queuedBytes += copy.byteLength;
    this.pump();
  }

  /** Sends queued messages while the window allows; one message always goes, however large. */
  private pump(): void {
    while (this.queued.length > 0 && (this.inFlight === 0 || this.inFlight + this.queued[0]!.byteLength <= RELAY_WINDOW_BYTES)) {
      const message = this.queued.shift()!;
      this.queuedBytes -= message.byteLength;
      this.inFlight += message.byteLength;
      this.options.relay.send(this.peerId, this.linkId, message).then(
        () => {
          this.inFlight -= message.byteLength;
          if (this.mode !== 'relay') return;
          this.pump();
          if (this.inFlight + this.queuedBytes <= LOW_WATER_BYTES) this.events.onDrain();
        },
        (err: unknown) => {
          this.inFlight -= message.byteLength;
          const e = toWebringError(err);
          this.failRelay(e.code, `the server could not relay to ${this.peerId}: ${e.message}`, true);
        },
      );
    }
  }

  bufferedAmount(): number {
    return this.mode === 'direct' ? (this.direct?.bufferedAmount() ?? 0) : this.inFlight + this.queuedBytes;
  }

  path(): 'direct' | 'relay' {
    return this.mode === 'relay' ? 'relay' : 'direct';
  }

  destroy(): void {
    if (this.mode === 'closed') return;
    this.close();
    this.events.onClose();
  }

  private toRelay(reason: string): void {
    if (this.mode !== 'direct') return;
    this.mode = 'relay';
    this.clearTimer();
    const direct = this.direct;
    this.direct = null;
    direct?.destroy();
    this.options.log(`link to ${this.peerId} goes through the server: ${reason}`);
    this.options.onRelayed?.(this.peerId, reason);
    this.said = true;
    this.events.onSignal({ type: RELAY_SIGNAL });
    this.openIfAgreed();
  }

  private openIfAgreed(): void {
    if (!this.said || !this.heard || this.open || this.mode !== 'relay') return;
    this.open = true;
    this.events.onConnect();
    const early = this.early;
    this.early = [];
    this.earlyBytes = 0;
    for (const bytes of early) {
      if (this.mode !== 'relay') return;
      this.events.onData(bytes);
    }
  }

  /** Bytes the peer sent over the relay: passed on once open, kept until then (the peer may switch a moment sooner). */
  private relayed(bytes: Uint8Array): void {
    if (this.mode === 'closed') return;
    if (this.open && this.mode === 'relay') {
      this.events.onData(bytes);
      return;
    }
    if (this.earlyBytes + bytes.byteLength > MAX_EARLY_RELAY_BYTES) {
      this.failRelay('ERR_PEER_MISBEHAVED', `${this.peerId} relayed more than ${MAX_EARLY_RELAY_BYTES} bytes before the link opened`, true);
      return;
    }
    this.early.push(bytes);
    this.earlyBytes += bytes.byteLength;
  }

  /** Closes the relayed link with `code`; `tellPeer`: says so to the other side, which cannot see a refusal at the server. */
  private failRelay(code: ErrorCode, message: string, tellPeer: boolean): void {
    if (this.mode === 'closed') return;
    if (tellPeer && this.mode === 'relay') this.events.onSignal({ type: RELAY_FAILED_SIGNAL });
    this.close();
    // The peer left the room, is no partner any more, or its connection stopped taking
    // messages: to the link, as if its connection closed (the ring redials or sheds it).
    const peerGone = code === 'ERR_NOT_IN_ROOM' || code === 'ERR_RELAY_REFUSED' || code === 'ERR_RELAY_BACKLOG';
    this.events.onError(peerGone ? 'ERR_PEER_FAILED' : code, message);
  }

  private close(): void {
    this.mode = 'closed';
    this.open = false;
    this.clearTimer();
    this.unlisten();
    const direct = this.direct;
    this.direct = null;
    direct?.destroy();
    this.early = [];
    this.earlyBytes = 0;
    this.queued = [];
    this.queuedBytes = 0;
  }

  private clearTimer(): void {
    if (this.timer !== null) this.options.clock.clearTimeout(this.timer);
    this.timer = null;
  }
}
