/**
 * A PeerFactory over simple-peer, for both sides: tabs pass simple-peer's self-contained
 * browser bundle, the Node worker passes simple-peer with @roamhq/wrtc's RTCPeerConnection.
 */
import type SimplePeer from 'simple-peer';
import { LOW_WATER_BYTES, type PeerFactory } from './peer';

/** What the factory needs of a data channel; the browser's and wrtc's both have it. */
interface Channel {
  bufferedAmount: number;
  bufferedAmountLowThreshold: number;
  addEventListener(type: 'bufferedamountlow', listener: () => void): void;
  send(data: Uint8Array): void;
}

export interface SimplePeerFactoryOptions {
  /**
   * ICE servers and policy, read at every dial so that each new link gets the freshest TURN
   * credentials (shared/ice-config.ts); no servers on one LAN, where host candidates do.
   */
  rtcConfig: () => RTCConfiguration;
  /** Node only: the WebRTC implementation (@roamhq/wrtc). */
  wrtc?: SimplePeer.Options['wrtc'];
}

export function createSimplePeerFactory(Peer: typeof SimplePeer, options: SimplePeerFactoryOptions): PeerFactory {
  return ({ initiator }, events) => {
    const peer = new Peer({
      initiator,
      trickle: true,
      // Replaces simple-peer's default config (Google's public STUN), which a school
      // network without internet could not reach anyway.
      config: options.rtcConfig(),
      channelConfig: { ordered: true },
      ...(options.wrtc ? { wrtc: options.wrtc } : {}),
    });
    // simple-peer hides the RTCDataChannel; its bufferedAmount and bufferedamountlow are
    // what backpressure needs, and its own stream API caps buffering at 64 KiB.
    const channel = (): Channel | null => (peer as unknown as { _channel?: Channel })._channel ?? null;
    peer.on('signal', (data) => events.onSignal(data as unknown as Record<string, unknown>));
    peer.on('connect', () => {
      const ch = channel();
      if (ch) {
        ch.bufferedAmountLowThreshold = LOW_WATER_BYTES;
        ch.addEventListener('bufferedamountlow', () => events.onDrain());
      }
      events.onConnect();
    });
    // simple-peer turns every message into a Buffer and pushes it through a readable stream
    // before emitting 'data'; at 64 KiB messages that copy and the stream bookkeeping cost
    // more than the ring's own work. Take the channel's messages directly instead.
    (peer as unknown as { _onChannelMessage: (e: { data: unknown }) => void })._onChannelMessage = (event) => {
      const data = event.data;
      if (data instanceof ArrayBuffer) events.onData(new Uint8Array(data));
      else if (ArrayBuffer.isView(data)) events.onData(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
      else events.onError('ERR_PEER_FAILED', 'a peer sent a non-binary data-channel message');
    };
    peer.on('close', () => events.onClose());
    peer.on('error', (err: Error & { code?: string }) => events.onError('ERR_PEER_FAILED', `${err.code ?? 'error'}: ${err.message}`));
    return {
      signal: (data) => peer.signal(data as unknown as SimplePeer.SignalData),
      send: (bytes) => {
        const ch = channel();
        if (!ch) throw new Error('data channel not open');
        ch.send(bytes);
      },
      bufferedAmount: () => channel()?.bufferedAmount ?? 0,
      destroy: () => peer.destroy(),
    };
  };
}
