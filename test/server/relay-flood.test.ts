/**
 * The relay cannot be turned on a classmate (issue 57): a member floods another through
 * link:data, as fast as its own relay budget allows, at a classmate whose download is a busy
 * school Wi-Fi's 1 MB/s (a throttling proxy in front of the real server). Before, the
 * classmate's pings queued behind the flood and the server dropped it as dead within 5 s,
 * with no link between the two. Now the relay carries only the ring's own links that the
 * other end agreed to relay, no faster than the other end's connection takes them, and the
 * teacher sees who was refused. An honest sender that waits for its acknowledgements gets
 * every byte through, in order.
 */
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { codeFor, connectClient, join, useTestServer, type TestSocket } from '../support/server';
import { throttledProxy, type ThrottledProxy } from '../support/throttled-proxy';
import { retainedBytes } from '../support/retained-memory';
import type { AckResult, RoomStatus } from '../../shared/protocol';
import { RELAY_SIGNAL, RELAY_WINDOW_BYTES } from '../../shared/network/relay-link';
import { RELAY_PAIR_HELD_BYTES } from '../../signaling-server/edge/relay-backpressure';

const t = useTestServer();
const proxies: ThrottledProxy[] = [];
after(async () => {
  for (const p of proxies) await p.close();
});

/** A busy school Wi-Fi tab's download. */
const VICTIM_BYTES_PER_SECOND = 1_000_000;
const MESSAGE_BYTES = 64 * 1024;
/** How long each flood lasts: longer than the server's ping timeout (4 s) twice over. */
const FLOOD_MS = 9_000;


type Ack = AckResult<Record<string, never>>;
const emitRelay = (socket: TestSocket, payload: unknown, ack: (r: Ack) => void): void => {
  (socket.emit as (e: string, p: unknown, a: (r: Ack) => void) => void)('link:data', payload, ack);
};
const sayRelay = (socket: TestSocket, to: string, linkId: string): Promise<unknown> =>
  new Promise((resolve) => (socket.emit as (e: string, p: unknown, a: (r: unknown) => void) => void)('signal:relay', { to, linkId, data: { type: RELAY_SIGNAL } }, resolve));

/** Joins `name` to `room` through a proxy that passes the server's bytes at 1 MB/s. */
async function throttledStudent(room: string, name: string): Promise<{ socket: TestSocket; id: string; heard: () => number }> {
  const proxy = await throttledProxy(t.server.url, VICTIM_BYTES_PER_SECOND);
  proxies.push(proxy);
  const socket = t.keep(await connectClient({ url: proxy.url }, room, { room, code: codeFor(room) }));
  const joined = await join(socket, room, name);
  assert.ok(joined.ok, JSON.stringify(joined));
  let heard = 0;
  // As a page does (shared/network/relay-link.ts SocketRelay): each message acknowledged as it arrives.
  socket.on('link:data', (d, taken) => {
    heard += (d.bytes as Uint8Array).byteLength;
    taken?.();
  });
  return { socket, id: joined.memberId, heard: () => heard };
}

/**
 * Sends MESSAGE_BYTES messages from `attacker` to `to` on `linkId` for FLOOD_MS, never
 * waiting for an acknowledgement, at about 13 MB/s (inside the relay budget of one
 * connection), while checking every second that `victim` is still in the room and
 * connected. Returns the acknowledgements' codes, how often the victim was seen present,
 * and the most memory (heap and Buffers, after a collection) this process, server
 * included, held above where it started.
 */
async function flood(room: string, attacker: TestSocket, to: string, linkId: string): Promise<{ codes: Map<string, number>; presentChecks: boolean[]; peakBufferGrowth: number; peakHeld: number }> {
  const codes = new Map<string, number>();
  const presentChecks: boolean[] = [];
  const start = retainedBytes();
  let peak = 0;
  let peakHeld = 0;
  const payload = { to, linkId, bytes: new Uint8Array(MESSAGE_BYTES) };
  const sender = setInterval(() => {
    for (let i = 0; i < 2; i++) emitRelay(attacker, payload, (r) => codes.set(r.ok ? 'ok' : r.error.code, (codes.get(r.ok ? 'ok' : r.error.code) ?? 0) + 1));
    peakHeld = Math.max(peakHeld, t.server.relayHeldBytes());
  }, 10);
  const end = Date.now() + FLOOD_MS;
  while (Date.now() < end) {
    await new Promise((r) => setTimeout(r, 1_000));
    peak = Math.max(peak, retainedBytes() - start);
    const status = await t.status(room);
    presentChecks.push(status.members.some((m) => m.id === to && m.connected));
  }
  clearInterval(sender);
  return { codes, presentChecks, peakBufferGrowth: peak, peakHeld };
}

const refusedIn = (status: RoomStatus, id: string) => status.relay.refused.find((r) => r.id === id);

