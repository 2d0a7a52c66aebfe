/**
 * A benchmark worker: joins a room like a student tab and forms the same ring over the same
 * simple-peer data channels, but runs bare all-reduces and link transfers instead of
 * training. test/bench/allreduce.bench.ts drives N of these tabs.
 */
import { io, type Socket } from 'socket.io-client';
import type { AckResult, ClientToServerEvents, Generation, JoinAccepted, ServerToClientEvents } from '../shared/protocol';
import { RingNetwork } from '../shared/ring-network';
import { COLLECTIVE_TAG, DEFAULT_HIGH_WATER_BYTES } from '../shared/ring-allreduce';
import { MAX_MESSAGE_BYTES } from '../shared/ring-wire';
import { browserPeerFactory } from './browser-peer';

const params = new URLSearchParams(location.search);
const room = params.get('room') ?? 'bench';
const worldSize = Number(params.get('n') ?? 2);
const logEl = document.getElementById('log')!;
const log = (m: string) => (logEl.textContent += `${m}\n`);
const now = () => performance.timeOrigin + performance.now();

const socket: Socket<ServerToClientEvents, ClientToServerEvents> = io({ transports: ['websocket'] });
let network: RingNetwork | null = null;
let generation: Generation | null = null;
let collectiveStep = 1;

socket.on('ring:generation', (g) => {
  generation = g;
  network?.applyGeneration(g);
});
socket.on('signal:relay', ({ from, linkId, data }) => network?.handleSignal(from, linkId, data));

async function join(): Promise<number> {
  const joined = await new Promise<AckResult<JoinAccepted>>((resolve) =>
    socket.emit('room:join', { room, name: `bench-${Math.random().toString(36).slice(2, 6)}`, kind: 'browser', backend: 'cpu' }, resolve),
  );
  if (!joined.ok) throw new Error(`${joined.error.code}: ${joined.error.message}`);
  network = new RingNetwork({ selfId: joined.memberId, factory: browserPeerFactory, sendSignal: (to, linkId, data) => socket.emit('signal:relay', { to, linkId, data }), log });
  if (generation) network.applyGeneration(generation);
  // Wait for the whole ring, then use a one-float all-reduce as the barrier that proves every link is open.
  while (!generation || generation.members.length < worldSize) await new Promise((r) => setTimeout(r, 50));
  await network.collective!.allReduce(new Float32Array(1), collectiveStep++, COLLECTIVE_TAG.gradients);
  return generation.members.findIndex((m) => m.id === joined.memberId);
}

/** Runs `reps` all-reduces of `bytes`, each after a one-float barrier; returns milliseconds per all-reduce. */
async function allReduce(bytes: number, reps: number): Promise<number[]> {
  const ring = network!.collective!;
  const buf = new Float32Array(bytes / 4);
  for (let i = 0; i < buf.length; i++) buf[i] = i % 7;
  const times: number[] = [];
  for (let r = 0; r < reps; r++) {
    await ring.allReduce(new Float32Array(1), collectiveStep++, COLLECTIVE_TAG.gradients); // barrier
    const t0 = now();
    await ring.allReduce(buf, collectiveStep++, COLLECTIVE_TAG.gradients);
    times.push(now() - t0);
  }
  return times;
}

/** Sends `bytes` to the right neighbour in 64 KiB messages with the ring's backpressure; returns the start time. */
async function sendToRight(bytes: number): Promise<number> {
  const link = network!.rightLink!;
  const msg = new Uint8Array(MAX_MESSAGE_BYTES);
  const t0 = now();
  for (let sent = 0; sent < bytes; sent += msg.byteLength) {
    if (link.bufferedAmount() > DEFAULT_HIGH_WATER_BYTES) await link.whenWritable();
    link.send(msg);
  }
  return t0;
}

/** Counts bytes from the left neighbour until `bytes` arrived; returns the arrival time of the last one. */
function receiveFromLeft(bytes: number): Promise<number> {
  return new Promise((resolve) => {
    let got = 0;
    network!.setTap((data) => {
      got += data.byteLength;
      if (got >= bytes) {
        network!.setTap(null);
        resolve(now());
      }
    });
  });
}

Object.assign(window, { benchJoin: join, benchAllReduce: allReduce, benchSendToRight: sendToRight, benchReceiveFromLeft: receiveFromLeft });
log(`bench worker for room ${room}, ring of ${worldSize}`);
