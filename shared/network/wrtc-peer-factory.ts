/**
 * The PeerFactory of Node processes (the worker, the hub, the lab's and the benchmarks'
 * peers): rtc-peer.ts over @roamhq/wrtc's RTCPeerConnection, whose Linux binary ships inside
 * the npm package. Node only; the pages use the browser's RTCPeerConnection.
 */
import wrtc from '@roamhq/wrtc';
import { createRtcPeerFactory, type RtcPeerConnectionClass } from './rtc-peer';
import type { PeerFactory } from './peer';

/** Peers with the ICE config `rtcConfig` returns at each dial. */
export function createWrtcPeerFactory(rtcConfig: () => RTCConfiguration): PeerFactory {
  return createRtcPeerFactory(wrtc.RTCPeerConnection as unknown as RtcPeerConnectionClass, { rtcConfig });
}
