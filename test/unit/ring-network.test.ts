/**
 * RingNetwork over an in-memory PeerFactory: who dials whom, links kept or dropped across
 * generations, and all-reduces over the resulting ring. Real WebRTC peers: rtc-peer.test.ts
 * (in Node), the Playwright tests (tabs) and the benchmark.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { AUTO_REDIAL_DELAY_MS, RETIRED_LINK_GRACE_MS, RingNetwork } from '../../shared/network/ring-network';
import { ManualClock, type Clock } from '../../shared/util/clock';
import type { PeerEvents, PeerFactory, PeerHandle } from '../../shared/network/peer';
import type { Generation, MemberInfo } from '../../shared/protocol';
import { WebringError } from '../../shared/protocol/errors';

interface FakePeer extends PeerHandle {
  events: PeerEvents;
  remote: FakePeer | null;
  destroyed: boolean;
}

/** A tiny in-process "WebRTC": an offer/answer exchange over the relay, then async delivery. */
function createWorld(clock?: Clock) {
  const networks = new Map<string, RingNetwork>();
  const created: Array<{ owner: string; initiator: boolean; peer?: FakePeer }> = [];
  const pendingByLink = new Map<string, FakePeer>();
  const factoryFor =
    (owner: string): PeerFactory =>
    ({ initiator }, events) => {
      created.push({ owner, initiator });
      const peer: FakePeer = {
        events,
        remote: null,
        destroyed: false,
        signal(data) {
          if (data.type === 'offer') {
            const offerer = pendingByLink.get(data.linkTag as string)!;
            peer.remote = offerer;
            offerer.remote = peer;
            setImmediate(() => events.onSignal({ type: 'answer', linkTag: data.linkTag }));
          } else if (data.type === 'answer') {
            setImmediate(() => {
              peer.events.onConnect();
              peer.remote!.events.onConnect();
            });
          }
        },
        send(bytes) {
          const copy = bytes.slice();
          // A closed connection delivers nothing more, in either direction: what was in flight is lost.
          setImmediate(() => !peer.destroyed && peer.remote && !peer.remote.destroyed && peer.remote.events.onData(copy));
        },
        bufferedAmount: () => 0,
        destroy() {
          peer.destroyed = true;
        },
      };
      if (initiator) {
        const tag = `${owner}-${created.length}`;
        pendingByLink.set(tag, peer);
        setImmediate(() => events.onSignal({ type: 'offer', linkTag: tag }));
      }
      created[created.length - 1]!.peer = peer;
      return peer;
    };
  const add = (id: string) => {
    const net = new RingNetwork({
      selfId: id,
      factory: factoryFor(id),
      sendSignal: (to, linkId, data) => setImmediate(() => networks.get(to)?.handleSignal(id, linkId, data)),
      log: () => {},
      clock,
    });
    networks.set(id, net);
    return net;
  };
  /** The live fake peers of the connection between two members (one on each side). */
  const peersBetween = (a: string, b: string): FakePeer[] =>
    created
      .map((c) => ({ owner: c.owner, peer: c.peer! }))
      .filter(({ owner, peer }) => !peer.destroyed && peer.remote && ((owner === a && created.find((c) => c.peer === peer.remote)?.owner === b) || (owner === b && created.find((c) => c.peer === peer.remote)?.owner === a)))
      .map(({ peer }) => peer);
  return { networks, created, add, peersBetween };
}

function generation(n: number, ids: string[]): Generation {
  const members = ids.map(
    (id, rank): MemberInfo => ({ id, name: id, index: Number(id.slice(1)), rank, backend: 'cpu', kind: 'node', adapter: null, examplesPerSec: 0, step: 0, weightsHash: null, computeMs: 0, batchShare: 0, linkMBps: 0, learningRate: 0.001, speedVsMedian: 1, collective: null, bytesSent: 0, probe: null, ownExamples: {}, connected: true, connecting: false, node: null }),
  );
  return { room: 'r', generation: n, members };
}

async function allReduceEverywhere(nets: RingNetwork[], step: number): Promise<Float32Array[]> {
  const bufs = nets.map((_, r) => Float32Array.from({ length: 10 }, (_, i) => i + 100 * r));
  await Promise.all(nets.map((net, r) => net.collective!.allReduce(bufs[r]!, step)));
  return bufs;
}

