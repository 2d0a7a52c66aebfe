/**
 * `webring/node`, and `webring` under Node: the shared library surface, and joinRoom with a
 * Node process's parts: the maths in a worker thread of its own, on WebGPU through Dawn (the
 * optional `webgpu` package) where a Vulkan device exists and the CPU otherwise, and WebRTC
 * through the optional `@roamhq/wrtc` (ERR_MISSING_PACKAGE names it when it is missing).
 */
import { joinRoomWith, openMemberWith, type MemberOptions, type PlatformOptions, type RoomMember, type WorkerPlatform } from '../shared/library';
import { createWrtcPeerFactory } from '../shared/network/wrtc-peer-factory';
import { openNodeCompute } from './node-compute';
import { registerFileModels } from './file-models';

export * from '../shared/library';
export { fileModelHandler } from './file-models';

// model.save('file://…') and tf.loadLayersModel('file://…/model.json') work as with tfjs-node.
registerFileModels();

/** This process's parts; `options.compute` 'main' keeps tfjs in this thread. */
export async function nodePlatform(options: Pick<PlatformOptions, 'backend' | 'compute' | 'device'> = {}): Promise<WorkerPlatform> {
  // WebRTC is loaded first: a machine without it stops before a compute thread starts.
  await createWrtcPeerFactory(() => ({}));
  const compute = await openNodeCompute(options.backend ?? null, options.compute ?? 'thread');
  return {
    compute,
    peerFactory: (rtcConfig) => createWrtcPeerFactory(rtcConfig),
    kind: 'node',
    device: options.device ?? 'node',
    localCheckpoints: null,
  };
}

/** Joins a room from this process; resolves once admitted (room-member.ts). */
export async function joinRoom(options: MemberOptions): Promise<RoomMember> {
  return joinRoomWith(await nodePlatform(options), options);
}

/** This process's member, connected to no room yet: `member.join` joins one, and again after a refusal or a drop (room-member.ts). */
export async function openMember(options: PlatformOptions): Promise<RoomMember> {
  return openMemberWith(await nodePlatform(options), options);
}
