/**
 * The network thread's side of a compute thread: a Compute whose probe and replicas live
 * in the thread (thread-host.ts serves them). Each call is one message there and one
 * back; a step's buffers (the gradient buffer and the examples) cross by transfer, so
 * nothing is copied between the threads per step, and the caller gets the same memory
 * back in the reply.
 */
import { WebringError } from '../protocol/errors';
import type { Backend, DeviceClass, DeviceProbe } from '../protocol';
import type { BackendInfo, Compute, ProbeWorkload } from './compute';
import type { Applied, Examples, Gradients, Replica, ReplicaSnapshot, ReplicaSpec, RoundLeg, RoundLegDone, Scored } from './replica';
import { buffersOf, type ComputeReply, type ComputeRequest, type CreateReply, type ReplicaMethod, type ThreadPort } from './thread-messages';

/** The caller's port also learns when the thread is gone (it failed to load, or crashed). */
export interface ComputeThreadPort extends ThreadPort {
  onExit(handler: (reason: string) => void): void;
  terminate(): void;
}

type Pending = { resolve(value: unknown): void; reject(error: Error): void };
/** A request before its id is given: the union's members each without `id`. */
type RequestBody = ComputeRequest extends infer R ? (R extends unknown ? Omit<R, 'id'> : never) : never;

export class ThreadCompute implements Compute {
  readonly place = 'thread';
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private exited: string | null = null;
  private infoValue: BackendInfo | null = null;

  private constructor(private readonly port: ComputeThreadPort) {
    port.onMessage((message) => {
      const reply = message as ComputeReply;
      const waiter = this.pending.get(reply.id);
      if (!waiter) return;
      this.pending.delete(reply.id);
      if (reply.ok) waiter.resolve(reply.value);
      else waiter.reject(new WebringError(reply.error.code, reply.error.message, reply.error.field));
    });
    port.onExit((reason) => {
      this.exited = reason;
      const error = new WebringError('ERR_INTERNAL', `the compute thread stopped: ${reason}`);
      for (const waiter of this.pending.values()) waiter.reject(error);
      this.pending.clear();
    });
  }

  /** Starts the thread's backend (`preferred` first, then WebGPU, WebGL, CPU) and resolves once it is up. */
  static async open(port: ComputeThreadPort, preferred: Backend | null): Promise<ThreadCompute> {
    const compute = new ThreadCompute(port);
    compute.infoValue = (await compute.request({ op: 'init', preferred })) as BackendInfo;
    return compute;
  }

  get info(): BackendInfo {
    return this.infoValue!;
  }

  /** One request, answered once; `transfer` moves these buffers to the thread. */
  request(body: RequestBody, transfer: ArrayBuffer[] = []): Promise<unknown> {
    if (this.exited !== null) return Promise.reject(new WebringError('ERR_INTERNAL', `the compute thread stopped: ${this.exited}`));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.port.post({ ...body, id }, transfer);
    });
  }

  probe(device: DeviceClass, slowMsPerExample = 0, workload?: ProbeWorkload): Promise<DeviceProbe> {
    return this.request({ op: 'probe', device, slowMsPerExample, ...(workload ? { workload } : {}) }) as Promise<DeviceProbe>;
  }

  async createReplica(spec: ReplicaSpec): Promise<Replica> {
    const created = (await this.request({ op: 'create', spec })) as CreateReply;
    return new ThreadReplica(this, created);
  }

  numTensors(): Promise<number> {
    return this.request({ op: 'numTensors' }) as Promise<number>;
  }

  async close(): Promise<void> {
    this.port.terminate();
  }
}

/** A replica in the compute thread, seen from the network thread. */
class ThreadReplica implements Replica {
  readonly parameterCount: number;
  readonly weightShapes: ReadonlyArray<readonly number[]>;
  readonly stateLength: number;
  private readonly id: number;
  /**
   * The weights' hash the last update answered with, until anything else may change the
   * weights: every step's report reads it, and then it costs no round trip to the thread.
   */
  private knownHash: string | null = null;

  constructor(
    private readonly thread: ThreadCompute,
    created: CreateReply,
  ) {
    this.id = created.replica;
    this.parameterCount = created.parameterCount;
    this.weightShapes = created.weightShapes;
    this.stateLength = created.stateLength;
  }

  /** Calls `method` in the thread; with `moving`, the buffers among the arguments are transferred. */
  private async call<T>(method: ReplicaMethod, args: unknown[], moving = false): Promise<T> {
    return (await this.thread.request({ op: 'call', replica: this.id, method, args }, moving ? buffersOf(args) : [])) as T;
  }

  /** Calls a method that may change the weights: the known hash goes first. */
  private changing<T>(method: ReplicaMethod, args: unknown[], moving = false): Promise<T> {
    this.knownHash = null;
    return this.call(method, args, moving);
  }

  computeGradients(examples: Examples, flat: Float32Array): Promise<Gradients> {
    return this.call('computeGradients', [examples, flat], true);
  }

  async applyGradients(flat: Float32Array, learningRate: number): Promise<Applied> {
    const applied = await this.changing<Applied>('applyGradients', [flat, learningRate], true);
    this.knownHash = applied.weightsHash;
    return applied;
  }

  /** The leg's buffers cross by transfer and come back; the class's state (and so the known hash) is the round start's throughout. */
  trainRound(leg: RoundLeg): Promise<RoundLegDone> {
    return this.call('trainRound', [leg], true);
  }

  score(examples: Examples): Promise<Scored> {
    return this.call('score', [examples], true);
  }

  predict(features: Float32Array, n: number): Promise<Float32Array> {
    return this.call('predict', [features, n]);
  }

  rehearse(n: number): Promise<void> {
    return this.changing('rehearse', [n]);
  }

  async weightsHash(): Promise<string> {
    return this.knownHash ?? this.call('weightsHash', []);
  }

  readWeights(): Promise<Float32Array> {
    return this.call('readWeights', []);
  }

  readState(): Promise<Float32Array> {
    return this.call('readState', []);
  }

  writeState(state: Float32Array): Promise<void> {
    return this.changing('writeState', [state]);
  }

  snapshot(): Promise<ReplicaSnapshot> {
    return this.call('snapshot', []);
  }

  load(snapshot: Pick<ReplicaSnapshot, 'weightSpecs' | 'weights' | 'optimizerSpecs' | 'optimizerData'>): Promise<void> {
    return this.changing('load', [snapshot]);
  }

  nudge(): Promise<void> {
    return this.changing('nudge', []);
  }

  dispose(): Promise<void> {
    return this.changing('dispose', []);
  }
}
