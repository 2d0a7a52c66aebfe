/**
 * The pieces around the Room: the store decorator that writes room.json on every change that
 * matters (and not on every progress report), room.json itself on disk (with and without a
 * hub), and the server's timers on a manual clock.
 */
import { DEFAULT_START_CONFIG } from '../../shared/tasks/start-config';
import { test } from 'node:test';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import assert from 'node:assert/strict';
import { ManualClock } from '../../shared/util/clock';
import { type ProgressReport } from '../../shared/protocol';
import { MemoryRoomStore } from '../../signaling-server/rooms/room-store';
import { PersistingRoomStore } from '../../signaling-server/rooms/persisting-room-store';
import { encodeRoom, toRoomFile, type RoomFile } from '../../signaling-server/rooms/room-codec';
import { RoomPersistence } from '../../signaling-server/rooms/room-persistence';
import { Room, type NewMember } from '../../signaling-server/rooms/room';
import { Timers } from '../../signaling-server/rooms/timers';

/** Records what would be written instead of writing it. */
function recordingPersistence(): { persistence: RoomPersistence; saved: RoomFile[] } {
  const saved: RoomFile[] = [];
  const fake = {
    fileOf: (room: Parameters<RoomPersistence['fileOf']>[0]) => toRoomFile(encodeRoom(room)),
    save: async (file: RoomFile) => void saved.push(structuredClone(file)),
    flush: async () => {},
  };
  return { persistence: fake as unknown as RoomPersistence, saved };
}

const member = (id: string): NewMember => ({ id, socketId: `s-${id}`, tokenHash: id.padEnd(64, '0'), name: id, backend: 'cpu', kind: 'node', adapter: null, node: null });

function progress(run: number, step: number): ProgressReport {
  return {
    run, generation: 1, step, epoch: 0, loss: 1, trainAccuracy: 0.5, examplesPerSec: 10 * step, weightsHash: '0123456789abcdef', totalSteps: 10,
    computeMs: 1, batchShare: 1, linkMBps: 1, learningRate: 0.001, speedVsMedian: 1, hashChecked: false, hashMismatch: false,
    collective: { algorithm: 'ring', alphaMs: 1, betaMBps: 1, reason: 'test', timing: { dataMs: 0, computeMs: 1, readbackMs: 1, crossMs: 0, commMs: 1, applyMs: 1 } },
  };
}

test('changes through the store are saved when room.json would change, progress reports are not, refused changes are not', async () => {
  const clock = new ManualClock();
  const { persistence, saved } = recordingPersistence();
  const store = new PersistingRoomStore(new MemoryRoomStore(clock), persistence);
  await store.update('r', (room) => room.join(member('a')), { create: true });
  assert.deepEqual(saved.map((f) => [f.generation, f.active.length]), [[1, 1]]);

  const started = await store.update('r', (room) => room.start({ ...DEFAULT_START_CONFIG, resumeFrom: 'none' }, null));
  assert.equal(saved.at(-1)?.state, 'training');
  const count = saved.length;
  for (let step = 1; step <= 5; step++) await store.update('r', (room) => room.recordProgress('a', progress(started!.result.run, step)));
  assert.equal(saved.length, count, 'progress alone is not written');
  await assert.rejects(store.update('r', (room) => room.resume()), { code: 'ERR_BAD_STATE' });
  assert.equal(saved.length, count, 'a refused change is not written');

  await store.update('r', (room) => room.join(member('b')));
  assert.deepEqual(saved.at(-1)?.waiting.map((m) => m.id), ['b'], 'a student waiting for admission is written at once');
  assert.equal(saved.at(-1)?.step, 5, 'with the latest step');
  assert.equal(await store.update('missing', (room) => room.join(member('c'))), null);
  assert.equal(saved.length, count + 1);
});

test('the server\'s timers: one admission per key, and close clears what is pending and refuses more', () => {
  const clock = new ManualClock();
  const timers = new Timers(clock);
  const fired: string[] = [];
  timers.once('admission:r', 750, () => fired.push('admit'));
  timers.once('admission:r', 750, () => fired.push('admit twice'));
  timers.after(500, () => fired.push('resume'));
  clock.advance(750);
  assert.deepEqual(fired, ['resume', 'admit']);
  assert.equal(timers.has('admission:r'), false);

  timers.after(100, () => fired.push('late'));
  timers.close();
  timers.after(100, () => fired.push('after close'));
  clock.advance(1_000);
  assert.deepEqual(fired, ['resume', 'admit']);
  assert.equal(clock.pending, 0);
});

test('room.json on disk: a room with its hub is written and read back with it; a file from before the hub reads without one; a hub of another kind is refused', async () => {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'webring-hub-'));
  const warnings: string[] = [];
  const clock = new ManualClock();
  const persistence = new RoomPersistence(dataDir, { info: () => {}, warn: (m) => warnings.push(m), error: (m) => warnings.push(m) }, clock);
  const room = new Room('withhub', clock);
  room.join(member('aaaaaaaa'));
  room.join({ ...member('dddddddd'), name: 'hub', kind: 'hub' });
  await persistence.save(persistence.fileOf(room));
  const old = new Room('oldfile', clock);
  old.join(member('bbbbbbbb'));
  const oldFile = persistence.fileOf(old);
  assert.ok(!('hub' in oldFile));
  await persistence.save(oldFile);
  const bad = new Room('badhub', clock);
  bad.join({ ...member('cccccccc'), kind: 'hub' });
  await persistence.save({ ...persistence.fileOf(bad), hub: { ...persistence.fileOf(bad).hub!, kind: 'node' } });

  const loaded = new Map((await persistence.loadAll()).map((r) => [r.name, r.status()]));
  assert.deepEqual([loaded.get('withhub')?.hub?.id, loaded.get('withhub')?.hub?.kind, loaded.get('withhub')?.hub?.connected], ['dddddddd', 'hub', false]);
  assert.deepEqual(loaded.get('withhub')?.members.map((m) => m.id), ['aaaaaaaa']);
  assert.equal(loaded.get('oldfile')?.hub, null);
  assert.equal(loaded.has('badhub'), false);
  assert.equal(warnings.length, 1, warnings.join('\n'));
});

test('a secure run\'s room, with keys published and progress reported, saves to room.json and loads back (it was refused as invalid before: the member records carried run-only fields)', async () => {
  const clock = new ManualClock();
  const room = new Room('secure', clock);
  for (const id of ['aaaaaaaa', 'bbbbbbbb', 'cccccccc']) room.join(member(id));
  const { run, generation } = room.start({ ...DEFAULT_START_CONFIG, secureAggregation: true, resumeFrom: 'none' }, null);
  for (const id of ['aaaaaaaa', 'bbbbbbbb', 'cccccccc']) {
    room.notePublishedKey(id, run, generation);
    room.recordProgress(id, { ...progress(run, 1), generation });
  }
  const dir = mkdtempSync(path.join(os.tmpdir(), 'webring-secure-room-'));
  const warnings: string[] = [];
  const log = { info: () => undefined, warn: (l: string) => warnings.push(l), error: (l: string) => warnings.push(l) };
  const persistence = new RoomPersistence(dir, log, clock);
  await persistence.save(toRoomFile(encodeRoom(room)));
  await persistence.flush();
  const [restored] = await new RoomPersistence(dir, log, clock).loadAll();
  assert.deepEqual(warnings, []);
  assert.deepEqual(restored?.status().members.map((m) => m.id), ['aaaaaaaa', 'bbbbbbbb', 'cccccccc']);
});
