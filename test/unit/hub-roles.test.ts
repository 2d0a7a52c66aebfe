/**
 * Who may be the hub, without sockets: the accusation rule for the hub (accusations.ts), the
 * room's bar on hub joins (the teacher's until allowed, the server's until the run ends),
 * the bar kept through the codec and room.json, and the hub key's derivation.
 */
import { DEFAULT_START_CONFIG } from '../../shared/tasks/start-config';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ManualClock } from '../../shared/util/clock';
import { HUB_RANK, hubKeySchema, type StartConfig } from '../../shared/protocol';
import { Accusations, hubAccusersNeeded } from '../../signaling-server/rooms/accusations';
import { Room, type NewMember } from '../../signaling-server/rooms/room';
import { decodeRoom, encodeRoom, fromRoomFile, toRoomFile, type RoomRecord } from '../../signaling-server/rooms/room-codec';
import { RoomPersistence } from '../../signaling-server/rooms/room-persistence';
import { createLogger } from '../../signaling-server/logger';
import { hubKeyFor, hubKeyMatches, joinCodeFor } from '../../signaling-server/edge/join-codes';

const CONFIG: StartConfig = { ...DEFAULT_START_CONFIG, resumeFrom: 'none' };

const member = (id: string, kind: NewMember['kind'] = 'node'): NewMember => ({
  id,
  socketId: `socket-${id}`,
  tokenHash: id.padEnd(64, '0'),
  name: kind === 'hub' ? 'hub' : `student ${id}`,
  backend: 'cpu',
  kind,
  adapter: null,
  node: null,
});

function codeOf(fn: () => unknown): string {
  try {
    fn();
    return 'none';
  } catch (err) {
    return (err as { code?: string }).code ?? String(err);
  }
}

test('a majority is needed to remove the hub: 1 of 1, 2 of 2 or 3, 16 of 30', () => {
  assert.deepEqual([1, 2, 3, 4, 5, 30].map(hubAccusersNeeded), [1, 2, 2, 3, 3, 16]);
});

test('judging: a rank naming the hub is hub-accused, once per reporter, and spends none of its allowance; the hub naming itself is no sender', () => {
  const a = new Accusations();
  assert.equal(a.judge('r0', 0, HUB_RANK, 4, true), 'hub-accused');
  assert.equal(a.judge('r0', 0, HUB_RANK, 4, true), 'hub-accused');
  assert.deepEqual(a.hubAccusersAmong(['r0', 'r1', 'r2', 'r3']), ['r0']);
  // r0's first accusation of its left neighbour (rank 3 in a ring of 4) still evicts the accused.
  assert.equal(a.judge('r0', 0, 3, 4, true), 'evict-accused');
  // Without a hub in the generation, the hub sends nothing: naming it mutes the reporter.
  assert.equal(a.judge('r1', 1, HUB_RANK, 4, false), 'not-a-sender');
  assert.equal(a.judge('hub', HUB_RANK, HUB_RANK, 4, true), 'not-a-sender');
  // Accusers who left the ring no longer count; a new hub, or a new run, starts clean.
  assert.equal(a.judge('r2', 2, HUB_RANK, 4, true), 'hub-accused');
  assert.deepEqual(a.hubAccusersAmong(['r2', 'r3']), ['r2']);
  a.newHub();
  assert.deepEqual(a.hubAccusersAmong(['r0', 'r2']), []);
  a.judge('r3', 3, HUB_RANK, 4, true);
  a.reset();
  assert.deepEqual(a.record, { accusations: {}, mutedReporters: [], hubAccusers: [] });
});

test("the teacher's removal bars hubs until the teacher allows one again, across runs; the server's ends with its run", () => {
  const clock = new ManualClock();
  const room = new Room('class', clock);
  room.join(member('a'));
  room.join(member('hub1', 'hub'));
  const removed = room.removeHubAsTeacher();
  assert.deepEqual([removed.removed?.id, removed.removed?.socketId, removed.removed?.notice.reason], ['hub1', 'socket-hub1', 'removed']);
  assert.equal(removed.change.generation?.hub, null);
  assert.equal(room.status().hubAccess.barred?.by, 'teacher');
  assert.equal(codeOf(() => room.join(member('hub2', 'hub'))), 'ERR_HUB_REMOVED');
  // A run starting and ending does not lift the teacher's bar.
  const { run } = room.start(CONFIG, null);
  assert.equal(codeOf(() => room.join(member('hub2', 'hub'))), 'ERR_HUB_REMOVED');
  room.recordFinished('a', { run, generation: room.currentGeneration, step: 1, reason: 'stopped' });
  assert.equal(codeOf(() => room.join(member('hub2', 'hub'))), 'ERR_HUB_REMOVED');
  // The bar keeps an empty room from being forgotten (and the bar with it).
  room.leave('a');
  assert.equal(room.isEmpty, true);
  assert.equal(room.isDisposable, false);
  assert.equal(room.allowHub(), true);
  assert.equal(room.isDisposable, true);
  assert.equal(room.status().events.at(-1)?.kind, 'hub-allowed');
  assert.equal(room.allowHub(), false, 'nothing to allow twice');
  assert.equal(room.join(member('hub2', 'hub')).change.generation?.hub?.id, 'hub2');
});

test('a teacher\'s bar outlives the codec and a restart through room.json; a file without one reads as no bar', async () => {
  const clock = new ManualClock();
  const room = new Room('class', clock);
  room.join({ ...member('student1'), tokenHash: 'a'.repeat(64) }); // room.json checks ids and digests
  room.removeHubAsTeacher();
  const copy = decodeRoom(JSON.parse(JSON.stringify(encodeRoom(room))) as RoomRecord, clock);
  assert.equal(codeOf(() => copy.join(member('hub2', 'hub'))), 'ERR_HUB_REMOVED');

  const dir = mkdtempSync(path.join(os.tmpdir(), 'webring-hub-bar-'));
  const persistence = new RoomPersistence(dir, createLogger('silent'), clock);
  await persistence.save(toRoomFile(encodeRoom(room)));
  await persistence.flush();
  const [restored] = await new RoomPersistence(dir, createLogger('silent'), clock).loadAll();
  assert.equal(restored?.status().hubAccess.barred?.by, 'teacher');
  assert.equal(codeOf(() => restored!.join(member('hub2', 'hub'))), 'ERR_HUB_REMOVED');

  const { hubBar: _bar, ...file } = toRoomFile(encodeRoom(room));
  assert.equal(decodeRoom(fromRoomFile(file, 0), clock).hubBarred(), null);
});

test('the hub key: 64 hex digits per room, not the join code, and matched only exactly', () => {
  const secret = Buffer.from('a-secret-of-enough-length');
  const key = hubKeyFor(secret, 'class');
  assert.ok(hubKeySchema.safeParse(key).success);
  assert.notEqual(key, hubKeyFor(secret, 'class2'));
  assert.notEqual(key, hubKeyFor(Buffer.from('another-secret-of-length'), 'class'));
  assert.ok(!key.includes(joinCodeFor(secret, 'class').replace('-', '')));
  assert.equal(hubKeyMatches(secret, 'class', key), true);
  assert.equal(hubKeyMatches(secret, 'class2', key), false);
  assert.equal(hubKeyMatches(secret, 'class', key.toUpperCase()), false);
  assert.equal(hubKeyMatches(secret, 'class', key.slice(0, 63)), false);
});
