/**
 * The compute thread's side: it sets up the tfjs backend when asked, then serves the probe
 * and the replicas (LocalReplica) to the network thread. A Web Worker (client/
 * compute-thread.ts) and a worker_threads Worker (node-worker/compute-thread.ts) each pass
 * their own port and backend selection; everything else is this file.
 */
import { WebringError, toWebringError } from '../protocol/errors';
import type { Backend } from '../protocol';
import { LocalCompute, type BackendInfo } from './compute';
import type { Replica } from './replica';
import { buffersOf, type ComputeReply, type ComputeRequest, type CreateReply, type ThreadPort } from './thread-messages';

/** Replica methods whose buffers the reply hands back by transfer: a step's, and the bulk reads. */
const TRANSFERS_REPLY: ReadonlySet<string> = new Set(['computeGradients', 'applyGradients', 'trainRound', 'score', 'readWeights', 'readState', 'snapshot']);

export function serveCompute(port: ThreadPort, selectBackend: (preferred: Backend | null) => Promise<BackendInfo>): void {
  let compute: LocalCompute | null = null;
  const replicas = new Map<number, Replica>();
  let nextReplica = 1;

  const ready = (): LocalCompute => {
    if (!compute) throw new WebringError('ERR_BAD_STATE', 'the compute thread has no backend yet');
    return compute;
  };

  const handle = async (request: ComputeRequest): Promise<{ value: unknown; transfer: boolean }> => {
    switch (request.op) {
      case 'init':
        compute = new LocalCompute(await selectBackend(request.preferred));
        return { value: compute.info, transfer: false };
      case 'probe':
        return { value: await ready().probe(request.device, request.slowMsPerExample, request.workload), transfer: false };
      case 'numTensors':
        return { value: await ready().numTensors(), transfer: false };
      case 'create': {
        const replica = await ready().createReplica(request.spec);
        const id = nextReplica++;
        replicas.set(id, replica);
        const reply: CreateReply = { replica: id, parameterCount: replica.parameterCount, weightShapes: replica.weightShapes.map((s) => [...s]), stateLength: replica.stateLength };
        return { value: reply, transfer: false };
      }
      case 'call': {
        const replica = replicas.get(request.replica);
        if (!replica) throw new WebringError('ERR_BAD_STATE', `no replica ${request.replica} in the compute thread`);
        const method = replica[request.method] as (...args: unknown[]) => Promise<unknown>;
        const value = await method.apply(replica, request.args);
        if (request.method === 'dispose') replicas.delete(request.replica);
        return { value, transfer: TRANSFERS_REPLY.has(request.method) };
      }
    }
  };

  port.onMessage((message) => {
    const request = message as ComputeRequest;
    handle(request).then(
      ({ value, transfer }) => {
        const reply: ComputeReply = { id: request.id, ok: true, value };
        port.post(reply, transfer ? buffersOf([value]) : []);
      },
      (err: unknown) => {
        const reply: ComputeReply = { id: request.id, ok: false, error: toWebringError(err).toBody() };
        port.post(reply, []);
      },
    );
  });
}
