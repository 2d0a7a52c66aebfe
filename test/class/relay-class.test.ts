/**
 * A class where half the devices can open no WebRTC link (`--peer-links off`: every link of
 * theirs goes through the teacher's server, shared/network/relay-link.ts), as real Node
 * workers on loopback: both paths carry one ring at once, in lock-step with one hash, and
 * nobody is shed. Then a relayed worker is killed (kill -9) and the class trains on without
 * it, and a relayed joiner comes in mid-run through the relay, its state hand-over too. The
 * teacher's room API names the relayed devices and their partners. A whole class with
 * WebRTC off, and a secure run over the relay: test/server/link-relay.test.ts.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTestServer } from '../support/server';
import { classRoom } from '../support/class-room';
import type { RunningServer } from '../../signaling-server/server';
import type { RoomStatus } from '../../shared/protocol';

let server: RunningServer;
const klass = classRoom(() => server, 'relay-class');
const { workers, waitFor } = klass;
const spawnWorker = klass.spawn;
const room = klass.status;

/** Every ring member reported the same step, past `after`, with the same weights. */
function inLockStep(r: RoomStatus, names: string[], after: number): boolean {
  const steps = new Set(r.members.map((m) => m.step));
  const hashes = new Set(r.members.map((m) => m.weightsHash));
  const present = r.members.map((m) => m.name).sort();
  return JSON.stringify(present) === JSON.stringify([...names].sort()) && r.waiting.length === 0 && steps.size === 1 && hashes.size === 1 && r.members[0]!.step > after;
}

const idOf = (r: RoomStatus, name: string): string => r.members.find((m) => m.name === name)!.id;

before(async () => {
  server = await startTestServer();
  spawnWorker('direct-0');
  spawnWorker('relayed-1', ['--peer-links', 'off']);
  spawnWorker('direct-2');
  spawnWorker('relayed-3', ['--peer-links', 'off']);
  await waitFor('four workers in the room', async () => (await room()).members.length === 4, 120_000);
});

after(async () => {
  for (const w of workers) w.child.kill('SIGKILL');
  await server.close();
});

test('a mixed class trains over both paths at once: the relayed devices go through the server, the others keep their direct links, nobody is shed', async () => {
  assert.equal(await klass.teacher('start', { model: 'mlp', maxSteps: 100_000, resumeFrom: 'none' }), 200);
  const names = ['direct-0', 'relayed-1', 'direct-2', 'relayed-3'];
  const r = await waitFor('four in lock-step past step 5', async () => {
    const s = await room();
    return inLockStep(s, names, 5) && s.relay.members.length > 0 && s;
  }, 120_000);
  assert.deepEqual(r.dropped, [], 'nobody was shed');
  const relayed = new Map(r.relay.members.map((m) => [m.id, m.peers]));
  // The relayed devices relay to every partner they have; a direct pair never uses the server.
  for (const name of ['relayed-1', 'relayed-3']) assert.ok((relayed.get(idOf(r, name))?.length ?? 0) >= 2, `${name} relays to its partners: ${JSON.stringify(r.relay.members)}`);
  const directPair = [idOf(r, 'direct-0'), idOf(r, 'direct-2')];
  for (const [from, peers] of relayed) if (directPair.includes(from)) assert.ok(!peers.some((p) => directPair.includes(p)), 'the two direct devices link directly');
  for (const name of ['relayed-1', 'relayed-3']) {
    const w = workers.find((x) => x.name === name)!;
    assert.ok(w.output.some((l) => /goes through the server: this device opens no WebRTC links/.test(l)), `${name} says why its links go through the server`);
  }
});

test('a relayed device killed mid-run is trained around, and a relayed joiner comes in through the relay, hand-over and all', async () => {
  const before = await room();
  workers.find((w) => w.name === 'relayed-3')!.child.kill('SIGKILL');
  const three = ['direct-0', 'relayed-1', 'direct-2'];
  const after = await waitFor('three in lock-step after the kill', async () => {
    const s = await room();
    return inLockStep(s, three, before.step + 2) && s;
  }, 120_000);
  assert.equal(after.run, before.run, 'the same run');
  assert.equal(after.lastError, null);

  spawnWorker('relayed-4', ['--peer-links', 'off']);
  const four = await waitFor('the relayed joiner in lock-step', async () => {
    const s = await room();
    return inLockStep(s, [...three, 'relayed-4'], after.step + 2) && s;
  }, 180_000);
  assert.equal(four.run, before.run, 'the same run: the joiner was admitted, not restarted');
  assert.equal(four.state, 'training');
  assert.ok(four.relay.members.some((m) => m.id === idOf(four, 'relayed-4')), 'the joiner relays');
  assert.deepEqual(four.dropped.filter((d) => d.name !== 'relayed-3'), [], 'nobody but the killed device left');
});
