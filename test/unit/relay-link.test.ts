/**
 * The relay (shared/network/relay-link.ts) under RingNetworks, over an in-memory server:
 * members whose WebRTC never opens, or who have none, all-reduce through the relay; a pair
 * that can open a direct link keeps it; relayed bytes are counted until the server takes
 * them; a relay to a member that left fails the link. The real thing, over a real server
 * and real Node workers: test/server/link-relay.test.ts and test/class/relay-class.test.ts;
 * in tabs whose WebRTC is blocked: test/e2e/relay.spec.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RingNetwork } from '../../shared/network/ring-network';
import { RELAY_SIGNAL, RELAY_WINDOW_BYTES, withRelay, type RelayChannel } from '../../shared/network/relay-link';
import type { PeerFactory, PeerHandle } from '../../shared/network/peer';
import type { Generation, MemberInfo } from '../../shared/protocol';
import { WebringError } from '../../shared/protocol/errors';
import { systemClock } from '../../shared/util/clock';

const FALLBACK_MS = 30;

/** The server's part: passes each member's bytes to the member it names, a tick later; refuses members that are gone. */
class FakeServer {
  private readonly listeners = new Map<string, (bytes: Uint8Array) => void>();
  readonly gone = new Set<string>();
  /** Bytes relayed, by sender. */
  readonly carried = new Map<string, number>();
  /** While set, the server holds every message: what a sender has in flight stays counted. */
  hold: Array<() => void> | null = null;

  channelOf(self: string): RelayChannel {
    return {
      send: (to, linkId, bytes) =>
        new Promise((resolve, reject) => {
          const deliver = () => {
            if (this.gone.has(to)) {
              reject(new WebringError('ERR_NOT_IN_ROOM', `member ${to} is not in room r`));
              return;
            }
            this.carried.set(self, (this.carried.get(self) ?? 0) + bytes.byteLength);
            resolve();
            setImmediate(() => this.listeners.get(`${to}<${self}/${linkId}`)?.(bytes));
          };
          if (this.hold) this.hold.push(deliver);
          else setImmediate(deliver);
        }),
      listen: (from, linkId, onData) => {
        const key = `${self}<${from}/${linkId}`;
        this.listeners.set(key, onData);
        return () => this.listeners.delete(key);
      },
    };
  }
}

/** A WebRTC that never connects and never says so: client isolation. */
const isolated: PeerFactory = () => ({ signal: () => undefined, send: () => undefined, bufferedAmount: () => 0, destroy: () => undefined });

/** A WebRTC that connects the two ends of a link id once both exist. */
function directWorld(): PeerFactory {
  const ends = new Map<string, Array<{ handle: PeerHandle; onData: (b: Uint8Array) => void; onConnect: () => void }>>();
  return ({ initiator, linkId }, events) => {
    const pair = ends.get(linkId!) ?? [];
    ends.set(linkId!, pair);
    const self = {
      handle: {
        signal: () => undefined,
        send: (bytes: Uint8Array) => {
          const copy = bytes.slice();
          setImmediate(() => pair.find((e) => e !== self)?.onData(copy));
        },
        bufferedAmount: () => 0,
        destroy: () => undefined,
      },
      onData: (b: Uint8Array) => events.onData(b),
      onConnect: () => events.onConnect(),
    };
    pair.push(self);
    if (initiator) setImmediate(() => events.onSignal({ type: 'offer' }));
    if (pair.length === 2) setImmediate(() => pair.forEach((e) => e.onConnect()));
    return self.handle;
  };
}

/**
 * A WebRTC that connects late: `reachable` says whether ICE reports its path (at 5 ms) before
 * the channel opens at `openMs`, past the fallback deadline.
 */
function slowWorld(openMs: number, reachable: boolean): PeerFactory {
  const direct = directWorld();
  return (options, events) =>
    direct(options, {
      ...events,
      onConnect: () => {
        if (reachable) events.onReachable?.();
        setTimeout(() => events.onConnect(), openMs);
      },
    });
}

function generation(n: number, ids: string[]): Generation {
  const members = ids.map(
    (id, rank): MemberInfo => ({ id, name: id, index: Number(id.slice(1)), rank, backend: 'cpu', kind: 'node', adapter: null, examplesPerSec: 0, step: 0, weightsHash: null, computeMs: 0, batchShare: 0, linkMBps: 0, learningRate: 0.001, speedVsMedian: 1, collective: null, bytesSent: 0, probe: null, ownExamples: {}, connected: true, connecting: false, node: null }),
  );
  return { room: 'r', generation: n, members };
}

