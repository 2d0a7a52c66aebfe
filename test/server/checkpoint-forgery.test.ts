/**
 * Issue 25, item 2, against a real server: a chief (any student who joins first) tries to
 * forge the room's checkpoints past the run. Before: a checkpoint at step 9,999,999,999
 * pinned `latest` and pruning deleted every honest one after it while answering 201; an
 * 11-digit step made an id the listing never showed nor pruned; uploads were taken with no
 * run going. Now each is refused with a code, a checkpoint counts only once another rank
 * reported its weights hash at its step, and the teacher sees who wrote each one and can
 * delete it.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { RunningServer } from '../../signaling-server/server';
import { MAX_CHECKPOINT_STEP, type CheckpointInfo } from '../../shared/checkpoints/checkpoint';
import { uploadCheckpoint, type CapturedCheckpoint } from '../../shared/checkpoints/checkpoint-io';
import { WebringError } from '../../shared/protocol/errors';
import type { ProgressReport, RoomStatus, TrainStart } from '../../shared/protocol';
import { CHECKPOINT_STEPS_AHEAD } from '../../signaling-server/rooms/checkpoint-guard';
import { AS_TEACHER, codeFor, connectClient, join, startTestRun, startTestServer, type TestSocket } from '../support/server';
import { capture, trainedReplica } from '../support/checkpoint-fixture';

let server: RunningServer;
let dataDir: string;
const sockets: TestSocket[] = [];
/** Two replicas' real states: the class's (at step 3) and one it never had (at step 2). */
let honest: CapturedCheckpoint;
let other: CapturedCheckpoint;

before(async () => {
  dataDir = mkdtempSync(path.join(os.tmpdir(), 'webring-forgery-'));
  server = await startTestServer({ dataDir });
  honest = await capture(await trainedReplica(3, { optimizer: 'adam' }), 'placeholder');
  other = await capture(await trainedReplica(2, { optimizer: 'adam' }), 'placeholder');
});
after(async () => {
  for (const s of sockets) s.disconnect();
  await server.close();
});

interface Member {
  socket: TestSocket;
  token: string;
  id: string;
}

async function member(room: string, name: string): Promise<Member> {
  const socket = await connectClient(server, room);
  sockets.push(socket);
  const joined = await join(socket, room, name);
  assert.ok(joined.ok, JSON.stringify(joined));
  return { socket, token: joined.memberToken, id: joined.memberId };
}

