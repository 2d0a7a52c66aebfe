/**
 * What the network thread and the compute thread say to each other (thread-compute.ts is
 * the caller's side, thread-host.ts the thread's). Requests carry an id; every request is
 * answered once, with a value or a coded error. Both ends are this project's code, built
 * together, so the messages are typed rather than validated.
 */
import type { Backend, DeviceClass } from '../protocol';
import type { ErrorBody } from '../protocol/errors';
import type { Replica, ReplicaSpec } from './replica';
import type { ProbeWorkload } from './compute';

/** A replica's methods that cross the thread boundary, by name. */
export type ReplicaMethod = Exclude<keyof Replica, 'parameterCount' | 'weightShapes' | 'stateLength'>;

/** The seam to a thread: a Web Worker, a worker_threads Worker, or either's side inside the thread. */
export interface ThreadPort {
  post(message: unknown, transfer: ArrayBuffer[]): void;
  onMessage(handler: (message: unknown) => void): void;
}

export type ComputeRequest =
  | { id: number; op: 'init'; preferred: Backend | null }
  | { id: number; op: 'probe'; device: DeviceClass; slowMsPerExample: number; workload?: ProbeWorkload }
  | { id: number; op: 'create'; spec: ReplicaSpec }
  | { id: number; op: 'call'; replica: number; method: ReplicaMethod; args: unknown[] }
  | { id: number; op: 'numTensors' };

export type ComputeReply = { id: number; ok: true; value: unknown } | { id: number; ok: false; error: ErrorBody };

/** What 'create' answers: the replica's handle and sizes. */
export interface CreateReply {
  replica: number;
  parameterCount: number;
  weightShapes: number[][];
  stateLength: number;
}

/** The ArrayBuffers under the typed arrays among `values` and their fields, each once. */
export function buffersOf(values: unknown[]): ArrayBuffer[] {
  const out = new Set<ArrayBuffer>();
  const visit = (v: unknown) => {
    if (ArrayBuffer.isView(v)) {
      if (v.byteOffset !== 0 || v.byteLength !== v.buffer.byteLength) {
        throw new RangeError('a buffer crossing threads must own its whole ArrayBuffer');
      }
      if (v.buffer instanceof ArrayBuffer) out.add(v.buffer);
    }
  };
  for (const v of values) {
    visit(v);
    if (v && typeof v === 'object' && !ArrayBuffer.isView(v)) for (const f of Object.values(v)) visit(f);
  }
  return [...out];
}
