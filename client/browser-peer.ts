/** PeerFactory for browser tabs: simple-peer's bundle over the browser's RTCPeerConnection. */
import SimplePeer from 'simple-peer/simplepeer.min.js';
import type { PeerFactory } from '../shared/network/peer';
import { createSimplePeerFactory } from '../shared/network/simple-peer-factory';

/** Peers with the ICE config `rtcConfig` returns at each dial (the session's TURN credentials). */
export function createBrowserPeerFactory(rtcConfig: () => RTCConfiguration): PeerFactory {
  return createSimplePeerFactory(SimplePeer, { rtcConfig });
}

/** No ICE servers: the benchmark page's tabs reach each other through host candidates. */
export const directPeerFactory = createBrowserPeerFactory(() => ({ iceServers: [] }));