test('a ring of three dials by lower index, all-reduces, and re-forms when a member leaves', async () => {
  const world = createWorld();
  const ids = ['m10', 'm11', 'm12'];
  const nets = ids.map((id) => world.add(id));
  const g1 = generation(1, ids);
  for (const net of nets) net.applyGeneration(g1);
  // Three links in a ring of three; the lower index always dials.
  assert.deepEqual(
    world.created.filter((c) => c.initiator).map((c) => c.owner).sort(),
    ['m10', 'm10', 'm11'],
  );
  const sums = await allReduceEverywhere(nets, 1);
  for (const b of sums) assert.deepEqual(Array.from(b), Array.from({ length: 10 }, (_, i) => 3 * i + 300));

  // m10 (the chief) leaves: m11 and m12 keep their link and form a ring of two.
  const old = nets[1]!.collective!;
  const inFlight = old.allReduce(new Float32Array(4), 2);
  const before = world.created.length;
  const g2 = generation(2, ['m11', 'm12']);
  nets[1]!.applyGeneration(g2);
  nets[2]!.applyGeneration(g2);
  await assert.rejects(inFlight, (e: unknown) => e instanceof WebringError && e.code === 'ERR_STALE_GENERATION');
  assert.equal(world.created.length, before, 'the m11-m12 link is reused, not redialled');
  const pair = await allReduceEverywhere([nets[1]!, nets[2]!], 3);
  for (const b of pair) assert.deepEqual(Array.from(b), Array.from({ length: 10 }, (_, i) => 2 * i + 100));
});

test('a ring of two shares one link in both directions; a ring of one needs none', async () => {
  const world = createWorld();
  const nets = ['m1', 'm2'].map((id) => world.add(id));
  for (const net of nets) net.applyGeneration(generation(1, ['m1', 'm2']));
  const sums = await allReduceEverywhere(nets, 1);
  assert.equal(world.created.length, 2, 'one initiator and one responder');
  for (const b of sums) assert.equal(b[1], 1 + 101);

  const solo = world.add('m3');
  const ring = solo.applyGeneration(generation(1, ['m3']))!;
  const buf = Float32Array.of(1, 2, 3);
  await ring.allReduce(buf, 1);
  assert.deepEqual(Array.from(buf), [1, 2, 3]);
});

test('a new link from the side that never dials is ignored: the open link and the ring stay as they are', async () => {
  const world = createWorld();
  const nets = ['m1', 'm2'].map((id) => world.add(id));
  for (const net of nets) net.applyGeneration(generation(1, ['m1', 'm2']));
  await allReduceEverywhere(nets, 1);
  const links = world.created.length;
  // m2 (the higher index, which never dials) opens a fresh link to m1, as a relayed one and as an offer.
  nets[0]!.handleSignal('m2', 'm2-fresh-relay', { type: 'relay' });
  assert.equal(world.created.length, links, 'm1 opened no connection for the relayed one');
  nets[0]!.handleSignal('m2', 'm2-fresh-offer', { type: 'offer', linkTag: 'none' });
  assert.equal(world.created.length, links, 'm1 opened no connection for the offer');
  assert.equal(world.peersBetween('m1', 'm2').length, 2, 'the link both sides dialled is still open at both ends');
  const sums = await allReduceEverywhere(nets, 2);
  for (const b of sums) assert.equal(b[1], 1 + 101);
});

test('a worker that is not in the generation has no collective and drops its links', async () => {
  const world = createWorld();
  const nets = ['m1', 'm2'].map((id) => world.add(id));
  for (const net of nets) net.applyGeneration(generation(1, ['m1', 'm2']));
  await allReduceEverywhere(nets, 1);
  assert.equal(nets[1]!.applyGeneration(generation(2, ['m1'])), null);
  assert.equal(nets[1]!.collective, null);
});