test('a member that is no ring partner of a classmate relays nothing to it, however fast it sends, and the classmate stays', async () => {
  const room = 'flood-stranger';
  // A ring of five: ranks 1 and 4 are not partners (topology.ts linkedRanks).
  const { students, ids } = await t.students(room, ['s0', 's1', 's2', 's3']);
  const victim = await throttledStudent(room, 'victim');
  await sayRelay(victim.socket, ids[1]!, 'flood-1'); // even an agreement does not make them partners
  const result = await flood(room, students[1]!, victim.id, 'flood-1');
  assert.deepEqual([...result.codes.keys()], ['ERR_RELAY_REFUSED'], `every message refused: ${JSON.stringify([...result.codes])}`);
  assert.ok(result.presentChecks.every(Boolean), `the classmate stayed connected: ${result.presentChecks}`);
  assert.equal(victim.heard(), 0, 'nothing reached the classmate');
  const status = await t.status(room);
  assert.equal(status.members.length, 5, 'nobody left the class');
  assert.equal(refusedIn(status, ids[1]!)?.code, 'ERR_RELAY_REFUSED', 'the teacher sees who was refused');
});

test('a partner that floods a classmate on an agreed relayed link is held to the classmate\'s speed and refused, and the classmate stays', async () => {
  const room = 'flood-partner';
  const { students, ids } = await t.students(room, ['attacker']);
  const victim = await throttledStudent(room, 'victim');
  // The classmate's page would agree as soon as the attacker said it relays their link.
  await sayRelay(victim.socket, ids[0]!, 'flood-2');
  const result = await flood(room, students[0]!, victim.id, 'flood-2');
  assert.ok(result.presentChecks.every(Boolean), `the classmate stayed connected through the flood: ${result.presentChecks}`);
  assert.ok((result.codes.get('ERR_RELAY_BACKLOG') ?? 0) > 0, `the flood was refused: ${JSON.stringify([...result.codes])}`);
  const heard = victim.heard();
  assert.ok(heard > 0, 'the classmate got what its link could take');
  assert.ok(heard <= (VICTIM_BYTES_PER_SECOND * (FLOOD_MS + 2_000)) / 1000, `no more than its link carries: ${heard} bytes`);
  // The process's own figure (the attacker's socket and the server's inbound queue too, which
  // grow when this machine is loaded) is printed; what the server holds for the classmate is the bound.
  console.log(`partner flood: ${JSON.stringify([...result.codes])}; the classmate took ${heard} bytes; the server held ${(result.peakHeld / 2 ** 20).toFixed(2)} MiB for it at most; the process ${(result.peakBufferGrowth / 2 ** 20).toFixed(1)} MiB`);
  assert.ok(result.peakHeld <= RELAY_PAIR_HELD_BYTES, `the server held at most a sender's share for the classmate: ${result.peakHeld} bytes`);
  const status = await t.status(room);
  assert.deepEqual(status.members.map((m) => m.name).sort(), ['attacker', 'victim'], 'nobody was dropped');
  assert.equal(refusedIn(status, ids[0]!)?.code, 'ERR_RELAY_BACKLOG', 'the teacher sees who flooded');
});

test('an honest partner that keeps its window gets every message to a slow classmate, in order, and is never refused', async () => {
  const room = 'relay-window';
  const { students, ids } = await t.students(room, ['sender']);
  const victim = await throttledStudent(room, 'slow');
  await sayRelay(victim.socket, ids[0]!, 'honest-1');
  const order: number[] = [];
  victim.socket.on('link:data', (d) => { const b = d.bytes as Uint8Array; order.push(new DataView(b.buffer, b.byteOffset, b.byteLength).getUint32(0)); });
  const messages = 48; // 3 MiB: three seconds of the classmate's link
  let inFlight = 0;
  let next = 0;
  const refusals: string[] = [];
  await new Promise<void>((resolve) => {
    const pump = () => {
      while (next < messages && inFlight + MESSAGE_BYTES <= RELAY_WINDOW_BYTES) {
        const bytes = new Uint8Array(MESSAGE_BYTES);
        new DataView(bytes.buffer).setUint32(0, next++);
        inFlight += MESSAGE_BYTES;
        emitRelay(students[0]!, { to: victim.id, linkId: 'honest-1', bytes }, (r) => {
          inFlight -= MESSAGE_BYTES;
          if (!r.ok) refusals.push(r.error.code);
          if (next === messages && inFlight === 0) resolve();
          else pump();
        });
      }
    };
    pump();
  });
  const end = Date.now() + 10_000;
  while (order.length < messages && Date.now() < end) await new Promise((r) => setTimeout(r, 100));
  assert.deepEqual(refusals, [], 'nothing refused');
  assert.deepEqual(order, Array.from({ length: messages }, (_, i) => i), 'every message, in order');
});
