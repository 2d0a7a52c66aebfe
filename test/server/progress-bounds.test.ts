/**
 * Issue 57, defect 7, against a real server: reported progress is bounded by the room's own
 * counters, and a chief's drops by the wall clock. Before, a chief's report of step 10⁹ was
 * taken as the room's step, totals and times were taken as sent, and a chief whose extra
 * tabs outvoted the class dropped one member per claimed step, as fast as it could send.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { RunningServer } from '../../signaling-server/server';
import { uploadCheckpoint, type CapturedCheckpoint } from '../../shared/checkpoints/checkpoint-io';
import type { ProgressReport, RoomStatus } from '../../shared/protocol';
import type { ErrorBody } from '../../shared/protocol/errors';
import { MAX_DROPS_PER_WINDOW } from '../../signaling-server/rooms/drop-check';
import { REPORT_TURNS_AHEAD } from '../../signaling-server/rooms/progress-bounds';
import { AS_TEACHER, connectClient, join, nextEvent, reportSteps, startTestRun, startTestServer, type TestSocket } from '../support/server';
import { capture, trainedReplica } from '../support/checkpoint-fixture';

let server: RunningServer;
const sockets: TestSocket[] = [];

before(async () => {
  server = await startTestServer({ dataDir: mkdtempSync(path.join(os.tmpdir(), 'webring-progress-bounds-')) });
});
after(async () => {
  for (const s of sockets) s.disconnect();
  await server.close();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const status = async (room: string): Promise<RoomStatus> => (await fetch(`${server.url}/api/rooms/${room}`, AS_TEACHER)).json() as Promise<RoomStatus>;

interface Member {
  socket: TestSocket;
  id: string;
  token: string;
}

async function member(room: string, name: string): Promise<Member> {
  const socket = await connectClient(server, room);
  sockets.push(socket);
  const joined = await join(socket, room, name);
  assert.ok(joined.ok, JSON.stringify(joined));
  return { socket, id: joined.memberId, token: joined.memberToken };
}

const HASH = '0123456789abcdef';
const base = (run: number, generation: number, computeMs = 30): Omit<ProgressReport, 'step'> => ({
  run, generation, epoch: 0, loss: 1, trainAccuracy: 0.5, examplesPerSec: 10, weightsHash: HASH, totalSteps: 100, computeMs,
  hashChecked: false, hashMismatch: false, batchShare: 0.5, linkMBps: 1, learningRate: 0.001, speedVsMedian: 1,
  collective: { algorithm: 'ring', alphaMs: 0, betaMBps: 0, reason: 'test', timing: { dataMs: 0, computeMs: 0, readbackMs: 0, crossMs: 0, commMs: 0, applyMs: 0 } },
});

/** What the server answers `s`'s report `extra` over `report`: the error, or null when it took it. */
async function answerTo(s: TestSocket, report: Omit<ProgressReport, 'step'>, extra: Partial<ProgressReport> & { step: number }): Promise<ErrorBody | null> {
  const refused = nextEvent(s, 'server:error');
  s.emit('worker:progress', { ...report, ...extra });
  return Promise.race([refused, sleep(300).then(() => null)]);
}

test("a chief's report of step 10⁹ is refused with ERR_STEP_OUT_OF_RANGE and the room's step stays; so are a classmate's, and totals and times past any run (failed on the previous main)", async () => {
  const room = 'far-step';
  const chief = await member(room, 'chief');
  const student = await member(room, 'student');
  const { run, generation } = await startTestRun(server, room, chief.socket);
  const report = base(run, generation);
  reportSteps(chief.socket, report, 1, 5);
  await sleep(150);
  assert.equal((await status(room)).step, 5);

  const far = await answerTo(chief.socket, report, { step: 1_000_000_000 });
  assert.deepEqual([far?.code, far?.field], ['ERR_STEP_OUT_OF_RANGE', 'step']);
  assert.equal((await status(room)).step, 5, "the room's step is unchanged");
  const ahead = await answerTo(student.socket, report, { step: 1_000_000_000 });
  assert.equal(ahead?.code, 'ERR_STEP_OUT_OF_RANGE', "a classmate's too: its step would decide drops");
  assert.equal((await status(room)).members.find((m) => m.id === student.id)?.step, 0);
  // A run's end past its plan, and times longer than a lesson.
  for (const [bad, field] of [[{ totalSteps: 1_000_000_000 }, 'totalSteps'], [{ computeMs: 1e12 }, 'computeMs'], [{ lockStepMs: 1e12 }, 'lockStepMs'], [{ round: 9 }, 'round']] as const) {
    const e = await answerTo(chief.socket, report, { step: 6, ...bad });
    assert.deepEqual([e?.code, e?.field?.split('.').at(-1)], ['ERR_BAD_REQUEST', field], JSON.stringify(bad));
  }
  // The next honest step, and the classmate's report of it a turn ahead of the chief's, are taken.
  assert.equal(await answerTo(student.socket, report, { step: 5 + REPORT_TURNS_AHEAD }), null);
  assert.equal(await answerTo(chief.socket, report, { step: 6 }), null);
  assert.equal((await status(room)).step, 6);
});

