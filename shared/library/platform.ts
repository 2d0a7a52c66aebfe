/**
 * What a worker needs from the place it runs in, and nothing else: the maths (a compute
 * thread with its tfjs backend), WebRTC, and where the chief keeps its own checkpoint
 * copies. A tab's parts are client/library-platform.ts, a Node process's node-worker/
 * library.ts; the library's joinRoom takes either, so the same worker code runs in both.
 */
import type { Compute } from '../compute/compute';
import type { LocalCheckpointStore } from '../checkpoints/checkpoint-writer';
import type { PeerFactory } from '../network/peer';
import type { DeviceClass, WorkerKind } from '../protocol';

export interface WorkerPlatform {
  /** The device's maths: opened once, closed when the member leaves. */
  readonly compute: Compute;
  /**
   * Peers dialled with the ICE config `rtcConfig` returns at each dial (the session's TURN
   * credentials); null where the place has no WebRTC at all (a browser built without
   * RTCPeerConnection): then every link goes through the signaling server.
   */
  peerFactory(rtcConfig: () => RTCConfiguration): PeerFactory | null | Promise<PeerFactory | null>;
  readonly kind: WorkerKind;
  /** What the teacher's class summary calls this device. */
  readonly device: DeviceClass;
  /** The chief's own checkpoint copies (a tab's IndexedDB); null where there is nowhere to keep them. */
  readonly localCheckpoints: LocalCheckpointStore | null;
}
