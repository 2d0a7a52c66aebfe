/**
 * The one seam between the ring and WebRTC: rtc-peer.ts over the browser's
 * RTCPeerConnection in a tab and @roamhq/wrtc's in Node (the unit tests pass fakes); keeping it
 * behind this small interface means it can be swapped without touching the ring.
 */
import type { ErrorCode } from '../protocol/errors';

export interface PeerEvents {
  onSignal(data: Record<string, unknown>): void;
  /** ICE found a working path; the data channel's handshake is still to come (relay-link.ts gives it longer). */
  onReachable?(): void;
  onConnect(): void;
  /** One whole data-channel message. */
  onData(bytes: Uint8Array): void;
  /** The channel's send buffer fell below the low-water mark. */
  onDrain(): void;
  onClose(): void;
  onError(code: ErrorCode, message: string): void;
}

export interface PeerHandle {
  signal(data: Record<string, unknown>): void;
  /** Sends one message; copies `bytes` before returning. */
  send(bytes: Uint8Array): void;
  bufferedAmount(): number;
  destroy(): void;
  /** How the link carries its messages: its own channel ('direct', the default) or the server's relay (relay-link.ts). */
  path?(): 'direct' | 'relay';
}

export interface PeerOptions {
  initiator: boolean;
  /** Whom the link is to, and the connection's id (ring-network.ts): what the relay addresses (relay-link.ts). */
  peerId?: string;
  linkId?: string;
}

export type PeerFactory = (options: PeerOptions, events: PeerEvents) => PeerHandle;

/** Resume sending once the data channel has drained below this (bufferedamountlow). */
export const LOW_WATER_BYTES = 1024 * 1024;
