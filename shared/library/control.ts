/**
 * `webring/control`: the teacher's controls alone (RoomControl), without TensorFlow.js or
 * WebRTC: for a dashboard, a script that runs a lesson, or the classroom's own teacher page,
 * whose first paint must not wait for tfjs. `webring` exports the same class.
 */
export { RoomControl, type RoomControlOptions, type StartOptions, type StatusSnapshot, type CheckpointFiles } from './room-control';
export { WebringError, ERROR_CODES, toWebringError, type ErrorCode, type ErrorBody } from '../protocol/errors';
export type { RoomStatus, RoomJoinInfo, RoomMetrics, CollectSetting } from '../protocol';
export type { CheckpointInfo, CheckpointMetadata } from '../checkpoints/checkpoint';