test('joiners are connected before the switch, and a neighbour one generation ahead loses no message', async () => {
  const world = createWorld();
  const ids = ['m1', 'm2'];
  const nets = ids.map((id) => world.add(id));
  const g1 = generation(1, ids);
  for (const net of nets) net.applyGeneration(g1);
  await allReduceEverywhere(nets, 1);

  // m3 joins: the survivors prepare generation 2 while generation 1 keeps working.
  const joiner = world.add('m3');
  const g2 = generation(2, ['m1', 'm2', 'm3']);
  joiner.applyGeneration(g2);
  assert.equal(nets[0]!.isReadyFor(g2), false);
  for (const net of nets) net.prepare(g2);
  await new Promise((r) => setTimeout(r, 20));
  assert.ok([...nets, joiner].every((n) => n.isReadyFor(g2)), 'every link of generation 2 is open');
  await allReduceEverywhere(nets, 2); // generation 1 still trains over its own links
  assert.equal(nets[0]!.collective!.generation, 1);

  // m1 and the joiner switch first and start the hand-over; m2 switches a moment later.
  nets[0]!.applyGeneration(g2);
  const early = [nets[0]!, joiner].map((n, i) => n.collective!.allReduce(Float32Array.of(i === 0 ? 5 : 0, 1), 0));
  await new Promise((r) => setTimeout(r, 20));
  nets[1]!.applyGeneration(g2);
  const late = nets[1]!.collective!.allReduce(Float32Array.of(0, 1), 0);
  await Promise.all([...early, late]);
  const bufs = [Float32Array.of(5, 1), Float32Array.of(0, 1), Float32Array.of(0, 1)];
  await Promise.all([nets[0]!, nets[1]!, joiner].map((n, r) => n.collective!.allReduce(bufs[r]!, 1)));
  for (const b of bufs) assert.deepEqual(Array.from(b), [5, 3]);
});

test('a link the new generation drops stays open while its peer finishes the old step: the chief still gets the last rank\'s last chunk', async () => {
  const clock = new ManualClock();
  const world = createWorld(clock);
  const ids = ['m1', 'm2', 'm3', 'm4'];
  const nets = ids.map((id) => world.add(id));
  const g1 = generation(1, ids);
  for (const net of nets) net.applyGeneration(g1);
  await new Promise((r) => setTimeout(r, 20));
  // m5 is appended: the last rank's right neighbour becomes m5, and at N = 5 m4 and the chief
  // are neither neighbours nor halving-doubling partners, so m4 no longer needs that link.
  const g2 = generation(2, [...ids, 'm5']);
  const joiner = world.add('m5');
  joiner.applyGeneration(g2);
  for (const net of nets) net.prepare(g2);
  await new Promise((r) => setTimeout(r, 20));
  // The last step of generation 1: m4 switches the moment its own part is done, before the chief has received all of it.
  const bufs = nets.map((_, r) => Float32Array.from({ length: 4096 }, (_, i) => i + r));
  const done = nets.map((net, r) => net.collective!.allReduce(bufs[r]!, 7));
  const switched = done[3]!.then(() => nets[3]!.applyGeneration(g2));
  await Promise.all([...done, switched]);
  for (const b of bufs) assert.equal(b[10], 4 * 10 + 6, 'every rank, the chief included, completed the step with the whole sum');
  assert.equal(world.peersBetween('m1', 'm4').length, 2, 'the dropped link is still open during the grace period');
  clock.advance(RETIRED_LINK_GRACE_MS);
  const m4Ends = world.created.filter((c) => c.owner === 'm4' && world.created.find((o) => o.peer === c.peer!.remote)?.owner === 'm1');
  assert.ok(m4Ends.length > 0 && m4Ends.every((c) => c.peer!.destroyed), "m4 closes its end after it (the chief's end closes when the chief moves on)");
});

test('a failed link is dialled again when the ring re-forms with the same members', async () => {
  const world = createWorld();
  const ids = ['m1', 'm2', 'm3'];
  const nets = ids.map((id) => world.add(id));
  for (const net of nets) net.applyGeneration(generation(1, ids));
  await allReduceEverywhere(nets, 1);
  const dialled = world.created.length;
  // The m1-m2 connection dies on both ends.
  const peers = world.peersBetween('m1', 'm2');
  for (const p of peers) p.events.onClose();
  await assert.rejects(nets[0]!.collective!.allReduce(new Float32Array(8), 2));
  for (const net of nets) net.applyGeneration(generation(2, ids));
  assert.equal(world.created.length, dialled + 1, 'm1 dials m2 again; the other links stay');
  const sums = await allReduceEverywhere(nets, 3);
  for (const b of sums) assert.equal(b[0], 300);
});

