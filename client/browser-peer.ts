/** PeerFactory for browser tabs: rtc-peer.ts over the browser's own RTCPeerConnection. */
import type { PeerFactory } from '../shared/network/peer';
import { createRtcPeerFactory } from '../shared/network/rtc-peer';

/** Peers with the ICE config `rtcConfig` returns at each dial (the session's TURN credentials). */
export function createBrowserPeerFactory(rtcConfig: () => RTCConfiguration): PeerFactory {
  return createRtcPeerFactory(RTCPeerConnection, { rtcConfig });
}

/** No ICE servers: the benchmark page's tabs reach each other through host candidates. */
export const directPeerFactory = createBrowserPeerFactory(() => ({ iceServers: [] }));