test("a run resumed from a checkpoint reports from the checkpoint's step on; only a step far past it is refused", async () => {
  const room = 'resumed';
  const chief = await member(room, 'chief');
  const student = await member(room, 'student');
  const saved: CapturedCheckpoint = await capture(await trainedReplica(3, { optimizer: 'adam' }), room);
  const first = await startTestRun(server, room, chief.socket, { model: 'mlp', optimizer: 'adam', batchSizePerWorker: 8, resumeFrom: 'none' });
  reportSteps(chief.socket, { ...base(first.run, first.generation), weightsHash: saved.metadata.weightsHash }, 1, 3);
  await sleep(100);
  student.socket.emit('worker:progress', { ...base(first.run, first.generation), weightsHash: saved.metadata.weightsHash, step: 3 });
  await sleep(100);
  await uploadCheckpoint(server.url, chief.token, { ...saved, metadata: { ...saved.metadata, room, run: first.run, step: 3 } });
  chief.socket.emit('worker:finished', { run: first.run, generation: first.generation, step: 3, reason: 'stopped' });
  await sleep(100);

  const second = await startTestRun(server, room, chief.socket, { model: 'mlp', optimizer: 'adam', batchSizePerWorker: 8, resumeFrom: 'latest' });
  assert.equal(second.startStep, 3);
  const report = base(second.run, second.generation);
  // A joiner's first report jumps from step 0 to the class's; the chief goes on from the checkpoint.
  assert.equal(await answerTo(student.socket, report, { step: 3 }), null);
  assert.equal(await answerTo(chief.socket, report, { step: 4 }), null);
  assert.equal((await status(room)).step, 4);
  assert.equal((await answerTo(chief.socket, report, { step: 400 }))?.code, 'ERR_STEP_OUT_OF_RANGE');
});

test(`a chief drops at most ${MAX_DROPS_PER_WINDOW} stragglers a minute, and never at a step past the room's (failed on the previous main)`, async () => {
  const room = 'drop-storm';
  const chief = await member(room, 'chief');
  const slow: Member[] = [];
  for (let i = 0; i <= MAX_DROPS_PER_WINDOW + 1; i++) slow.push(await member(room, `slow${i}`));
  const { run } = await startTestRun(server, room, chief.socket);
  /** The chief and every member still in the ring report `step`, each slow one at 3.1 s; resolves with the generation. */
  const trainTo = async (step: number): Promise<number> => {
    const { generation } = await status(room);
    reportSteps(chief.socket, base(run, generation, 400), step, step);
    await sleep(50);
    for (const m of slow) m.socket.emit('worker:progress', { ...base(run, generation, 3_100), step });
    await sleep(150);
    return generation;
  };
  const drop = async (m: Member, step: number, generation: number): Promise<string> => {
    const refused = nextEvent(chief.socket, 'server:error');
    const dropped = nextEvent(m.socket, 'member:dropped');
    chief.socket.emit('ring:drop', { run, generation, member: m.id, step, computeMs: 3_100, deadlineMs: 1_000 });
    return Promise.race([refused.then((e) => e.code), dropped.then(() => 'dropped')]);
  };

  let step = 0;
  for (let i = 0; i < MAX_DROPS_PER_WINDOW; i++) {
    const generation = await trainTo(++step);
    // A step the room has not reached: the chief's claim alone no longer decides (its tabs' reports neither).
    if (i === 0) assert.equal(await drop(slow[i]!, step + 2, generation), 'ERR_STEP_OUT_OF_RANGE');
    assert.equal(await drop(slow[i]!, step, generation), 'dropped', `drop ${i + 1}`);
  }
  const generation = await trainTo(++step);
  assert.equal(await drop(slow[MAX_DROPS_PER_WINDOW]!, step, generation), 'ERR_RATE_LIMITED', 'one drop past the cap in the same minute');
  const s = await status(room);
  assert.equal(s.dropped.length, MAX_DROPS_PER_WINDOW);
  assert.equal(s.members.length, 1 + slow.length - MAX_DROPS_PER_WINDOW);
});
