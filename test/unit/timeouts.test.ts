/**
 * Every network wait of the checkpoints and the bench peer has a deadline: a server that
 * never answers fails the wait with ERR_TIMEOUT, naming what timed out, on a manual clock.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Socket } from 'socket.io-client';
import { ManualClock } from '../../shared/util/clock';
import { WebringError } from '../../shared/protocol/errors';
import {
  CHECKPOINT_LIST_TIMEOUT_MS,
  CHECKPOINT_RESTORE_TIMEOUT_MS,
  CHECKPOINT_UPLOAD_TIMEOUT_MS,
  listCheckpoints,
  restoreFromServer,
  uploadCheckpoint,
} from '../../shared/checkpoints/checkpoint-io';
import { CHECKPOINT_FLUSH_TIMEOUT_MS, CheckpointWriter } from '../../shared/checkpoints/checkpoint-writer';
import { BENCH_JOIN_TIMEOUT_MS, BenchPeer } from '../../shared/network/bench-peer';
import type { ErrorBody } from '../../shared/protocol/errors';
import { capture, trainedReplica } from '../support/checkpoint-fixture';

/** A fetch that never answers, and the signals it was given. */
function silentServer() {
  const signals: AbortSignal[] = [];
  const fetchImpl = ((_url: RequestInfo | URL, init?: RequestInit) => {
    if (init?.signal) signals.push(init.signal);
    return new Promise<Response>(() => {});
  }) as typeof fetch;
  return { fetchImpl, signals };
}

async function untilCalled(signals: AbortSignal[]): Promise<void> {
  for (let i = 0; i < 10_000 && signals.length === 0; i++) await new Promise((resolve) => setImmediate(resolve));
  assert.ok(signals.length > 0, 'the request went out');
}

const timedOut = (what: RegExp) => (e: unknown) => e instanceof WebringError && e.code === 'ERR_TIMEOUT' && what.test(e.message);

test('a checkpoint upload the server never answers fails with ERR_TIMEOUT, and its request is aborted', async () => {
  const trainer = await trainedReplica(0);
  const clock = new ManualClock();
  const server = silentServer();
  const upload = uploadCheckpoint('http://server.invalid', 'token', await capture(trainer, 'timeouts'), { fetchImpl: server.fetchImpl, clock });
  await untilCalled(server.signals);
  clock.advance(CHECKPOINT_UPLOAD_TIMEOUT_MS - 1);
  assert.equal(server.signals[0]!.aborted, false);
  clock.advance(1);
  await assert.rejects(upload, timedOut(new RegExp(`^checkpoint upload timed out after ${CHECKPOINT_UPLOAD_TIMEOUT_MS} ms$`)));
  assert.equal(server.signals[0]!.aborted, true);
  assert.equal(clock.pending, 0, 'no timer outlives the wait');
  trainer.dispose();
});

test('listing and restoring checkpoints from a silent server fail with ERR_TIMEOUT naming the request', async () => {
  const trainer = await trainedReplica(0);
  const clock = new ManualClock();
  const server = silentServer();
  const listing = listCheckpoints('http://server.invalid', 'timeouts', 'token', { fetchImpl: server.fetchImpl, clock });
  clock.advance(CHECKPOINT_LIST_TIMEOUT_MS);
  await assert.rejects(listing, timedOut(/^listing the checkpoints of timeouts timed out after 10000 ms$/));

  const restoring = restoreFromServer('http://server.invalid', 'timeouts', 'ckpt-0000000001-abcdef', trainer, 'token', { fetchImpl: server.fetchImpl, clock });
  clock.advance(CHECKPOINT_RESTORE_TIMEOUT_MS);
  await assert.rejects(restoring, timedOut(/^restoring checkpoint ckpt-0000000001-abcdef timed out after \d+ ms$/));
  assert.equal(clock.pending, 0);
  trainer.dispose();
});

test("the chief's final flush gives up with ERR_TIMEOUT; a timed-out upload is kept for a retry", async () => {
  const trainer = await trainedReplica(1);
  const clock = new ManualClock();
  const server = silentServer();
  const errors: ErrorBody[] = [];
  const writer = new CheckpointWriter({
    serverUrl: 'http://server.invalid',
    memberToken: 'token',
    local: null,
    fetchImpl: server.fetchImpl,
    clock,
    onSaved: () => assert.fail('nothing reaches the server'),
    onError: (e) => errors.push(e),
  });
  await writer.save(trainer, { room: 'timeouts', run: 1, backend: 'cpu', members: [] }, 3);
  const flushed = writer.flush();
  await untilCalled(server.signals);
  clock.advance(CHECKPOINT_UPLOAD_TIMEOUT_MS);
  // The upload timed out first and was reported; the flush then has nothing left to wait for.
  await flushed;
  assert.equal(errors[0]?.code, 'ERR_TIMEOUT');

  const stuck = new CheckpointWriter({
    serverUrl: 'http://server.invalid',
    memberToken: 'token',
    local: { save: () => new Promise(() => {}) },
    clock,
    onSaved: () => {},
    onError: () => {},
  });
  await stuck.save(trainer, { room: 'timeouts', run: 1, backend: 'cpu', members: [] }, 3);
  const final = stuck.flush();
  clock.advance(CHECKPOINT_FLUSH_TIMEOUT_MS);
  await assert.rejects(final, timedOut(new RegExp(`^the final checkpoint flush timed out after ${CHECKPOINT_FLUSH_TIMEOUT_MS} ms$`)));

  // The server is back: the checkpoint that timed out goes up on retry.
  let uploaded = 0;
  const retrying = new CheckpointWriter({
    serverUrl: 'http://server.invalid',
    memberToken: 'token',
    local: null,
    clock,
    fetchImpl: (async (url: RequestInfo | URL, init?: RequestInit) => {
      if (uploaded++ === 0) return server.fetchImpl(url, init);
      return new Response(JSON.stringify({ ok: true, checkpoint: { id: 'ckpt-0000000001-abcdef', step: 1, epoch: 0, createdAt: new Date().toISOString(), bytes: 1, writer: 'x', weightsHash: '0'.repeat(16) } }), { status: 201 });
    }) as typeof fetch,
    onSaved: () => {},
    onError: () => {},
  });
  await retrying.save(trainer, { room: 'timeouts', run: 1, backend: 'cpu', members: [] }, 3);
  const first = retrying.flush();
  for (let i = 0; i < 10_000 && uploaded === 0; i++) await new Promise((resolve) => setImmediate(resolve));
  clock.advance(CHECKPOINT_UPLOAD_TIMEOUT_MS);
  await first;
  await retrying.retry();
  assert.equal(uploaded, 2, 'offered again after the timeout');
  trainer.dispose();
});

test('a bench peer whose join is never answered fails with ERR_TIMEOUT', async () => {
  const clock = new ManualClock();
  const socket = { on: () => socket, emit: () => socket, close: () => socket } as unknown as Socket;
  const peer = new BenchPeer(socket, () => assert.fail('no links without a ring'), () => {}, { clock });
  const joining = peer.join('bench-room', 'p0', 'node', 2);
  clock.advance(BENCH_JOIN_TIMEOUT_MS);
  await assert.rejects(joining, timedOut(new RegExp(`^joining bench-room as a bench peer timed out after ${BENCH_JOIN_TIMEOUT_MS} ms$`)));
  assert.equal(clock.pending, 0);
  peer.close();
});