const status = async (room: string): Promise<RoomStatus> => (await fetch(`${server.url}/api/rooms/${room}`, AS_TEACHER)).json() as Promise<RoomStatus>;
const list = async (room: string): Promise<CheckpointInfo[]> => (await fetch(`${server.url}/api/rooms/${room}/checkpoints`, AS_TEACHER)).json() as Promise<CheckpointInfo[]>;
/** The checkpoint a Start (and tf.loadLayersModel) gets for 'latest': its model.json points at the concrete folder. */
const latestId = async (room: string): Promise<string | null> => {
  const res = await fetch(`${server.url}/api/rooms/${room}/checkpoints/latest/model.json`, AS_TEACHER);
  if (res.status === 404) return null;
  assert.equal(res.status, 200);
  const model = (await res.json()) as { weightsManifest: Array<{ paths: string[] }> };
  return /^\.\.\/(ckpt-[^/]+)\//.exec(model.weightsManifest[0]!.paths[0]!)![1]!;
};
const folders = (room: string): string[] => {
  try {
    return readdirSync(path.join(dataDir, 'rooms', room, 'checkpoints')).sort();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
};
const refusedWith = (code: string, status: number) => (e: unknown) => e instanceof WebringError && e.code === code && e.message.includes(`HTTP ${status}`);

const startRun = (room: string, socket: TestSocket, config: object = {}): Promise<TrainStart> =>
  startTestRun(server, room, socket, { model: 'mlp', optimizer: 'adam', batchSizePerWorker: 8, resumeFrom: 'none', ...config });

/** A member's progress report of `step` with weights `hash`, as a worker sends one after every step; resolves once the server has it. */
async function report(room: string, m: Member, run: number, step: number, hash: string): Promise<void> {
  m.socket.emit('worker:progress', await progressOf(room, run, step, hash));
  for (let i = 0; i < 200; i++) {
    if ((await status(room)).members.find((x) => x.id === m.id)?.step === step) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  assert.fail(`the server never recorded ${m.id}'s report of step ${step}`);
}

/** A progress report of `step` with weights `hash` in the room's current generation. */
async function progressOf(room: string, run: number, step: number, hash: string): Promise<ProgressReport> {
  const s = await status(room);
  return {
    run, generation: s.generation, step, epoch: 0, loss: 1, trainAccuracy: 0.5, examplesPerSec: 100, weightsHash: hash, totalSteps: 1_000,
    computeMs: 5, hashChecked: false, hashMismatch: false, batchShare: 0.5, linkMBps: 1, learningRate: 0.001, speedVsMedian: 1,
    collective: { algorithm: 'ring', alphaMs: 0, betaMBps: 0, reason: 'test', timing: { dataMs: 0, computeMs: 0, readbackMs: 0, crossMs: 0, commMs: 0, applyMs: 0 } },
  };
}

/** The chief's reports of steps `from` to `to`: the server takes no report far past the room's step (progress-bounds.ts). */
async function climb(room: string, chief: Member, run: number, from: number, to: number): Promise<void> {
  for (let step = from; step <= to; step++) await report(room, chief, run, step, honest.metadata.weightsHash);
}

/** `c` as the chief of `room` would upload it at `step` of `run`. */
const at = (c: CapturedCheckpoint, room: string, run: number, step: number): CapturedCheckpoint => ({ ...c, metadata: { ...c.metadata, room, run, step } });

test('a forged step 9,999,999,999 is refused, and the honest checkpoints survive a forged report too', async () => {
  const room = 'forge-step';
  const chief = await member(room, 'chief');
  const student = await member(room, 'student');
  // maxToKeep 1: before, a forged checkpoint of a higher step pruned the honest one at once.
  const { run } = await startRun(room, chief.socket, { maxToKeep: 1 });
  await climb(room, chief, run, 1, 3);
  await report(room, student, run, 3, honest.metadata.weightsHash);
  const good = await uploadCheckpoint(server.url, chief.token, at(honest, room, run, 3));
  assert.deepEqual(good.trust, { state: 'vouched', by: student.id });

  // The attack of the issue: one upload far past the run.
  await assert.rejects(uploadCheckpoint(server.url, chief.token, at(honest, room, run, MAX_CHECKPOINT_STEP)), refusedWith('ERR_STEP_OUT_OF_RANGE', 409));
  // Just past the margin over the class's reported step is refused too; within it is taken.
  await assert.rejects(uploadCheckpoint(server.url, chief.token, at(honest, room, run, 3 + CHECKPOINT_STEPS_AHEAD + 1)), refusedWith('ERR_STEP_OUT_OF_RANGE', 409));
  assert.deepEqual((await list(room)).map((c) => c.id), [good.id]);

  // The chief also lies in its own progress report (the room's step is the chief's). A step
  // far past the class's is refused now (issue 57); one turn ahead is taken, but no other
  // rank reported it, so it vouches for nothing.
  const refused = new Promise<string>((resolve) => chief.socket.once('server:error', (e) => resolve(e.code)));
  chief.socket.emit('worker:progress', await progressOf(room, run, MAX_CHECKPOINT_STEP - 1, honest.metadata.weightsHash));
  assert.equal(await refused, 'ERR_STEP_OUT_OF_RANGE');
  await report(room, chief, run, 4, honest.metadata.weightsHash);
  const forged = await uploadCheckpoint(server.url, chief.token, at(other, room, run, 4));
  assert.deepEqual(forged.trust, { state: 'unvouched', by: null });
  assert.equal(await latestId(room), good.id, 'the honest checkpoint stays latest');
  assert.deepEqual(new Set((await list(room)).map((c) => c.id)), new Set([good.id, forged.id]), 'the honest one was not pruned for the forged one');

  // The next honest checkpoint prunes the forged one, never the other way round.
  await report(room, student, run, 5, honest.metadata.weightsHash);
  const next = await uploadCheckpoint(server.url, chief.token, at(honest, room, run, 5));
  assert.equal(next.trust.state, 'vouched');
  assert.deepEqual((await list(room)).map((c) => c.id), [next.id]);
  assert.deepEqual(folders(room), [next.id]);
});

test('an 11-digit step is refused before anything is written to disk', async () => {
  const room = 'forge-digits';
  const chief = await member(room, 'chief');
  const { run } = await startRun(room, chief.socket);
  const before = folders(room);
  for (const step of [MAX_CHECKPOINT_STEP + 1, 10 ** 12, Number.MAX_SAFE_INTEGER]) {
    await assert.rejects(uploadCheckpoint(server.url, chief.token, at(honest, room, run, step)), refusedWith('ERR_BAD_REQUEST', 400), `step ${step}`);
  }
  assert.deepEqual(folders(room), before);
  assert.deepEqual(await list(room), []);
});

test('uploads with no run going, of another run, or before the run\'s start step are refused', async () => {
  const room = 'forge-idle';
  const chief = await member(room, 'chief');
  // No run yet.
  await assert.rejects(uploadCheckpoint(server.url, chief.token, at(honest, room, 1, 3)), refusedWith('ERR_BAD_STATE', 409));
  assert.deepEqual(folders(room), []);

  const first = await startRun(room, chief.socket);
  const saved = await uploadCheckpoint(server.url, chief.token, at(honest, room, first.run, 3));
  // Alone in its ring, the chief is the class: it vouches for itself.
  assert.deepEqual(saved.trust, { state: 'vouched', by: chief.id });
  chief.socket.emit('worker:finished', { run: first.run, generation: first.generation, step: 3, reason: 'completed' });
  for (let i = 0; i < 100 && (await status(room)).state !== 'done'; i++) await new Promise((r) => setTimeout(r, 10));
  assert.equal((await status(room)).state, 'done');
  // The run is over.
  await assert.rejects(uploadCheckpoint(server.url, chief.token, at(honest, room, first.run, 4)), refusedWith('ERR_BAD_STATE', 409));

  // A run resumed from step 3: an older run's checkpoint, or one before step 3, is refused.
  const second = await startRun(room, chief.socket, { resumeFrom: 'latest' });
  assert.equal(second.startStep, 3);
  await assert.rejects(uploadCheckpoint(server.url, chief.token, at(honest, room, first.run, 4)), refusedWith('ERR_STALE_RUN', 409));
  await assert.rejects(uploadCheckpoint(server.url, chief.token, at(honest, room, second.run, 2)), refusedWith('ERR_STEP_OUT_OF_RANGE', 409));
  assert.deepEqual((await list(room)).map((c) => c.id), [saved.id]);
  assert.deepEqual(folders(room), [saved.id]);
});

test('the listing names each checkpoint\'s writer; the teacher deletes one, a student cannot', async () => {
  const room = 'forge-delete';
  const chief = await member(room, 'Ada');
  const student = await member(room, 'Grace');
  const { run } = await startRun(room, chief.socket);
  await climb(room, chief, run, 1, 3);
  await report(room, student, run, 3, honest.metadata.weightsHash);
  const older = await uploadCheckpoint(server.url, chief.token, at(honest, room, run, 3));
  await report(room, student, run, 4, honest.metadata.weightsHash);
  const newer = await uploadCheckpoint(server.url, chief.token, at(honest, room, run, 4));
  const listed = await list(room);
  assert.deepEqual(
    listed.map((c) => [c.id, c.writer, c.writerName, c.trust.state]),
    [
      [newer.id, chief.id, 'Ada', 'vouched'],
      [older.id, chief.id, 'Ada', 'vouched'],
    ],
  );

  const del = (id: string, headers: Record<string, string>) => fetch(`${server.url}/api/rooms/${room}/checkpoints/${id}`, { method: 'DELETE', headers });
  // The chief's and a student's member tokens, and the join code, delete nothing.
  const notTeachers: Array<Record<string, string>> = [{ authorization: `Bearer ${chief.token}` }, { authorization: `Bearer ${student.token}` }, { 'x-join-code': codeFor(room) }, {}];
  for (const headers of notTeachers) {
    const res = await del(newer.id, headers);
    assert.equal(res.status, 401, JSON.stringify(headers));
    assert.equal(((await res.json()) as { error: { code: string } }).error.code, 'ERR_UNAUTHORIZED');
  }
  assert.equal((await list(room)).length, 2);

  const res = await del(newer.id, AS_TEACHER.headers);
  assert.equal(res.status, 200);
  assert.deepEqual(((await res.json()) as { checkpoints: CheckpointInfo[] }).checkpoints.map((c) => c.id), [older.id]);
  assert.equal(await latestId(room), older.id, 'latest now names the newest remaining');
  assert.deepEqual(folders(room), [older.id]);
  // Gone, a concrete id only, and ids stay ids.
  assert.equal((await del(newer.id, AS_TEACHER.headers)).status, 404);
  assert.equal((await del('latest', AS_TEACHER.headers)).status, 400);
  assert.equal((await del(encodeURIComponent('../room.json'), AS_TEACHER.headers)).status, 400);
  assert.deepEqual(folders(room), [older.id]);
});

test('a checkpoint whose hash disagrees with the class\'s is never latest; one vouched later becomes latest', async () => {
  const room = 'forge-hash';
  const chief = await member(room, 'chief');
  const student = await member(room, 'student');
  const { run } = await startRun(room, chief.socket);
  await climb(room, chief, run, 1, 3);
  await report(room, student, run, 3, honest.metadata.weightsHash);
  const good = await uploadCheckpoint(server.url, chief.token, at(honest, room, run, 3));
  assert.equal(good.trust.state, 'vouched');
  await climb(room, chief, run, 4, 4);

  // Weights the class never had, at a step the class reported: contradicted, not latest.
  await report(room, student, run, 5, honest.metadata.weightsHash);
  const forged = await uploadCheckpoint(server.url, chief.token, at(other, room, run, 5));
  assert.deepEqual(forged.trust, { state: 'contradicted', by: null });
  assert.equal(await latestId(room), good.id);
  // Nor can the chief claim the class's hash for other weights: the server hashes the bytes itself.
  const lying = at(other, room, run, 5);
  await assert.rejects(uploadCheckpoint(server.url, chief.token, { ...lying, metadata: { ...lying.metadata, weightsHash: honest.metadata.weightsHash } }), refusedWith('ERR_BAD_REQUEST', 400));

  // An honest upload that arrives before the other ranks' reports of its step waits for them.
  const early = await uploadCheckpoint(server.url, chief.token, at(honest, room, run, 6));
  assert.deepEqual(early.trust, { state: 'unvouched', by: null });
  assert.equal(await latestId(room), good.id);
  await report(room, student, run, 6, honest.metadata.weightsHash);
  for (let i = 0; i < 100 && (await latestId(room)) !== early.id; i++) await new Promise((r) => setTimeout(r, 10));
  assert.equal(await latestId(room), early.id);
  assert.deepEqual((await list(room)).find((c) => c.id === early.id)?.trust, { state: 'vouched', by: student.id });
  // The next Start resumes from it, not from the contradicted one of a lower step.
  chief.socket.emit('worker:finished', { run, generation: (await status(room)).generation, step: 6, reason: 'completed' });
  for (let i = 0; i < 100 && (await status(room)).state !== 'done'; i++) await new Promise((r) => setTimeout(r, 10));
  const resumed = await startRun(room, chief.socket, { resumeFrom: 'latest' });
  assert.equal(resumed.resume?.checkpointId, early.id);
});
