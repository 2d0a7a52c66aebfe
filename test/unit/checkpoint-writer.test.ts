/**
 * The chief's writer with a fake fetch: a checkpoint that could not reach the server (it
 * was down) is offered again after the reconnect; a refusal is not retried.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CheckpointWriter, type LocalCheckpointStore } from '../../shared/checkpoints/checkpoint-writer';
import type { CapturedCheckpoint } from '../../shared/checkpoints/checkpoint-io';
import type { ErrorBody } from '../../shared/protocol/errors';
import { trainedReplica } from '../support/checkpoint-fixture';

const ctx = { room: 'writer-room', run: 1, backend: 'cpu' as const, members: [] };

function harness(answer: () => Promise<Response>) {
  const saved: Array<[string, number]> = [];
  const errors: ErrorBody[] = [];
  const uploads: FormData[] = [];
  const localCopies: CapturedCheckpoint[] = [];
  const local: LocalCheckpointStore = {
    save: async (c) => void localCopies.push(c),
  };
  const writer = new CheckpointWriter({
    serverUrl: 'http://server.invalid',
    memberToken: 'a'.repeat(48),
    local,
    fetchImpl: (async (_url: RequestInfo | URL, init?: RequestInit) => {
      uploads.push(init!.body as FormData);
      return answer();
    }) as typeof fetch,
    onSaved: (where, step) => saved.push([where, step]),
    onError: (e) => errors.push(e),
  });
  return { writer, saved, errors, uploads, localCopies };
}

const created = (step: number) =>
  new Response(JSON.stringify({ ok: true, checkpoint: { id: 'ckpt-0000000001-abcdef', step, epoch: 0, createdAt: new Date().toISOString(), bytes: 1, writer: 'x', weightsHash: '0'.repeat(16) } }), {
    status: 201,
  });

test('a checkpoint the server missed is uploaded again on retry, with all five parts', async () => {
  const trainer = await trainedReplica(2);
  let serverUp = false;
  const h = harness(async () => {
    if (!serverUp) throw new TypeError('fetch failed');
    return created(trainer.step);
  });
  await h.writer.save(trainer, ctx, 3);
  await h.writer.flush();
  assert.deepEqual(h.saved, [['local', 2]]);
  assert.equal(h.errors[0]?.code, 'ERR_UNREACHABLE');
  serverUp = true;
  await h.writer.retry();
  assert.deepEqual(h.saved, [['local', 2], ['server', 2]]);
  assert.deepEqual([...h.uploads.at(-1)!.keys()].sort(), ['metadata.json', 'model.json', 'model.weights.bin', 'optimizer.bin', 'optimizer.json']);
  // Nothing is left to retry.
  const uploadsBefore = h.uploads.length;
  await h.writer.retry();
  assert.equal(h.uploads.length, uploadsBefore);
  trainer.dispose();
});

test('a refusal (no longer the chief) is reported and not retried', async () => {
  const trainer = await trainedReplica(1);
  const h = harness(async () => new Response(JSON.stringify({ ok: false, error: { code: 'ERR_NOT_CHIEF', message: 'only the current chief writes checkpoints' } }), { status: 403 }));
  await h.writer.save(trainer, ctx, 3);
  await h.writer.flush();
  assert.equal(h.errors[0]?.code, 'ERR_NOT_CHIEF');
  const uploadsBefore = h.uploads.length;
  await h.writer.retry();
  assert.equal(h.uploads.length, uploadsBefore);
  assert.equal(h.localCopies.length, 1, 'the local copy is kept regardless');
  trainer.dispose();
});
