/** PeerFactory for browser tabs: simple-peer's bundle over the browser's RTCPeerConnection. */
import SimplePeer from 'simple-peer/simplepeer.min.js';
import { LOW_WATER_BYTES, type PeerFactory } from '../shared/peer';

/** Empty: tabs on one LAN reach each other through host candidates; TURN comes later. */
const ICE_SERVERS: RTCIceServer[] = [];

export const browserPeerFactory: PeerFactory = ({ initiator }, events) => {
  const peer = new SimplePeer({ initiator, trickle: true, config: { iceServers: ICE_SERVERS }, channelConfig: { ordered: true } });
  // simple-peer hides the RTCDataChannel; its bufferedAmount and bufferedamountlow are
  // what backpressure needs, and its own stream API caps buffering at 64 KiB.
  const channel = (): RTCDataChannel | null => (peer as unknown as { _channel?: RTCDataChannel })._channel ?? null;
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
  (peer as unknown as { _onChannelMessage: (e: MessageEvent) => void })._onChannelMessage = (event) => {
    const data: unknown = event.data;
    if (data instanceof ArrayBuffer) events.onData(new Uint8Array(data));
    else events.onError('ERR_PEER_FAILED', 'a peer sent a non-binary data-channel message');
  };
  peer.on('close', () => events.onClose());
  peer.on('error', (err: Error & { code?: string }) => events.onError('ERR_PEER_FAILED', `${err.code ?? 'error'}: ${err.message}`));
  return {
    signal: (data) => peer.signal(data as unknown as SimplePeer.SignalData),
    send: (bytes) => {
      const ch = channel();
      if (!ch) throw new Error('data channel not open');
      ch.send(bytes as Uint8Array<ArrayBuffer>);
    },
    bufferedAmount: () => channel()?.bufferedAmount ?? 0,
    destroy: () => peer.destroy(),
  };
};
