import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import * as realFs from 'node:fs/promises';
import { mkdtempSync, existsSync, readdirSync, mkdirSync, writeFileSync, utimesSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CheckpointStore, type CheckpointAdmission, type CheckpointUpload, type StoreFs } from '../../signaling-server/rooms/checkpoint-store';
import { WebringError } from '../../shared/protocol/errors';
import { asUpload, capture, trainedReplica } from '../support/checkpoint-fixture';
import type { CapturedCheckpoint } from '../../shared/checkpoints/checkpoint-io';

const ROOM = 'store-room';
let checkpoint: CapturedCheckpoint;

before(async () => {
  checkpoint = await capture(await trainedReplica(2, { optimizer: 'adam' }), ROOM);
});

const tempDir = () => mkdtempSync(path.join(os.tmpdir(), 'webring-store-'));
const atStep = (step: number): CheckpointUpload => asUpload({ ...checkpoint, metadata: { ...checkpoint.metadata, step } });
const coded = (code: string) => (e: unknown) => e instanceof WebringError && e.code === code;

test('a checkpoint is written as one folder of five files and listed newest first', async () => {
  const store = new CheckpointStore(tempDir());
  const first = await store.write(ROOM, atStep(10), 'chief-a', 3);
  const second = await store.write(ROOM, atStep(20), 'chief-a', 3);
  const list = await store.list(ROOM);
  assert.deepEqual(list.map((c) => c.step), [20, 10]);
  assert.deepEqual(list.map((c) => c.id), [second.id, first.id]);
  assert.equal(list[0]!.writer, 'chief-a');
  assert.ok(list[0]!.bytes > checkpoint.weights.byteLength);
  const found = await store.resolve(ROOM, 'latest');
  assert.equal(found?.id, second.id);
  // The five files of the upload, and the server's verdict on it (never served).
  assert.deepEqual(readdirSync(found!.dir).sort(), ['metadata.json', 'model.json', 'model.weights.bin', 'optimizer.bin', 'optimizer.json', 'trust.json']);
});

test('a crash between the temp write and the rename leaves the previous checkpoint valid', async () => {
  const dir = tempDir();
  const good = await new CheckpointStore(dir).write(ROOM, atStep(10), 'chief', 3);
  const crashingFs: StoreFs = {
    ...realFs,
    rename: async () => {
      throw Object.assign(new Error('power cut'), { code: 'EIO' });
    },
  };
  await assert.rejects(new CheckpointStore(dir, crashingFs).write(ROOM, atStep(20), 'chief', 3), /power cut/);
  const store = new CheckpointStore(dir);
  assert.deepEqual((await store.list(ROOM)).map((c) => c.id), [good.id]);
  assert.equal((await store.resolve(ROOM, 'latest'))?.id, good.id);

  // A process killed mid-write leaves a temp folder behind: never listed, removed once stale.
  const roomDir = store.roomDir(ROOM);
  const leftover = path.join(roomDir, '.tmp-ckpt-0000000030-abcdef');
  mkdirSync(leftover);
  writeFileSync(path.join(leftover, 'model.json'), '{"half": ');
  assert.deepEqual((await store.list(ROOM)).map((c) => c.id), [good.id]);
  const old = new Date(Date.now() - 60 * 60_000);
  utimesSync(leftover, old, old);
  assert.equal(await store.removeStaleTemps(ROOM), 1);
  assert.equal(existsSync(leftover), false);
});

test('a weights checksum mismatch is refused and nothing is kept', async () => {
  const store = new CheckpointStore(tempDir());
  const upload = atStep(10);
  upload.weights = Buffer.from(upload.weights);
  upload.weights[0]! ^= 0xff;
  await assert.rejects(store.write(ROOM, upload, 'chief', 3), (e: unknown) => coded('ERR_BAD_REQUEST')(e) && (e as WebringError).field === 'weightsSha256');
  assert.deepEqual(await store.list(ROOM), []);
  // Refused before anything touched the disk.
  assert.equal(existsSync(store.roomDir(ROOM)), false);
  const badOptimizer = atStep(10);
  badOptimizer.optimizerData = Buffer.concat([badOptimizer.optimizerData, Buffer.from([1])]);
  await assert.rejects(store.write(ROOM, badOptimizer, 'chief', 3), coded('ERR_BAD_REQUEST'));
  const badMeta = atStep(10);
  badMeta.metadata = Buffer.from('{"step": "ten"}');
  await assert.rejects(store.write(ROOM, badMeta, 'chief', 3), coded('ERR_BAD_REQUEST'));
  await assert.rejects(store.write('other-room', atStep(10), 'chief', 3), coded('ERR_BAD_REQUEST'));
  assert.deepEqual(await store.list(ROOM), []);
});

