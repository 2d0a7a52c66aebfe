/**
 * The PeerFactory of Node processes (the worker, the hub, the lab's and the benchmarks'
 * peers): rtc-peer.ts over @roamhq/wrtc's RTCPeerConnection, whose Linux binary ships inside
 * the npm package. Node only; the pages use the browser's RTCPeerConnection.
 *
 * The package is native and not every machine has a build of it, so it is loaded when a
 * factory is made, and a machine without it gets ERR_MISSING_PACKAGE naming the package and
 * the command that installs it, instead of a module-resolution stack trace at start-up.
 */
import { WebringError } from '../protocol/errors';
import { createRtcPeerFactory, type RtcPeerConnectionClass } from './rtc-peer';
import type { PeerFactory } from './peer';

export const WRTC_PACKAGE = '@roamhq/wrtc';

/** How the package is loaded; a test passes another loader. */
export type WrtcLoader = () => Promise<{ default: { RTCPeerConnection: unknown } }>;
const loadWrtc: WrtcLoader = () => import('@roamhq/wrtc');

/** Peers with the ICE config `rtcConfig` returns at each dial. */
export async function createWrtcPeerFactory(rtcConfig: () => RTCConfiguration, load: WrtcLoader = loadWrtc): Promise<PeerFactory> {
  let wrtc: { RTCPeerConnection: unknown };
  try {
    wrtc = (await load()).default;
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    // Only a missing package is named so; a build that fails to load says why itself.
    if (e.code === 'ERR_MODULE_NOT_FOUND' && e.message.includes(WRTC_PACKAGE)) {
      throw new WebringError('ERR_MISSING_PACKAGE', `WebRTC for Node is missing: this needs the optional package ${WRTC_PACKAGE} (npm install ${WRTC_PACKAGE})`);
    }
    throw err;
  }
  return createRtcPeerFactory(wrtc.RTCPeerConnection as RtcPeerConnectionClass, { rtcConfig });
}
