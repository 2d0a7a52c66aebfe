/**
 * The worker's join against a socket that delivers the join's reply, the generation and the
 * teacher's Start in one go, as a slow device's socket does when it reads them in one
 * read: the Start's handler runs before the join's continuation has built the ring. Seen in
 * the lab with a phone at 0.05 core: the worker ignored the Start and the class waited for
 * it forever.
 */
import { startConfigSchema } from '../../shared/tasks/start-config';
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import * as tf from '@tensorflow/tfjs';
import { LocalCompute } from '../../shared/compute/compute';
import type { Socket } from 'socket.io-client';
import { mnistSubset } from '../support/mnist';
import { type ClientToServerEvents, type Generation, type MemberInfo, type ServerToClientEvents, type TrainStart } from '../../shared/protocol';
import type { LoadedDataset } from '../../shared/tasks/task';
import { mnistShards } from '../support/mnist';
import { TrainingWorker } from '../../shared/training/worker';
import type { WorkerStatus } from '../../shared/training/worker-status';
import type { PeerFactory } from '../../shared/network/peer';

let dataset: LoadedDataset;
before(async () => {
  await tf.setBackend('cpu');
  dataset = mnistSubset();
});

const ROOM = 'race';
const MEMBER = 'a1b2c3d4e5f6a7b8';

function member(): MemberInfo {
  return { id: MEMBER, name: 'phone', index: 0, rank: 0, backend: 'cpu', kind: 'node', adapter: null, examplesPerSec: 0, step: 0, weightsHash: null, computeMs: 0, batchShare: 0, linkMBps: 0, learningRate: 0, speedVsMedian: 0, collective: null, bytesSent: 0, probe: null, ownExamples: {}, connected: true, connecting: false, node: null };
}

/** A connected socket whose join reply is followed, in the same task, by the generation and the Start. */
function racingSocket(start: TrainStart): Socket<ServerToClientEvents, ClientToServerEvents> {
  const handlers = new Map<string, Array<(...args: unknown[]) => void>>();
  const deliver = (event: string, payload: unknown) => (handlers.get(event) ?? []).forEach((h) => h(payload));
  const generation: Generation = { room: ROOM, generation: start.generation, members: [member()] };
  const socket = {
    connected: true,
    auth: { room: ROOM, code: 'K7MQ2P' },
    on(event: string, handler: (...args: unknown[]) => void) {
      handlers.set(event, [...(handlers.get(event) ?? []), handler]);
      return socket;
    },
    off() {
      return socket;
    },
    emit(event: string, _payload: unknown, ack?: (reply: unknown) => void) {
      if (event !== 'room:join' || !ack) return socket;
      ack({ ok: true, memberId: MEMBER, index: 0, room: ROOM, memberToken: 'f'.repeat(48), ice: { iceServers: [], iceTransportPolicy: 'all', expiresAt: null } });
      deliver('ring:generation', generation);
      deliver('train:start', start);
      return socket;
    },
    connect() {
      return socket;
    },
    disconnect() {
      return socket;
    },
  };
  return socket as unknown as Socket<ServerToClientEvents, ClientToServerEvents>;
}

test('a Start that overtakes the join reply is run once the ring exists, not ignored', async () => {
  const config = startConfigSchema.parse({ model: 'mlp', batchSizePerWorker: 4, maxSteps: 3, saveEverySteps: 1000, dataset: 'mnist-10k' });
  const start: TrainStart = { run: 1, generation: 1, config, startStep: 0, resume: null, admitted: false };
  const seen: WorkerStatus[] = [];
  const logs: string[] = [];
  const noPeers: PeerFactory = () => {
    throw new Error('a ring of one dials nobody');
  };
  const worker = new TrainingWorker({
    socket: racingSocket(start),
    peerFactory: noPeers,
    data: (c) => mnistShards(c, dataset),
    compute: new LocalCompute({ backend: 'cpu', adapter: undefined, webgpuUnavailable: 'the CPU backend was requested' }),
    kind: 'node',
    device: 'phone',
    serverUrl: 'http://127.0.0.1:9',
    localCheckpoints: null,
    onStatus: (s) => seen.push(s),
    log: (m) => logs.push(m),
  });
  await worker.join(ROOM, 'phone', 'K7MQ2P');
  const deadline = Date.now() + 60_000;
  while (!seen.some((s) => s.state === 'done') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  assert.ok(!logs.some((l) => /not part of this run/.test(l)), logs.join('\n'));
  const done = seen.find((s) => s.state === 'done');
  assert.ok(done, `the run ended: states ${[...new Set(seen.map((s) => s.state))].join(', ')}; log ${logs.join(' | ')}`);
  assert.equal(done.step, 3);
  worker.close();
});
