/**
 * A benchmark tab: a BenchPeer (the same ring and partner links as a student's tab, running
 * bare collectives), plus the naive alternative the ring is measured against: the same
 * all-reduce relayed through a socket.io server, every rank sending its buffer to rank 0,
 * which sums and sends the result back. test/bench/bench.ts drives N of these tabs.
 */
import './zod-jitless';
import { io, type Socket } from 'socket.io-client';
import type { Algorithm, ClientToServerEvents, ServerToClientEvents } from '../shared/protocol';
import { BenchPeer, wallNow } from '../shared/network/bench-peer';
import { createBrowserPeerFactory } from './browser-peer';

const params = new URLSearchParams(location.search);
const room = params.get('room') ?? 'bench';
const worldSize = Number(params.get('n') ?? 2);
const relayUrl = params.get('relay');
const logEl = document.getElementById('log')!;
const log = (m: string) => (logEl.textContent += `${m}\n`);

const socket: Socket<ServerToClientEvents, ClientToServerEvents> = io({ transports: ['websocket'], auth: { room, code: params.get('code') ?? '' } });
// No ICE servers: the benchmark page's tabs reach each other through host candidates.
const peer = new BenchPeer(socket, createBrowserPeerFactory(() => ({ iceServers: [] })), log);

/** The relay's own events: bench-only, on a server the bench starts (never the classroom server). */
interface RelayMessage {
  rep: number;
  rank: number;
  data: ArrayBuffer;
}
let relay: Socket | null = null;
const inbox: RelayMessage[] = [];
let wake: (() => void) | null = null;

async function join(): Promise<number> {
  const rank = await peer.join(room, `bench-${Math.random().toString(36).slice(2, 6)}`, 'browser', worldSize);
  if (relayUrl) {
    relay = io(relayUrl, { transports: ['websocket'] });
    const onMessage = (m: RelayMessage) => {
      inbox.push(m);
      wake?.();
    };
    relay.on('up', onMessage);
    relay.on('down', onMessage);
    await new Promise<void>((resolve) => relay!.emit('hello', { room, rank }, resolve));
  }
  return rank;
}

async function nextMessages(rep: number, count: number): Promise<RelayMessage[]> {
  for (;;) {
    const got = inbox.filter((m) => m.rep === rep);
    if (got.length >= count) {
      inbox.splice(0, inbox.length, ...inbox.filter((m) => m.rep !== rep));
      return got;
    }
    await new Promise<void>((resolve) => (wake = resolve));
  }
}

/** The star all-reduce through the socket.io relay; milliseconds per repetition. */
async function star(bytes: number, reps: number): Promise<number[]> {
  const rank = peer.rank;
  const buf = new Float32Array(bytes / 4);
  const times: number[] = [];
  for (let rep = 0; rep < reps; rep++) {
    for (let i = 0; i < buf.length; i++) buf[i] = (i + rank) % 7;
    await peer.barrier();
    const t0 = wallNow();
    if (rank === 0) {
      // Summed in rank order, so the result does not depend on arrival order.
      const ups = (await nextMessages(rep, worldSize - 1)).sort((a, b) => a.rank - b.rank);
      for (const m of ups) {
        const v = new Float32Array(m.data);
        for (let i = 0; i < buf.length; i++) buf[i]! += v[i]!;
      }
      relay!.emit('down', { rep, rank, data: buf.buffer });
    } else {
      relay!.emit('up', { rep, rank, data: buf.buffer });
      const [down] = await nextMessages(rep, 1);
      buf.set(new Float32Array(down!.data));
    }
    times.push(wallNow() - t0);
  }
  return times;
}

Object.assign(window, {
  benchJoin: join,
  benchAllReduce: (bytes: number, reps: number, algorithm: Algorithm) => peer.allReduce(bytes, reps, algorithm),
  benchMeasure: (bytes: number) => peer.measure(bytes),
  benchStar: star,
  benchSendToRight: (bytes: number) => peer.sendToRight(bytes),
  benchReceiveFromLeft: (bytes: number) => peer.receiveFromLeft(bytes),
});
log(`bench worker for room ${room}, ring of ${worldSize}`);
