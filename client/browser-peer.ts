/** PeerFactory for browser tabs: rtc-peer.ts over the browser's own RTCPeerConnection. */
import type { PeerFactory } from '../shared/network/peer';
import { createRtcPeerFactory } from '../shared/network/rtc-peer';

/**
 * Peers with the ICE config `rtcConfig` returns at each dial (the session's TURN credentials).
 * Called only where RTCPeerConnection exists (device-abilities.ts hasWebRtc): nothing here
 * touches the global before then, so a browser without WebRTC can load the library.
 */
export function createBrowserPeerFactory(rtcConfig: () => RTCConfiguration): PeerFactory {
  return createRtcPeerFactory(RTCPeerConnection, { rtcConfig });
}