/** Members over one fake server; each with its own WebRTC (null: none), and a log of its relayed links. */
function classOf(server: FakeServer, directs: Record<string, PeerFactory | null>) {
  const networks = new Map<string, RingNetwork>();
  const relayedBy = new Map<string, string[]>();
  for (const [id, direct] of Object.entries(directs)) {
    relayedBy.set(id, []);
    networks.set(
      id,
      new RingNetwork({
        selfId: id,
        factory: withRelay(direct, { relay: server.channelOf(id), clock: systemClock, log: () => undefined, onRelayed: (peer) => relayedBy.get(id)!.push(peer), fallbackAfterMs: FALLBACK_MS }),
        sendSignal: (to, linkId, data) => setImmediate(() => networks.get(to)?.handleSignal(id, linkId, data)),
        log: () => undefined,
      }),
    );
  }
  return { networks: [...networks.values()], relayedBy };
}

async function sumEverywhere(nets: RingNetwork[], step: number, length = 40_000): Promise<Float32Array[]> {
  const bufs = nets.map((_, r) => Float32Array.from({ length }, (_, i) => (i % 97) + 1000 * r));
  await Promise.all(nets.map((net, r) => net.collective!.allReduce(bufs[r]!, step)));
  return bufs;
}

async function until(what: string, ok: () => boolean, ms = 2_000): Promise<void> {
  const end = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > end) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

test('a class whose WebRTC never opens falls back to the relay after the deadline, and sums exactly as a direct ring does', async () => {
  const server = new FakeServer();
  const { networks, relayedBy } = classOf(server, { m1: isolated, m2: isolated, m3: isolated });
  const g = generation(1, ['m1', 'm2', 'm3']);
  for (const net of networks) net.applyGeneration(g);
  assert.equal(networks[0]!.isReadyFor(g), false, 'nothing is open before the fallback deadline');
  await until('every ring link open over the relay', () => networks.every((n) => n.isReadyFor(g)));
  // Several chunks of 64 KiB each way: the relay carries the ring's messages in order.
  const sums = await sumEverywhere(networks, 1);
  for (const b of sums) for (let i = 0; i < b.length; i += 997) assert.equal(b[i], 3 * (i % 97) + 3000);
  for (const id of ['m1', 'm2', 'm3']) assert.ok((server.carried.get(id) ?? 0) > 40_000 * 4, `${id} sent its share through the server`);
  assert.deepEqual([...relayedBy.values()].map((peers) => peers.length > 0), [true, true, true]);
});

test('a link whose ICE found a path gets longer to open its channel before the relay; one without goes over the relay at the deadline', async () => {
  const openMs = FALLBACK_MS * 3;
  for (const reachable of [true, false]) {
    const server = new FakeServer();
    const slow = slowWorld(openMs, reachable);
    const { networks, relayedBy } = classOf(server, { m1: slow, m2: slow, m3: slow });
    const g = generation(1, ['m1', 'm2', 'm3']);
    for (const net of networks) net.applyGeneration(g);
    await until('every ring link open', () => networks.every((n) => n.isReadyFor(g)));
    const sums = await sumEverywhere(networks, 1, 1_000);
    for (const b of sums) assert.equal(b[5], 3 * 5 + 3000);
    if (reachable) {
      assert.deepEqual([...relayedBy.values()].flat(), [], 'a slow but reachable link stays direct');
      assert.equal(server.carried.size, 0, 'nothing went through the server');
    } else {
      assert.deepEqual([...relayedBy.values()].map((peers) => peers.length > 0), [true, true, true], 'no path by the deadline: the relay');
    }
  }
});

test('a device with no WebRTC goes through the relay at once, and only its own links do: the others stay direct', async () => {
  const server = new FakeServer();
  const direct = directWorld();
  const { networks, relayedBy } = classOf(server, { m1: direct, m2: null, m3: direct, m4: direct });
  const g = generation(1, ['m1', 'm2', 'm3', 'm4']);
  for (const net of networks) net.applyGeneration(g);
  await until('every ring link open', () => networks.every((n) => n.isReadyFor(g)));
  const sums = await sumEverywhere(networks, 1, 1_000);
  for (const b of sums) assert.equal(b[5], 4 * 5 + 6000);
  // m2 links to its ring neighbours m1 and m3 and to its halving-doubling partner m4:
  // each of those links goes through the server, and no link between the others does.
  assert.deepEqual(relayedBy.get('m2')!.sort(), ['m1', 'm3', 'm4']);
  for (const id of ['m1', 'm3', 'm4']) assert.deepEqual(relayedBy.get(id), ['m2'], `${id} relays only to m2`);
  assert.ok((server.carried.get('m2') ?? 0) > 0);
});

