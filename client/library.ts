/**
 * `webring` in a browser (the package's "browser" entry; node-worker/library.ts is Node's):
 * the shared library surface, and joinRoom with a tab's parts: the maths in a Web Worker of
 * its own on WebGPU (WebGL, the CPU as fallbacks), the browser's RTCPeerConnection, and the
 * chief's checkpoint copies in IndexedDB.
 */
// First: a page that forbids eval (a Content-Security-Policy) must not see zod probe for it.
import './zod-jitless';
import { joinRoomWith, openMemberWith, type MemberOptions, type PlatformOptions, type RoomMember, type WorkerPlatform } from '../shared/library';
import { openCompute } from './open-compute';
import { createBrowserPeerFactory } from './browser-peer';
import { hasWebRtc } from './device-abilities';
import { deviceClassOf } from './device-class';
import { indexedDbCheckpoints } from './indexeddb-checkpoints';

export * from '../shared/library';

/** This tab's parts; `options.compute` 'main' keeps tfjs on the page. */
export async function browserPlatform(options: Pick<PlatformOptions, 'backend' | 'compute' | 'device' | 'log'> = {}): Promise<WorkerPlatform> {
  const compute = await openCompute(options.backend ?? null, options.compute ?? 'thread', options.log ?? (() => undefined));
  return {
    compute,
    // A browser built without RTCPeerConnection (WebKitGTK), or one a policy took it from,
    // relays every link through the server, like a Node worker with --peer-links off.
    peerFactory: (rtcConfig) => (hasWebRtc() ? createBrowserPeerFactory(rtcConfig) : null),
    kind: 'browser',
    device: options.device ?? deviceClassOf(navigator as Navigator & { userAgentData?: { mobile: boolean } }),
    localCheckpoints: indexedDbCheckpoints,
  };
}

/** Joins a room from this tab; resolves once admitted (room-member.ts). */
export async function joinRoom(options: MemberOptions): Promise<RoomMember> {
  return joinRoomWith(await browserPlatform(options), options);
}

/** This tab's member, connected to no room yet: `member.join` joins one, and again after a refusal or a drop (room-member.ts). */
export async function openMember(options: PlatformOptions): Promise<RoomMember> {
  return openMemberWith(await browserPlatform(options), options);
}