test('a link closed by the other side while still needed is dialled again without a new generation', async () => {
  const clock = new ManualClock();
  const world = createWorld(clock);
  const ids = ['m1', 'm2', 'm3', 'm4'];
  const nets = ids.map((id) => world.add(id));
  for (const net of nets) net.applyGeneration(generation(1, ids));
  await allReduceEverywhere(nets, 1);
  const dialled = world.created.length;
  // m2 closes its end of the m1-m2 connection (as a member that applied the generations in
  // another order would); m1 sees the close, as the data channel reports it.
  const [a, b] = world.peersBetween('m1', 'm2');
  a!.destroy();
  b!.destroy();
  a!.events.onClose();
  b!.events.onClose();
  assert.equal(world.created.length, dialled, 'nothing is dialled before the redial delay');
  clock.advance(AUTO_REDIAL_DELAY_MS);
  // The new connection's offer and answer travel on immediates.
  await new Promise((resolve) => setTimeout(resolve, 20));
  assert.equal(world.created.length, dialled + 2, 'm1 dialled m2 again (one peer on each side)');
  // The ring all-reduces again in the same generation, over the new connection.
  const sums = await allReduceEverywhere(nets, 2);
  for (const s of sums) assert.equal(s[0], 600);
});

test('a sender waiting on a full link resumes when the buffer drains, even if the peer never fires bufferedamountlow (as @roamhq/wrtc)', async () => {
  const world = createWorld();
  const nets = ['m1', 'm2'].map((id) => world.add(id));
  for (const net of nets) net.applyGeneration(generation(1, ['m1', 'm2']));
  await allReduceEverywhere(nets, 1);
  const [peer] = world.peersBetween('m1', 'm2').filter((p) => world.created.find((c) => c.peer === p)?.owner === 'm1');
  let buffered = 12 * 1024 * 1024;
  peer!.bufferedAmount = () => buffered;
  let resumed = false;
  const waiting = nets[0]!.rightLink!.whenWritable().then(() => (resumed = true));
  await new Promise((r) => setTimeout(r, 60));
  assert.equal(resumed, false, 'still above the low-water mark');
  buffered = 0; // drained, and no onDrain event follows
  await Promise.race([waiting, new Promise((_, reject) => setTimeout(() => reject(new Error('never resumed')), 500))]);
  assert.equal(resumed, true);
});

test('with a hub, every rank links to it and the hub sums: the ranks get the sum, and meshReady ignores the hub link', async () => {
  const world = createWorld();
  const ids = ['m10', 'm11', 'm12'];
  const nets = ids.map((id) => world.add(id));
  const hubNet = world.add('m20');
  const g = generation(1, ids);
  g.hub = { ...g.members[0]!, id: 'm20', name: 'hub', index: 20, rank: null, kind: 'hub' };
  for (const net of [...nets, hubNet]) net.applyGeneration(g);
  assert.equal(hubNet.collective, null);
  assert.ok(hubNet.hubReducer);
  await allReduceEverywhere(nets, 1); // the ring, with the hub's links opening beside it
  for (let i = 0; i < 50 && !nets.every((n) => n.hubReady); i++) await new Promise((r) => setImmediate(r));
  assert.ok(nets.every((n) => n.hubReady && n.meshReady));
  const bufs = nets.map((_, r) => Float32Array.from({ length: 10 }, (_, i) => i + 100 * r));
  await Promise.all(nets.map((net, r) => net.collective!.allReduce(bufs[r]!, 2, undefined, { algorithm: 'hub' })));
  for (const b of bufs) assert.deepEqual(Array.from(b), Array.from({ length: 10 }, (_, i) => 3 * i + 300));
  assert.equal(hubNet.hubReducer!.chunksReduced, 1);

  // The hub leaves: a generation without it; nobody is hub-ready, the ring still runs.
  const g2 = generation(2, ids);
  for (const net of nets) net.applyGeneration(g2);
  hubNet.applyGeneration(g2);
  assert.equal(hubNet.hubReducer, null);
  assert.ok(nets.every((n) => !n.hubReady));
  await allReduceEverywhere(nets, 3);
});
