/**
 * The Room with a hub member, on a manual clock: the hub joins and leaves as a generation of
 * its own beside the same ring, counts against the room's size, has the reconnect grace,
 * accuses and is accused under ring:evict's rules for a hub, and survives the codec.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MAX_ROOM_MEMBERS } from '../../shared/protocol';
import type { NewMember, Room } from '../../signaling-server/rooms/room';
import { decodeRoom, encodeRoom, fromRoomFile, toRoomFile, type RoomRecord } from '../../signaling-server/rooms/room-codec';
import { CONFIG, GRACE_MS, codeOf, member, progress, roomWith } from '../support/room-fixture';

const hubMember = (id = 'hub1'): NewMember => ({ ...member(id), name: 'hub', kind: 'hub' });

test('a hub joins in any state as a new generation with the same ring; a second is refused; it leaves without ending a run', () => {
  const { room } = roomWith(['a', 'b']);
  const { run } = room.start(CONFIG, null);
  const before = room.currentGeneration;
  const joined = room.join(hubMember());
  assert.equal(joined.awaitingAdmission, false);
  assert.equal(joined.index, 2, 'the hub takes the next index');
  assert.equal(joined.change.generation?.generation, before + 1);
  assert.deepEqual(joined.change.generation?.members.map((m) => m.id), ['a', 'b'], 'the ring is unchanged');
  assert.deepEqual([joined.change.generation?.hub?.id, joined.change.generation?.hub?.rank, joined.change.generation?.hub?.kind], ['hub1', null, 'hub']);
  const status = room.status();
  assert.deepEqual([status.hub?.id, status.chief, status.waiting.length, status.totalSteps], ['hub1', 'a', 0, status.totalSteps]);
  assert.equal(status.events.at(-1)?.kind, 'hub-joined');
  assert.equal(room.size, 3);

  assert.equal(codeOf(() => room.join(hubMember('hub2'))), 'ERR_HUB_TAKEN');
  assert.equal(room.currentGeneration, before + 1, 'a refused hub changes nothing');
  assert.equal(room.size, 3);

  // The hub trains nothing: its reports are refused like a non-member's, and change nothing.
  assert.equal(codeOf(() => room.recordProgress('hub1', progress(run, 1))), 'ERR_NOT_IN_ROOM');
  assert.equal(codeOf(() => room.recordEvaluation('hub1', { run, generation: room.currentGeneration, epoch: 0, step: 1, accuracy: 1, testLoss: 0.3 })), 'ERR_NOT_IN_ROOM');
  assert.equal(codeOf(() => room.recordFinished('hub1', { run, generation: room.currentGeneration, step: 1, reason: 'failed' })), 'ERR_NOT_IN_ROOM');
  assert.equal(codeOf(() => room.drop('hub1', { run, generation: room.currentGeneration, member: 'b', step: 1, computeMs: 1, deadlineMs: 1 })), 'ERR_NOT_IN_ROOM');
  assert.equal(codeOf(() => room.reform('hub1', room.currentGeneration, 'test')), 'ERR_NOT_IN_ROOM');
  assert.deepEqual([room.status().state, room.status().step, room.currentGeneration], ['training', 0, before + 1]);
  // ...and the chief cannot drop it as a straggler.
  assert.equal(codeOf(() => room.drop('a', { run, generation: room.currentGeneration, member: 'hub1', step: 1, computeMs: 1, deadlineMs: 1 })), 'ERR_NOT_IN_ROOM');

  const left = room.leave('hub1');
  assert.equal(left.trainingAborted, false);
  assert.equal(left.generation?.generation, before + 2);
  assert.equal(left.generation?.hub, null);
  assert.deepEqual(left.generation?.members.map((m) => m.id), ['a', 'b']);
  assert.deepEqual([room.status().state, room.status().hub, room.status().events.at(-1)?.kind], ['training', null, 'hub-left']);
  assert.equal(room.join(hubMember('hub2')).change.generation?.hub?.id, 'hub2', 'the place is free again');
});

test('a hub alone is no worker: the room has no ring to train, and a hub keeps its room while it stays', () => {
  const { room } = roomWith([]);
  room.join(hubMember());
  assert.equal(codeOf(() => room.start(CONFIG, null)), 'ERR_NO_WORKERS');
  assert.equal(room.isEmpty, false);
  assert.equal(room.hasWorkers, false);
  assert.equal(room.status().chief, null);
  const a = room.join(member('a'));
  assert.equal(a.awaitingAdmission, false);
  assert.equal(room.status().chief, 'a', 'the first student is chief, not the hub');
  assert.deepEqual(room.memberByTokenHash(hubMember().tokenHash), { id: 'hub1', chief: false }, 'its token reads the room');
});

test('the hub counts against MAX_ROOM_MEMBERS', () => {
  const { room } = roomWith(Array.from({ length: MAX_ROOM_MEMBERS - 1 }, (_, i) => `m${i}`));
  room.join(hubMember());
  assert.equal(codeOf(() => room.join(member('late'))), 'ERR_ROOM_FULL');
});

test('the hub has the reconnect grace like anyone, and is dropped once overdue without ending the run', () => {
  const { room, clock } = roomWith(['a', 'b'], 'node-1');
  room.start(CONFIG, null);
  room.join({ ...hubMember(), node: 'node-2' });
  assert.equal(room.markNodesGone((node) => node !== 'node-2'), true);
  assert.equal(room.status().hub?.connected, false);
  assert.deepEqual(room.rejoin('hub1', hubMember().tokenHash, 'socket-hub-2', 'node-1'), { index: 2 });
  assert.equal(room.status().hub?.connected, true);
  room.markNodesGone((node) => node !== 'node-1');
  clock.advance(GRACE_MS);
  assert.deepEqual(room.overdue(GRACE_MS).sort(), ['a', 'b', 'hub1']);
  const change = room.leave('hub1');
  assert.equal(change.trainingAborted, false);
  assert.equal(room.isTraining, true);
});

test('ring:evict with a hub: the hub may accuse any rank; a rank naming the hub is recorded, and only a majority of the ring removes it, for the run', () => {
  const { room } = roomWith(['a', 'b', 'c', 'd']);
  const { run } = room.start(CONFIG, null);
  room.join(hubMember());
  const evict = (reporter: string, accused: string): ReturnType<Room['evict']> =>
    room.evict(reporter, { run, generation: room.currentGeneration, member: accused, step: 5, reason: 'length', detail: '' });

  // Every rank sends to the hub in the hub collective, so the hub may name any of them.
  const byHub = evict('hub1', 'c');
  assert.equal(byHub.refused, null);
  assert.deepEqual(byHub.evicted.map((e) => e.id), ['c']);
  assert.deepEqual(room.status().dropped.map((d) => [d.name, d.reason, d.reportedBy]), [['student c', 'evicted', 'hub']]);
  assert.equal(room.status().hub?.id, 'hub1', 'the hub stays');

  // One ring member names the hub: recorded, nobody goes, no new generation; naming it again counts once.
  const generation = room.currentGeneration;
  for (let i = 0; i < 2; i++) {
    const ofHub = evict('d', 'hub1');
    assert.deepEqual([ofHub.refused, ofHub.evicted, ofHub.change.generation], [null, [], null]);
  }
  let status = room.status();
  assert.deepEqual([status.hub?.id, room.currentGeneration, status.events.at(-1)?.kind, status.hubAccess.accusers, status.hubAccess.accusersNeeded], ['hub1', generation, 'hub-accused', ['student d'], 2]);
  // It cost d none of its allowance: its own sender's eviction is judged as a first accusation.
  assert.equal(status.dropped.length, 1);

  // A second ring member makes a majority (2 of a, b, d): the server removes the hub, the run goes on with the ring.
  const ofHub = evict('a', 'hub1');
  assert.equal(ofHub.refused, null);
  assert.deepEqual(ofHub.evicted.map((e) => [e.id, e.notice.misbehaviour]), [['hub1', 'length']]);
  assert.equal(ofHub.change.trainingAborted, false);
  assert.equal(ofHub.change.generation?.generation, generation + 1);
  assert.equal(ofHub.change.generation?.hub, null);
  assert.deepEqual(ofHub.change.generation?.members.map((m) => m.id), ['a', 'b', 'd']);
  status = room.status();
  assert.deepEqual([status.state, status.hub, status.events.at(-1)?.kind, status.hubAccess.barred?.by], ['training', null, 'hub-removed', 'server']);
  assert.deepEqual(status.dropped.at(-1) && [status.dropped.at(-1)!.id, status.dropped.at(-1)!.reason, status.dropped.at(-1)!.reportedBy], ['hub1', 'evicted', 'student d, student a']);
  // No hub joins again in this run; once it ends, the bar is gone.
  assert.equal(codeOf(() => room.join(hubMember('hub2'))), 'ERR_HUB_REMOVED');
  room.recordFinished('a', { run, generation: room.currentGeneration, step: 6, reason: 'stopped' });
  assert.equal(room.hubBarred(), null);
  assert.equal(room.join(hubMember('hub2')).change.generation?.hub?.id, 'hub2');
  room.leave('hub2');

  // Without a hub in the generation, naming the (gone) hub is refused and mutes the reporter.
  const refused = evict('a', 'hub1');
  assert.equal(refused.refused?.code, 'ERR_BAD_ACCUSATION');
  assert.equal(codeOf(() => evict('a', 'b')), 'ERR_BAD_ACCUSATION', 'a is muted');
});

test('ring:evict with a hub: a hub naming a member outside the ring is refused and muted; its second accepted accusation evicts the hub', () => {
  const { room } = roomWith(['a', 'b', 'c']);
  const { run } = room.start(CONFIG, null);
  room.join(hubMember());
  room.join(member('w')); // waits for admission: sends nothing yet
  const evict = (reporter: string, accused: string): ReturnType<Room['evict']> =>
    room.evict(reporter, { run, generation: room.currentGeneration, member: accused, step: 5, reason: 'length', detail: '' });
  assert.equal(evict('hub1', 'hub1').refused?.code, 'ERR_BAD_ACCUSATION', 'the hub does not send to itself');

  const { room: room2 } = roomWith(['a', 'b', 'c']);
  const run2 = room2.start(CONFIG, null).run;
  room2.join(hubMember());
  const evict2 = (reporter: string, accused: string): ReturnType<Room['evict']> =>
    room2.evict(reporter, { run: run2, generation: room2.currentGeneration, member: accused, step: 5, reason: 'length', detail: '' });
  assert.equal(evict2('hub1', 'w').refused?.code, 'ERR_BAD_ACCUSATION', 'nobody of that id sends to the hub');
  assert.equal(codeOf(() => evict2('hub1', 'a')), 'ERR_BAD_ACCUSATION', 'the hub is muted for the run');

  const { room: room3 } = roomWith(['a', 'b', 'c']);
  const run3 = room3.start(CONFIG, null).run;
  room3.join(hubMember());
  const evict3 = (reporter: string, accused: string): ReturnType<Room['evict']> =>
    room3.evict(reporter, { run: run3, generation: room3.currentGeneration, member: accused, step: 5, reason: 'length', detail: '' });
  assert.deepEqual(evict3('hub1', 'a').evicted.map((e) => e.id), ['a']);
  const second = evict3('hub1', 'b');
  assert.deepEqual(second.evicted.map((e) => [e.id, e.notice.misbehaviour]), [['hub1', 'accusations']]);
  assert.equal(second.change.trainingAborted, false);
  assert.deepEqual([room3.status().hub, room3.status().members.map((m) => m.id), room3.status().state], [null, ['b', 'c'], 'training']);
});

test('the codec keeps the hub, in the record and in room.json; records and files from before the hub load without one', () => {
  const { room, clock } = roomWith(['a', 'b']);
  room.join(hubMember());
  const record = JSON.parse(JSON.stringify(encodeRoom(room))) as RoomRecord;
  const copy = decodeRoom(record, clock);
  assert.deepEqual(copy.status(), room.status());
  assert.equal(copy.status().hub?.id, 'hub1');
  assert.equal(codeOf(() => copy.join(hubMember('hub2'))), 'ERR_HUB_TAKEN', 'the decoded room still has its hub');

  const file = toRoomFile(encodeRoom(room));
  assert.equal(file.hub?.id, 'hub1');
  const restored = decodeRoom(fromRoomFile(file, clock.now()), clock);
  assert.deepEqual([restored.status().hub?.id, restored.status().hub?.connected, restored.status().hub?.rank], ['hub1', false, null]);
  assert.deepEqual(restored.rejoin('hub1', hubMember().tokenHash, 'socket-hub-2', null), { index: 2 }, 'the hub comes back with its token after a restart');

  // Before the hub: no `hub` field at all.
  const { hub: _hub, ...oldRecord } = JSON.parse(JSON.stringify(encodeRoom(roomWith(['a']).room))) as RoomRecord;
  const old = decodeRoom(oldRecord as RoomRecord, clock);
  assert.equal(old.status().hub, null);
  assert.equal(old.snapshot().hub, null);
  assert.equal(old.join(hubMember()).change.generation?.hub?.id, 'hub1');
  const oldFile = toRoomFile(encodeRoom(roomWith(['a']).room));
  assert.ok(!('hub' in oldFile), 'room.json names the hub only while there is one');
  assert.equal(decodeRoom(fromRoomFile(oldFile, clock.now()), clock).status().hub, null);
});
