/**
 * The Room on its own, on a manual clock: membership, indexes and generations, the
 * reconnect grace, the ring:evict trust rule, a run's lifecycle and metrics, and the codec.
 * A room with a hub member is in room-hub.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { sendersOf, type EvictRequest } from '../../shared/protocol';
import type { Room } from '../../signaling-server/rooms/room';
import { decodeRoom, encodeRoom, fromRoomFile, toRoomFile, type RoomRecord } from '../../signaling-server/rooms/room-codec';
import { MAX_DROPPED_RECORDS, MAX_EVALUATIONS, RunState } from '../../signaling-server/rooms/run-state';
import { CONFIG, GRACE_MS, codeOf, member, progress, ranks, roomWith } from '../support/room-fixture';

test('members get increasing indexes and each change a new generation; the next-lowest index becomes chief', () => {
  const { room } = roomWith([]);
  assert.deepEqual(['a', 'b', 'c'].map((id) => room.join(member(id)).index), [0, 1, 2]);
  assert.equal(room.currentGeneration, 3);
  assert.deepEqual(ranks(room), ['a', 'b', 'c']);

  const left = room.leave('b');
  assert.equal(left.generation?.generation, 4);
  assert.deepEqual(left.generation?.members.map((m) => [m.id, m.rank]), [['a', 0], ['c', 1]]);
  room.leave('a');
  assert.equal(room.status().chief, 'c');
  assert.equal(room.status().events.at(-1)?.detail, 'chief now student c');
  assert.deepEqual(room.leave('nobody'), { generation: null, trainingAborted: false }, 'an unknown member changes nothing');
  assert.equal(room.join(member('d')).index, 3, 'indexes are never reused');
});

test('students arriving mid-run wait, then are admitted together in one generation after the ring', () => {
  const { room } = roomWith(['a', 'b']);
  room.start(CONFIG, null);
  const generation = room.currentGeneration;
  const joined = ['c', 'd'].map((id) => room.join(member(id)));
  assert.ok(joined.every((j) => j.awaitingAdmission && j.change.generation === null));
  assert.equal(room.size, 4);
  const admission = room.admitWaiting();
  assert.deepEqual(admission?.joiners, ['c', 'd']);
  assert.equal(admission?.generation.generation, generation + 1);
  assert.equal(admission?.start.admitted, true);
  assert.deepEqual(ranks(room), ['a', 'b', 'c', 'd']);
  assert.equal(room.admitWaiting(), null, 'nobody is left waiting');
});

test('admissions are batched: students arriving while one forms wait until the ring trained a step in it, then come in together', () => {
  const { room } = roomWith(['a', 'b']);
  const run = room.start(CONFIG, null).run;
  room.join(member('c'));
  const first = room.admitWaiting()!;
  assert.deepEqual(first.joiners, ['c']);
  // A class walking in: three more while the ring still trains on the old generation.
  for (const id of ['d', 'e', 'f']) room.join(member(id));
  room.recordProgress('a', { ...progress(run, 1), generation: first.generation.generation - 1 });
  assert.equal(room.admitWaiting(), null, 'no second admission while the first forms');
  assert.deepEqual(room.status().waiting.map((m) => m.id), ['d', 'e', 'f']);
  // A step in the admitting generation: the ring switched, and says the next may come.
  const outcome = room.recordProgress('b', { ...progress(run, 2), generation: first.generation.generation });
  assert.equal(outcome.admitNext, true);
  const second = room.admitWaiting()!;
  assert.deepEqual(second.joiners, ['d', 'e', 'f'], 'everyone who waited, in one generation');
  assert.deepEqual(ranks(room), ['a', 'b', 'c', 'd', 'e', 'f']);
  assert.equal(room.recordProgress('a', { ...progress(run, 3), generation: second.generation.generation }).admitNext, false, 'nobody waits now');
});

test('a re-form that cannot reach a member sheds it, named and with a reason, and the run goes on', () => {
  const { room, clock } = roomWith(['a', 'b', 'c', 'd']);
  const run = room.start(CONFIG, null).run;
  const g = room.currentGeneration;
  // c's links are dead: both its neighbours name it; c names them too.
  assert.equal(room.reform('b', g, 'links shut', ['c']).shedDue, true, 'the first report schedules the shedding');
  assert.equal(room.reform('d', g, 'links shut', ['c']).shedDue, false);
  assert.equal(room.reform('c', g, 'links shut', ['b', 'd']).shedDue, false);
  assert.equal(codeOf(() => room.reform('a', g, 'links shut', ['c'])), 'ERR_BAD_REQUEST', 'a member names only its own ring neighbours');
  clock.advance(1_500);
  const shedding = room.shedUnreachable(g);
  assert.deepEqual(shedding.shed.map((s) => s.id), ['c']);
  assert.equal(shedding.shed[0]!.notice.reason, 'unreachable');
  assert.match(shedding.shed[0]!.notice.detail, /student b and student d could not reach it/);
  assert.equal(shedding.change.generation?.generation, g + 1);
  assert.equal(shedding.change.trainingAborted, false);
  assert.deepEqual(ranks(room), ['a', 'b', 'd']);
  const status = room.status();
  assert.equal(status.state, 'training');
  assert.deepEqual(status.dropped.map((d) => [d.name, d.reason]), [['student c', 'unreachable']]);
  assert.equal(status.events.at(-1)?.kind, 'dropped');
  assert.deepEqual(room.shedUnreachable(g).shed, [], 'a generation already gone sheds nothing');

  // One end naming the other is no evidence: nobody is shed on a single word.
  const g2 = room.currentGeneration;
  room.reform('b', g2, 'links shut', ['d']);
  assert.deepEqual(room.shedUnreachable(g2).shed, []);
  assert.deepEqual(ranks(room), ['a', 'b', 'd']);

  // A member whose own run failed leaves the ring; the class trains on.
  const failed = room.recordFinished('d', { run, generation: room.currentGeneration, step: 5, reason: 'failed', code: 'ERR_TIMEOUT', message: 'test' });
  assert.equal(failed.failed?.notice.reason, 'failed');
  assert.equal(failed.change.trainingAborted, false);
  assert.deepEqual(ranks(room), ['a', 'b']);
  assert.equal(room.status().state, 'training');
  // The last one's failure ends the run, which goes back to its checkpoint.
  room.leave('b');
  const last = room.recordFinished('a', { run, generation: room.currentGeneration, step: 5, reason: 'failed', code: 'ERR_TIMEOUT', message: 'test' });
  assert.equal(last.change.trainingAborted, true);
  assert.equal(room.status().lastError?.code, 'ERR_PEER_FAILED');
});

test('a member whose node is gone has the reconnect grace to come back, measured on the room clock', () => {
  const { room, clock } = roomWith(['a', 'b'], 'node-1');
  assert.equal(room.markNodesGone((node) => node !== 'node-1'), true);
  assert.equal(room.markNodesGone((node) => node !== 'node-1'), false, 'already disconnected');
  clock.advance(GRACE_MS - 1);
  assert.deepEqual(room.overdue(GRACE_MS), []);
  assert.deepEqual(room.rejoin('a', member('a').tokenHash, 'socket-a2', 'node-2'), { index: 0 });
  assert.equal(room.rejoin('b', 'f'.repeat(64), 'socket-b2', 'node-2'), null, 'a wrong token does not rejoin');
  clock.advance(1);
  assert.deepEqual(room.overdue(GRACE_MS), ['b']);
  assert.equal(room.currentGeneration, 2, 'a rejoin keeps the generation');
  assert.deepEqual([...room.nodes], ['node-2']);
});

test('after a restart every member restored from room.json is disconnected from then, and overdue after the grace', () => {
  const { room, clock } = roomWith(['a', 'b']);
  clock.advance(5_000);
  const restored = decodeRoom(fromRoomFile(toRoomFile(encodeRoom(room)), clock.now()), clock);
  assert.ok(restored.status().members.every((m) => !m.connected));
  assert.equal(restored.rejoin('a', member('a').tokenHash, 'socket-a2', null)?.index, 0);
  clock.advance(GRACE_MS);
  assert.deepEqual(restored.overdue(GRACE_MS), ['b']);
});

test('ring:evict: a sender is evicted; a non-sender is refused and mutes the reporter; a second accepted accusation evicts the reporter', () => {
  const ids = ['a', 'b', 'c', 'd', 'e', 'f'];
  const { room } = roomWith(ids);
  const { run } = room.start(CONFIG, null);
  const evict = (reporter: string, accused: string): ReturnType<Room['evict']> => {
    const request: EvictRequest = { run, generation: room.currentGeneration, member: accused, step: 3, reason: 'non-finite', detail: '' };
    return room.evict(reporter, request);
  };
  const senderOf = (reporter: string, skip: string[] = []) => {
    const order = ranks(room);
    const rank = [...sendersOf(order.indexOf(reporter), order.length)].map((r) => order[r]!).find((id) => !skip.includes(id));
    assert.ok(rank, `${reporter} has a sender`);
    return rank;
  };
  const nonSenderOf = (reporter: string) => {
    const order = ranks(room);
    const senders = sendersOf(order.indexOf(reporter), order.length);
    return order.find((id, rank) => id !== reporter && !senders.has(rank))!;
  };

  // An honest report: the accused is one of the reporter's senders.
  const accused = senderOf('a');
  const first = evict('a', accused);
  assert.equal(first.refused, null);
  assert.deepEqual(first.evicted.map((e) => e.id), [accused]);
  assert.equal(first.evicted[0]?.notice.misbehaviour, 'non-finite');
  assert.ok(!ranks(room).includes(accused));
  assert.equal(room.status().dropped[0]?.reportedBy, 'student a');

  // A report naming a member that does not send to the reporter is refused, and mutes it.
  const liar = ranks(room).find((id) => id !== 'a')!;
  const refused = evict(liar, nonSenderOf(liar));
  assert.equal(refused.refused?.code, 'ERR_BAD_ACCUSATION');
  assert.deepEqual(refused.evicted, []);
  assert.equal(codeOf(() => evict(liar, senderOf(liar))), 'ERR_BAD_ACCUSATION', 'a muted reporter is refused even about its sender');

  // The first reporter's second accepted accusation evicts the reporter itself.
  const generation = room.currentGeneration;
  const second = evict('a', senderOf('a'));
  assert.deepEqual(second.evicted.map((e) => e.id), ['a']);
  assert.equal(second.evicted[0]?.notice.misbehaviour, 'accusations');
  assert.equal(second.change.generation?.generation, generation + 1);

  // A report of an older generation is refused and held against nobody.
  const stale: EvictRequest = { run, generation: generation - 1, member: ranks(room)[1]!, step: 3, reason: 'length', detail: '' };
  assert.equal(codeOf(() => room.evict(ranks(room)[0]!, stale)), 'ERR_STALE_GENERATION');

  // A new run forgets the accusations and the muting.
  room.requestStop();
  room.recordFinished(ranks(room)[0]!, { run, generation: room.currentGeneration, step: 4, reason: 'stopped' });
  const next = room.start(CONFIG, null);
  const fresh: EvictRequest = { run: next.run, generation: room.currentGeneration, member: senderOf(liar), step: 0, reason: 'length', detail: '' };
  assert.equal(room.evict(liar, fresh).refused, null);
});

test('a run starts, records the chief\'s progress and evaluations, pauses, resumes and finishes', () => {
  const { room, clock } = roomWith(['a', 'b']);
  assert.equal(codeOf(() => room.requestStop()), 'ERR_BAD_STATE');
  const start = room.start(CONFIG, null);
  assert.equal(start.run, 1);
  assert.equal(room.isTraining, true);
  assert.equal(codeOf(() => room.start(CONFIG, null)), 'ERR_BAD_STATE');

  clock.advance(1_000);
  room.recordProgress('a', progress(1, 1, { hashChecked: true }));
  room.recordProgress('b', progress(1, 3));
  assert.equal(room.status().step, 1, 'only the chief\'s report is the room\'s');
  room.recordProgress('a', progress(1, 2, { hashChecked: true, hashMismatch: true }));
  assert.equal(codeOf(() => room.recordProgress('a', progress(2, 3))), 'ERR_STALE_RUN');
  room.recordEvaluation('a', { run: 1, generation: room.currentGeneration, epoch: 0, step: 2, accuracy: 0.9, testLoss: 0.3 });
  room.recordEvaluation('b', { run: 1, generation: room.currentGeneration, epoch: 0, step: 2, accuracy: 0.1, testLoss: 0.3 });

  const status = room.status();
  assert.equal(status.metrics.loss, 1 / 2);
  assert.equal(status.metrics.accuracy, 0.9);
  assert.deepEqual(status.consistency, { checks: 2, mismatches: 1, lastMismatchStep: 2 });
  assert.equal(status.totalSteps, 100);
  assert.equal(status.events.at(-1)?.kind, 'resynced');
  assert.deepEqual(room.metrics().history.map((p) => [p.at, p.step]), [[1_000, 1], [1_000, 2]]);
  assert.deepEqual(room.metrics().evaluations, [{ epoch: 0, step: 2, accuracy: 0.9, testLoss: 0.3 }]);

  room.pause();
  assert.equal(room.status().state, 'paused');
  assert.equal(codeOf(() => room.pause()), 'ERR_BAD_STATE');
  room.resume();
  room.requestStop();
  assert.deepEqual(room.recordFinished('b', { run: 1, generation: room.currentGeneration, step: 9, reason: 'stopped' }).change, { generation: null, trainingAborted: false }, 'only the chief ends a run');
  room.recordFinished('a', { run: 1, generation: room.currentGeneration, step: 3, reason: 'stopped' });
  assert.equal(room.status().state, 'done');
  assert.equal(room.status().step, 3, 'the chief\'s last step, past its last report');
  assert.equal(room.isTraining, false);
});

test("a run on the class's own data has no step estimate until the chief reports one; the members' own counts show, and the hub holds none", () => {
  const { room } = roomWith(['a', 'b']);
  // Counts are taken for the classes the room collects for (small-defects.test.ts shows the refusals).
  room.setCollect({ classes: ['cat', 'sun'] });
  room.recordOwnExamples('a', { counts: { cat: 4, sun: 2 } });
  assert.deepEqual(room.status().members.map((m) => m.ownExamples), [{ cat: 4, sun: 2 }, {}]);
  room.start({ ...CONFIG, data: 'own', classes: ['cat', 'sun'] }, null);
  // Only the devices know how many examples an epoch has: a guess from MNIST's size would mislead the teacher.
  assert.equal(room.status().totalSteps, null);
  room.recordProgress('a', progress(1, 1));
  assert.equal(room.status().totalSteps, 100);
  room.join({ ...member('hub1'), name: 'hub', kind: 'hub' });
  assert.equal(codeOf(() => room.recordOwnExamples('hub1', { counts: { cat: 1 } })), 'ERR_NOT_IN_ROOM');
  assert.equal(codeOf(() => room.recordOwnExamples('nobody', { counts: { cat: 1 } })), 'ERR_NOT_IN_ROOM');
});

test('when every ring member leaves mid-run, the run ends and whoever waited forms the next ring', () => {
  const { room } = roomWith(['a']);
  room.start(CONFIG, null);
  room.join(member('b'));
  const change = room.leave('a');
  assert.equal(change.trainingAborted, true);
  assert.deepEqual(change.generation?.members.map((m) => m.id), ['b']);
  assert.equal(room.status().lastError?.code, 'ERR_MEMBER_LEFT');
});

test('the codec: encode, JSON, decode gives the same room, and the decoded room goes on the same way', () => {
  const { room, clock } = roomWith(['a', 'b', 'c']);
  room.start(CONFIG, null);
  room.recordProgress('a', progress(1, 1));
  room.join(member('d'));
  room.leave('b');
  const record = JSON.parse(JSON.stringify(encodeRoom(room))) as RoomRecord;
  const copy = decodeRoom(record, clock);
  assert.deepEqual(copy.status(), room.status());
  assert.equal(copy.admitWaiting()?.generation.generation, room.admitWaiting()?.generation.generation);
  assert.deepEqual(copy.status(), room.status());

  // room.json keeps membership, generation and the run; connections and telemetry start afresh.
  const restored = decodeRoom(fromRoomFile(toRoomFile(encodeRoom(room)), clock.now()), clock).status();
  const original = room.status();
  assert.deepEqual([restored.generation, restored.run, restored.state, restored.step], [original.generation, original.run, original.state, original.step]);
  assert.deepEqual(restored.members.map((m) => [m.id, m.index, m.rank]), original.members.map((m) => [m.id, m.index, m.rank]));
});

// ---------------------------------------------------------------------------
// The hub member (kind 'hub'): outside the ring, one per room, never ends a run
// ---------------------------------------------------------------------------

test('the codec keeps what a room collects for, in the record and in room.json; records from before load collecting nothing; a collecting room outlives its members', () => {
  const { room, clock } = roomWith(['a']);
  room.setCollect({ classes: ['cat', 'sun'] });
  const copy = decodeRoom(JSON.parse(JSON.stringify(encodeRoom(room))) as RoomRecord, clock);
  assert.deepEqual(copy.status().collect, { classes: ['cat', 'sun'] });
  const file = toRoomFile(encodeRoom(room));
  assert.deepEqual(file.collect, { classes: ['cat', 'sun'] });
  assert.deepEqual(decodeRoom(fromRoomFile(file, clock.now()), clock).collect, { classes: ['cat', 'sun'] });

  const { collect: _collect, ...oldRecord } = JSON.parse(JSON.stringify(encodeRoom(roomWith(['a']).room))) as RoomRecord;
  assert.equal(decodeRoom(oldRecord as RoomRecord, clock).status().collect, null);
  assert.ok(!('collect' in toRoomFile(encodeRoom(roomWith(['a']).room))), 'room.json names it only while the room collects');

  room.leave('a');
  assert.equal(room.isEmpty, true);
  assert.equal(room.isDisposable, false, 'students who reload come back to the same classes');
  room.setCollect(null);
  assert.equal(room.isDisposable, true);
});

test("a run's evaluations and dropped members are kept to their newest MAX_EVALUATIONS and MAX_DROPPED_RECORDS: one member's reports cannot grow the room record without bound (issue 38)", () => {
  const run = new RunState('bounded');
  for (let epoch = 0; epoch < MAX_EVALUATIONS + 50; epoch++) run.recordEvaluation({ run: 1, generation: 1, epoch, step: epoch * 10, accuracy: 0.5, testLoss: 1 }, true, epoch * 1_000);
  const evaluations = run.record.evaluations;
  assert.equal(evaluations.length, MAX_EVALUATIONS);
  assert.equal(evaluations.at(-1)!.epoch, MAX_EVALUATIONS + 49, 'the newest kept');
  assert.equal(evaluations[0]!.epoch, 50, 'the oldest gone first');
  for (let i = 0; i < MAX_DROPPED_RECORDS + 20; i++) {
    run.recordDropped({ id: `m${i}`, name: `m${i}`, index: i, reason: 'failed', step: i, computeMs: 0, deadlineMs: 0, misbehaviour: null, reportedBy: null, detail: 'x', at: i });
  }
  assert.equal(run.record.dropped.length, MAX_DROPPED_RECORDS);
  assert.equal(run.record.dropped.at(-1)!.step, MAX_DROPPED_RECORDS + 19, 'the newest drop kept: the one-drop-per-step rule reads it');
});
