/**
 * A device's compute: the tfjs backend it trains with, its admission probe, and the
 * replicas it builds for each run. A tab and a Node worker run it in a compute thread of
 * its own (thread-compute.ts), so that socket.io and the data channels answer while a step
 * computes; unit tests and `--compute=main` run it in this thread (LocalCompute). Both
 * satisfy this one interface, and the worker does not know which it has.
 */
import * as tf from '@tensorflow/tfjs';
import type { Backend, DeviceClass, DeviceProbe } from '../protocol';
import { probeDevice } from './device-probe';
import { LocalReplica } from './local-replica';
import { ModelReplica } from './model-replica';
import type { Replica, ReplicaSpec } from './replica';

/** The backend a device trains with, and why it is not WebGPU when it is not. */
export interface BackendInfo {
  backend: Backend;
  adapter: string | undefined;
  /** Why WebGPU is not in use, in words a student can act on; null when it is. */
  webgpuUnavailable: string | null;
}

/** Where the maths runs: a thread of its own, or the thread of the network. */
export type ComputePlace = 'thread' | 'main';

/** Which model a probe times: a task and one of its models (the network check's, for the teacher's chosen model). */
export interface ProbeWorkload {
  task: string;
  model: string;
}

export interface Compute {
  readonly info: BackendInfo;
  readonly place: ComputePlace;
  /** The admission probe (device-probe.ts) on this compute's backend; of `workload`'s model, else the default task's default. */
  probe(device: DeviceClass, slowMsPerExample?: number, workload?: ProbeWorkload): Promise<DeviceProbe>;
  /** A replica of a run's model; the run disposes it. */
  createReplica(spec: ReplicaSpec): Promise<Replica>;
  /** Tensors alive in this compute's tfjs engine. */
  numTensors(): Promise<number>;
  close(): Promise<void>;
}

/** The compute in this thread, on the tfjs backend already set up here. */
export class LocalCompute implements Compute {
  readonly place = 'main';

  /** `info`: the backend the caller set up in this thread (client/backend.ts, node-worker/node-backend.ts). */
  constructor(readonly info: BackendInfo) {}

  probe(device: DeviceClass, slowMsPerExample?: number, workload?: ProbeWorkload): Promise<DeviceProbe> {
    return probeDevice({ device, ...(slowMsPerExample ? { slowMsPerExample } : {}), ...workload });
  }

  async createReplica(spec: ReplicaSpec): Promise<Replica> {
    return spec.program ? ModelReplica.build(spec.program, spec.busyComputeMs) : new LocalReplica(spec);
  }

  async numTensors(): Promise<number> {
    return tf.memory().numTensors;
  }

  async close(): Promise<void> {}
}