test('relayed bytes count as buffered until the server takes them, at most a window at a time, and a relay to a member that left fails the link at both ends', async () => {
  const server = new FakeServer();
  const events: string[] = [];
  let opened = 0;
  const factoryA = withRelay(null, { relay: server.channelOf('a1'), clock: systemClock, log: () => undefined });
  const factoryB = withRelay(null, { relay: server.channelOf('b2'), clock: systemClock, log: () => undefined });
  let b: PeerHandle | null = null;
  const a = factoryA(
    { initiator: true, peerId: 'b2', linkId: 'l-1' },
    {
      onSignal: (data) => setImmediate(() => {
        if (b) {
          b.signal(data); // after the first: what a's side says of the open link
          return;
        }
        assert.equal(data.type, RELAY_SIGNAL);
        b = factoryB(
          { initiator: false, peerId: 'a1', linkId: 'l-1' },
          {
            onSignal: (reply) => setImmediate(() => a.signal(reply)),
            onConnect: () => opened++,
            onData: (bytes) => events.push(`b got ${bytes.byteLength}`),
            onDrain: () => undefined,
            onClose: () => events.push('b closed'),
            onError: (code) => events.push(`b error ${code}`),
          },
        );
        b.signal(data);
      }),
      onConnect: () => opened++,
      onData: () => undefined,
      onDrain: () => events.push('a drained'),
      onClose: () => events.push('a closed'),
      onError: (code) => events.push(`a error ${code}`),
    },
  );
  await until('both ends open once each has said and heard the relay signal', () => opened === 2);
  server.hold = [];
  a.send(new Uint8Array(3000));
  a.send(new Uint8Array(2000));
  assert.equal(a.bufferedAmount(), 5000, 'held by the server: still in flight');
  for (const deliver of server.hold.splice(0)) deliver();
  server.hold = null;
  await until('both messages delivered', () => events.filter((e) => e.startsWith('b got')).length === 2);
  assert.equal(a.bufferedAmount(), 0);
  assert.ok(events.includes('a drained'));
  // A sender keeps at most RELAY_WINDOW_BYTES with the server; the rest waits on its side, still counted as buffered.
  server.hold = [];
  const message = 256 * 1024;
  for (let i = 0; i < 8; i++) a.send(new Uint8Array(message));
  assert.equal(server.hold.length, RELAY_WINDOW_BYTES / message, 'no more than the window at the server');
  assert.equal(a.bufferedAmount(), 8 * message);
  while (server.hold.length > 0) {
    for (const deliver of server.hold.splice(0)) deliver();
    await until('the window refilled or emptied', () => server.hold!.length > 0 || events.filter((e) => e.startsWith('b got')).length === 10);
  }
  server.hold = null;
  await until('all eight delivered, in order', () => events.filter((e) => e.startsWith('b got')).length === 10);
  assert.equal(a.bufferedAmount(), 0);
  server.gone.add('b2');
  a.send(new Uint8Array(10));
  await until('the link failed', () => events.includes('a error ERR_PEER_FAILED'));
  assert.throws(() => a.send(new Uint8Array(1)), (e: unknown) => e instanceof WebringError && e.code === 'ERR_PEER_FAILED');
  // The other side cannot see the server's refusal: a's side tells it, so both ends report the broken link.
  await until('the other side heard it failed', () => events.includes('b error ERR_PEER_FAILED'));
  b!.destroy();
});

test('the network check\'s probe measures each link over the link itself, direct or through the server', async () => {
  const server = new FakeServer();
  const direct = directWorld();
  const { networks } = classOf(server, { m1: direct, m2: null, m3: direct });
  const g = generation(1, ['m1', 'm2', 'm3']);
  for (const net of networks) net.applyGeneration(g);
  await until('every ring link open', () => networks.every((n) => n.isReadyFor(g)));
  const links = await networks[0]!.probeLinks();
  assert.deepEqual(links.map((l) => [l.peer, l.path]).sort(), [['m2', 'relay'], ['m3', 'direct']]);
  for (const l of links) assert.ok(l.rttMs !== null && l.MBps !== null && l.MBps > 0, JSON.stringify(l));
  assert.ok((server.carried.get('m1') ?? 0) >= 256 * 1024, 'the relayed link\'s probe went through the server');
  // The probe does not disturb the ring: a sum right after it is exact.
  const sums = await sumEverywhere(networks, 1, 1_000);
  for (const b of sums) assert.equal(b[5], 3 * 5 + 3000);
});
