/**
 * The library's public surface that a tab and a Node process share (docs/library.md).
 * The package's entry points add where the maths and WebRTC come from: `webring` in a
 * browser is client/library.ts, in Node node-worker/library.ts (both export `joinRoom`
 * with the same options), and `webring/server` is signaling-server/library.ts.
 */
import type { Backend, DeviceClass } from '../protocol';
import type { ComputePlace } from '../compute/compute';
import type { MemberSetup, RoomEntry } from './room-member';

export { RoomMember, joinRoomWith, openMemberWith, type JoinOptions, type MemberSetup, type RoomEntry, type Admission, type Membership, type MemberEvents } from './room-member';
export { RoomControl, type RoomControlOptions, type StartOptions, type StatusSnapshot, type CheckpointFiles } from './room-control';
export { fitDataset, FIT_DEFAULTS, type FitDatasetOptions } from './fit-dataset';
export type { FitCallback } from './fit-callbacks';
export { datasetFromFunction, type EpochDataset, type ShardedDataset, type InputContext } from '../data/dataset-shards';
export { registerLoss, type LossFunction } from '../compute/program-model';
export type { WorkerPlatform } from './platform';
export type { WorkerStatus, WorkerState } from '../training/worker-status';
export { WebringError, ERROR_CODES, toWebringError, type ErrorCode, type ErrorBody } from '../protocol/errors';
export { RECIPE_DEFAULTS, type StartConfig } from '../protocol/start-config';
export { BACKENDS, DEVICE_CLASSES, type RoomStatus, type RoomJoinInfo, type Backend, type DeviceClass } from '../protocol';
export type { ComputePlace, BackendInfo } from '../compute/compute';
export type { OwnExamples } from '../data/own-examples';
export type { OwnRun } from '../data/run-data';
export type { CollectSetting, MemberInfo, RoomMetrics } from '../protocol';
export type { CheckpointInfo, CheckpointMetadata } from '../checkpoints/checkpoint';

/** openMember's options: the server, and where this device's maths runs. */
export interface PlatformOptions extends MemberSetup {
  /** The tfjs backend to try first (default: WebGPU, then WebGL in a tab, then the CPU). */
  backend?: Backend | null;
  /** Where the maths runs: a thread of its own (default), or this thread. */
  compute?: ComputePlace;
  /** What the teacher's class summary calls this device (default: a tab's own kind, 'node' in Node). */
  device?: DeviceClass;
}

/** joinRoom's options: openMember's, and the room to join. */
export interface MemberOptions extends PlatformOptions, RoomEntry {}