test('maxToKeep is enforced, deleting the oldest', async () => {
  const store = new CheckpointStore(tempDir());
  for (const step of [10, 20, 30, 40, 50]) await store.write(ROOM, atStep(step), 'chief', 3);
  assert.deepEqual((await store.list(ROOM)).map((c) => c.step), [50, 40, 30]);
  await store.write(ROOM, atStep(60), 'chief', 1);
  assert.deepEqual((await store.list(ROOM)).map((c) => c.step), [60]);
  assert.equal(readdirSync(store.roomDir(ROOM)).length, 1);
});

test('pruning and latest rank vouched checkpoints first: a forged one never deletes an honest one, nor is the one just written deleted', async () => {
  const store = new CheckpointStore(tempDir());
  const vouched: CheckpointAdmission = async () => ({ writerName: 'Ada', trust: { state: 'vouched', by: 'student' } });
  const unvouched: CheckpointAdmission = async () => ({ writerName: 'Ada', trust: { state: 'unvouched', by: null } });
  const honest = await store.write(ROOM, atStep(10), 'chief', 1, vouched);
  // A higher step nobody vouched for: kept beside the honest one, which stays latest.
  const forged = await store.write(ROOM, atStep(9_000_000_000), 'chief', 1, unvouched);
  assert.deepEqual((await store.list(ROOM)).map((c) => c.id), [honest.id, forged.id]);
  assert.equal((await store.resolve(ROOM, 'latest'))?.id, honest.id);
  // The next vouched one prunes both older ones; a later vouch (setTrust) promotes a waiting one.
  const next = await store.write(ROOM, atStep(20), 'chief', 1, vouched);
  assert.deepEqual((await store.list(ROOM)).map((c) => c.id), [next.id]);
  const waiting = await store.write(ROOM, atStep(30), 'chief', 1, unvouched);
  assert.equal((await store.resolve(ROOM, 'latest'))?.id, next.id);
  assert.equal(await store.setTrust(ROOM, waiting.id, { state: 'vouched', by: 'student' }), true);
  assert.equal((await store.resolve(ROOM, 'latest'))?.id, waiting.id);
  assert.deepEqual((await store.list(ROOM))[0]!.trust, { state: 'vouched', by: 'student' });
  // A deleted checkpoint's late vouch is no error, and changes nothing.
  assert.equal(await store.remove(ROOM, waiting.id), true);
  assert.equal(await store.setTrust(ROOM, waiting.id, { state: 'vouched', by: 'student' }), false);
  assert.deepEqual((await store.list(ROOM)).map((c) => c.id), [next.id]);
});

test('room names and checkpoint ids cannot reach outside DATA_DIR', async () => {
  const dir = tempDir();
  const store = new CheckpointStore(dir);
  for (const room of ['..', '../etc', 'a/b', '.hidden', '', 'x'.repeat(65), 'a\\..\\b']) {
    assert.throws(() => store.roomDir(room), coded('ERR_BAD_REQUEST'), room);
    await assert.rejects(store.list(room), coded('ERR_BAD_REQUEST'));
  }
  for (const id of ['../../etc/passwd', '..', 'ckpt-0000000010-abcdef/../../x', '/etc', 'latest/..']) {
    await assert.rejects(store.resolve(ROOM, id), coded('ERR_BAD_REQUEST'), id);
  }
  assert.equal(await store.resolve(ROOM, 'ckpt-0000000010-abcdef'), null);
});
