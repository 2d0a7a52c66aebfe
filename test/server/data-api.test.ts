/**
 * The data service against a real server: examples by index from the official MNIST files,
 * read like any other room read (join code, member token or teacher token), every bad
 * request a coded 4xx that changes nothing, the bytes counted per room for its current run,
 * and the requests rate-limited with the rest of /api.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { RunningServer } from '../../signaling-server/server';
import type { JoinAccepted, RoomStatus } from '../../shared/protocol';
import { MAX_EXAMPLES_PER_REQUEST } from '../../shared/data/data-service';
import { EXAMPLE_BYTES } from '../support/mnist';
import { MNIST_PIXELS } from '../../shared/tasks/mnist/format';
import { AS_TEACHER, codeFor, connectClient, join, startTestServer, type TestSocket } from '../support/server';

const HTTP_BUDGET = 60;
let server: RunningServer;
const sockets: TestSocket[] = [];

before(async () => {
  server = await startTestServer({ rateLimits: { httpRequestsPerWindow: HTTP_BUDGET, windowSeconds: 30 } });
});
after(async () => {
  for (const s of sockets) s.disconnect();
  await server.close();
});

async function member(room: string, name: string): Promise<JoinAccepted> {
  const socket = await connectClient(server, room);
  sockets.push(socket);
  const joined = await join(socket, room, name);
  if (!joined.ok) assert.fail(`${name} could not join ${room}: ${joined.error.code}`);
  return joined;
}

const examples = (room: string, path: string, headers: Record<string, string> = { 'x-join-code': codeFor(room) }) =>
  fetch(`${server.url}/api/rooms/${room}/data/${path}`, { headers });

async function status(room: string): Promise<RoomStatus> {
  return (await (await fetch(`${server.url}/api/rooms/${room}`, AS_TEACHER)).json()) as RoomStatus;
}

async function errorOf(res: Response): Promise<[number, string, string | undefined]> {
  const body = (await res.json()) as { error: { code: string; field?: string } };
  return [res.status, body.error.code, body.error.field];
}

test('examples by index: the official digits, in compact uint8, cacheable, counted for the room', async () => {
  const me = await member('data', 'ann');
  const res = await examples('data', 'mnist-60k/train?ranges=0-4,59999');
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('content-type'), 'application/octet-stream');
  assert.match(res.headers.get('cache-control') ?? '', /max-age=86400/);
  const body = new Uint8Array(await res.arrayBuffer());
  assert.equal(body.length, 6 * EXAMPLE_BYTES);
  // The official training set starts 5 0 4 1 9 and ends with an 8.
  assert.deepEqual([...body.subarray(0, 6)], [5, 0, 4, 1, 9, 8]);
  const firstDigit = body.subarray(6, 6 + MNIST_PIXELS);
  assert.ok(firstDigit.some((p) => p === 255) && firstDigit.filter((p) => p === 0).length > 500, 'ink on a blank page, as MNIST digits are');
  const test10k = new Uint8Array(await (await examples('data', 'mnist-60k/test?ranges=0-2')).arrayBuffer());
  assert.deepEqual([...test10k.subarray(0, 3)], [7, 2, 1]);
  const subset = await examples('data', 'mnist-10k/train?ranges=7999');
  assert.equal(subset.status, 200);

  // A member's token and the teacher's token read as well as the join code.
  assert.equal((await examples('data', 'mnist-60k/test?ranges=5', { authorization: `Bearer ${me.memberToken}` })).status, 200);
  assert.equal((await examples('data', 'mnist-60k/test?ranges=6', AS_TEACHER.headers)).status, 200);

  // Before any run the room counts toward run 0; what the status shows is the current run's.
  const before = await status('data');
  assert.equal(before.data.bytesServed, (6 + 3 + 1 + 1 + 1) * EXAMPLE_BYTES);
  assert.equal(before.data.trainBytesServed, (6 + 1) * EXAMPLE_BYTES, 'the training split apart: the test digits are read for the scores');
  assert.equal(before.data.dataset, null);
  const started = await fetch(`${server.url}/api/rooms/data/start`, { method: 'POST', headers: { ...AS_TEACHER.headers, 'content-type': 'application/json' }, body: JSON.stringify({ dataset: 'mnist-60k', maxSteps: 5 }) });
  assert.equal(started.status, 200);
  const fresh = await status('data');
  assert.deepEqual(fresh.data, { dataset: 'mnist-60k', datasetBytes: 60_000 * EXAMPLE_BYTES, bytesServed: 0, trainBytesServed: 0, exampleBytes: EXAMPLE_BYTES, refused: [] });
  assert.equal(fresh.config?.dataset, 'mnist-60k');
  await examples('data', `mnist-60k/train?ranges=100-${100 + MAX_EXAMPLES_PER_REQUEST - 1}`);
  assert.equal((await status('data')).data.bytesServed, MAX_EXAMPLES_PER_REQUEST * EXAMPLE_BYTES);
  // Another room counts its own.
  await member('data-other', 'bob');
  assert.equal((await status('data-other')).data.bytesServed, 0);
});

test('every bad request is a coded 4xx naming the field, and nothing is sent or counted', async () => {
  await member('strict', 'cy');
  const cases: Array<[string, Record<string, string> | undefined, [number, string, string | undefined]]> = [
    ['mnist-60k/train?ranges=0', {}, [401, 'ERR_UNAUTHORIZED', undefined]],
    ['mnist-60k/train?ranges=0', { 'x-join-code': codeFor('other-room') }, [403, 'ERR_BAD_JOIN_CODE', 'code']],
    ['mnist-70k/train?ranges=0', undefined, [400, 'ERR_BAD_REQUEST', 'dataset']],
    ['mnist-60k/valid?ranges=0', undefined, [400, 'ERR_BAD_REQUEST', 'split']],
    ['mnist-60k/train', undefined, [400, 'ERR_BAD_REQUEST', 'ranges']],
    ['mnist-60k/train?ranges=1&ranges=2', undefined, [400, 'ERR_BAD_REQUEST', 'ranges']],
    ['mnist-60k/train?ranges=5,3', undefined, [400, 'ERR_BAD_REQUEST', 'ranges']],
    ['mnist-60k/test?ranges=10000', undefined, [400, 'ERR_BAD_REQUEST', 'ranges']],
    ['mnist-10k/train?ranges=8000', undefined, [400, 'ERR_BAD_REQUEST', 'ranges']],
    [`mnist-60k/train?ranges=0-${MAX_EXAMPLES_PER_REQUEST}`, undefined, [400, 'ERR_BAD_REQUEST', 'ranges']],
    [`mnist-60k/train?ranges=${'1,'.repeat(5000)}`, undefined, [400, 'ERR_BAD_REQUEST', 'ranges']],
  ];
  for (const [path, headers, want] of cases) {
    assert.deepEqual(await errorOf(await examples('strict', path, headers)), want, path.slice(0, 60));
  }
  // A room nobody is in: its join code opens the door, but there is nothing to read.
  assert.deepEqual(await errorOf(await examples('empty-room', 'mnist-60k/train?ranges=0')), [404, 'ERR_UNKNOWN_ROOM', undefined]);
  assert.equal((await status('strict')).data.bytesServed, 0);
});

test('data requests spend the /api budget: past it, 429 with Retry-After, and the server stays up', async () => {
  await member('flood', 'dee');
  const answers = await Promise.all(Array.from({ length: HTTP_BUDGET + 10 }, () => examples('flood', 'mnist-60k/train?ranges=0')));
  const limited = answers.filter((r) => r.status === 429);
  assert.ok(limited.length >= 10, `${limited.length} refused`);
  assert.ok(Number(limited[0]!.headers.get('retry-after')) > 0);
  assert.equal((await errorOf(limited[0]!))[1], 'ERR_RATE_LIMITED');
  for (const r of answers) if (!r.bodyUsed) await r.body?.cancel();
  const health = await fetch(`${server.url}/healthz`);
  assert.equal(health.status, 200);
});
