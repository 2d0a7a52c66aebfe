/**
 * The data service's budgets against a real server (issue 25): one request gets no more
 * than a worker of the run asks for; a member past its bytes for the epoch is refused while
 * its classmates and other rooms are served, and the next epoch refills it; a connection
 * that stops reading is cut while others are served; and an address locked out for wrong
 * join codes keeps reading with member tokens, while a join from it is still refused.
 */
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { io as connect } from 'socket.io-client';
import type { RunningServer } from '../../signaling-server/server';
import type { JoinAccepted, RoomStatus } from '../../shared/protocol';
import type { ErrorBody } from '../../shared/protocol/errors';
import { MAX_EXAMPLES_PER_REQUEST } from '../../shared/data/data-service';
import { EXAMPLE_BYTES } from '../support/mnist';
import { examplesPerRequest } from '../../shared/data/streamed-dataset';
import { STALLED_REPLY_MS, STALL_CHECK_MS, budgetPlan, readerWindowBudget } from '../../signaling-server/edge/data-budget';
import { AS_TEACHER, codeFor, connectClient, join, reportSteps, startTestServer, type TestSocket } from '../support/server';

const servers: RunningServer[] = [];
const sockets: TestSocket[] = [];
after(async () => {
  for (const s of sockets) s.disconnect();
  for (const s of servers) await s.close();
});

async function serve(options: Parameters<typeof startTestServer>[0] = {}): Promise<RunningServer> {
  const server = await startTestServer(options);
  servers.push(server);
  return server;
}

async function member(server: RunningServer, room: string, name: string): Promise<JoinAccepted & { socket: TestSocket }> {
  const socket = await connectClient(server, room);
  sockets.push(socket);
  const joined = await join(socket, room, name);
  if (!joined.ok) assert.fail(`${name} could not join ${room}: ${joined.error.code}`);
  return { ...joined, socket };
}

const asMember = (token: string) => ({ authorization: `Bearer ${token}` });

function examples(server: RunningServer, room: string, path: string, headers: Record<string, string>): Promise<Response> {
  return fetch(`${server.url}/api/rooms/${room}/data/${path}`, { headers });
}

async function refusalOf(res: Response): Promise<[number, string]> {
  const body = (await res.json()) as { error: ErrorBody };
  return [res.status, body.error.code];
}

async function start(server: RunningServer, room: string, config: Record<string, unknown>): Promise<RoomStatus> {
  const res = await fetch(`${server.url}/api/rooms/${room}/start`, { method: 'POST', headers: { ...AS_TEACHER.headers, 'content-type': 'application/json' }, body: JSON.stringify(config) });
  assert.equal(res.status, 200, await res.clone().text());
  return ((await res.json()) as { status: RoomStatus }).status;
}

/** A run whose shards are all 32 examples: its bound per request and its budgets are the small ones. */
const EQUAL_SHARES = { dataset: 'mnist-10k', batchSizePerWorker: 32, balanceShares: false, resumeFrom: 'none' };

test('one request gets at most what a worker of the run asks for at once; more is a coded 400 and nothing is sent', async () => {
  const server = await serve();
  const ann = await member(server, 'sized', 'ann');
  // Before any run: the default recipe's bound, the service's largest.
  assert.equal((await examples(server, 'sized', `mnist-60k/train?ranges=0-${MAX_EXAMPLES_PER_REQUEST - 1}`, asMember(ann.memberToken))).status, 200);
  await start(server, 'sized', EQUAL_SHARES);
  const limit = examplesPerRequest(32);
  assert.equal(limit, 576, 'a prefetch window and a shard, twice over');
  const over = await examples(server, 'sized', `mnist-10k/train?ranges=0-${limit}`, asMember(ann.memberToken));
  assert.deepEqual(await refusalOf(over), [400, 'ERR_BAD_REQUEST']);
  const served = (await (await fetch(`${server.url}/api/rooms/sized`, AS_TEACHER)).json()) as RoomStatus;
  assert.equal(served.data.bytesServed, 0, 'the refused request sent nothing');
  const fits = await examples(server, 'sized', `mnist-10k/train?ranges=0-${limit - 1}`, asMember(ann.memberToken));
  assert.equal(fits.status, 200);
  assert.equal((await fits.arrayBuffer()).byteLength, limit * EXAMPLE_BYTES);
});

test('a member past its bytes for the epoch gets ERR_DATA_BUDGET; its classmate and another room are served; the next epoch refills it', async () => {
  const server = await serve();
  const greedy = await member(server, 'budget', 'greedy');
  const honest = await member(server, 'budget', 'honest');
  const elsewhere = await member(server, 'budget-other', 'other');
  const status = await start(server, 'budget', EQUAL_SHARES);
  const limit = examplesPerRequest(32);
  const budget = readerWindowBudget(budgetPlan(status.config, 'mnist-10k'), { smallestRing: 2, largestRing: 2, changes: 0 });
  // 1.2 × half of the 8,000 training digits, the 2,000 test digits, one window of 9 × 32.
  assert.equal(budget, (4_800 + 2_000 + 288) * EXAMPLE_BYTES);

  // The attack: the same digits again and again, one full request after another.
  let taken = 0;
  let refused: Response | null = null;
  for (let i = 0; i < 100 && !refused; i++) {
    const res = await examples(server, 'budget', `mnist-10k/train?ranges=0-${limit - 1}`, asMember(greedy.memberToken));
    if (res.status === 200) taken += (await res.arrayBuffer()).byteLength;
    else refused = res;
  }
  assert.ok(refused, 'the greedy member was refused');
  assert.ok(taken <= budget && taken > budget - limit * EXAMPLE_BYTES, `took ${taken} of ${budget} B`);
  assert.ok(Number(refused.headers.get('retry-after')) > 0);
  assert.deepEqual(await refusalOf(refused), [429, 'ERR_DATA_BUDGET']);
  // Its test digits are the same budget: no side door.
  assert.deepEqual(await refusalOf(await examples(server, 'budget', `mnist-10k/test?ranges=0-${limit - 1}`, asMember(greedy.memberToken))), [429, 'ERR_DATA_BUDGET']);
  // Never silent: the teacher sees who was refused, why, and when it asks again.
  const seen = ((await (await fetch(`${server.url}/api/rooms/budget`, AS_TEACHER)).json()) as RoomStatus).data.refused;
  assert.deepEqual(seen.map((r) => [r.reader, r.memberId, r.error.code, r.retryAfterS]), [['greedy', greedy.memberId, 'ERR_DATA_BUDGET', 10]]);
  assert.match(seen[0]!.error.message, /this reader took .* of its .* of examples for epoch 0/);

  // Untouched: the classmate's shard, and another room.
  assert.equal((await examples(server, 'budget', `mnist-10k/train?ranges=0-${limit - 1}`, asMember(honest.memberToken))).status, 200);
  assert.equal((await examples(server, 'budget-other', `mnist-10k/train?ranges=0-${limit - 1}`, asMember(elsewhere.memberToken))).status, 200);

  // The chief reports epoch 1: a new window, and the greedy member reads again.
  const chief = status.chief === greedy.memberId ? greedy : honest;
  // Steps 1 to 129 first: no report runs far ahead of the room's step (progress-bounds.ts).
  reportSteps(chief.socket, {
    run: status.run, generation: status.generation, epoch: 0, loss: 1, trainAccuracy: 0.5, examplesPerSec: 100, weightsHash: '0123456789abcdef', totalSteps: 250, computeMs: 10,
    hashChecked: false, hashMismatch: false, batchShare: 0.5, linkMBps: 10, learningRate: 0.003, speedVsMedian: 1,
    collective: { algorithm: 'ring', alphaMs: 0, betaMBps: 0, reason: 'test', timing: { dataMs: 0, computeMs: 10, readbackMs: 0, crossMs: 0, commMs: 0, applyMs: 0 } },
  }, 1, 129);
  chief.socket.emit('worker:progress', {
    run: status.run, generation: status.generation, step: 130, epoch: 1, loss: 1, trainAccuracy: 0.5, examplesPerSec: 100, weightsHash: '0123456789abcdef', totalSteps: 250, computeMs: 10,
    hashChecked: false, hashMismatch: false, batchShare: 0.5, linkMBps: 10, learningRate: 0.003, speedVsMedian: 1,
    collective: { algorithm: 'ring', alphaMs: 0, betaMBps: 0, reason: 'test', timing: { dataMs: 0, computeMs: 10, readbackMs: 0, crossMs: 0, commMs: 0, applyMs: 0 } },
  });
  for (let i = 0; ; i++) {
    const now = (await (await fetch(`${server.url}/api/rooms/budget`, AS_TEACHER)).json()) as RoomStatus;
    if (now.epoch === 1) break;
    assert.ok(i < 50, 'the progress report was recorded');
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.equal((await examples(server, 'budget', `mnist-10k/train?ranges=0-${limit - 1}`, asMember(greedy.memberToken))).status, 200);
  // Served again: no longer waiting, no longer named.
  assert.deepEqual(((await (await fetch(`${server.url}/api/rooms/budget`, AS_TEACHER)).json()) as RoomStatus).data.refused, []);
});

test('a connection that stops reading is cut once its reply stalls; other clients are served meanwhile', { timeout: 60_000 }, async () => {
  const server = await serve();
  const slow = await member(server, 'slow', 'slow');
  const other = await member(server, 'slow', 'other');
  const socket = net.connect({ port: server.port, host: '127.0.0.1' });
  socket.pause();
  let ended = false;
  const closed = new Promise<void>((resolve) => {
    socket.once('close', () => resolve());
    // A reset is how the server may let go; the test only needs to see the connection end.
    socket.on('error', () => (ended = true));
  });
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  // Largest replies, one every 200 ms, never read, until the kernel's buffers are full and a reply stalls.
  const request = `GET /api/rooms/slow/data/mnist-60k/train?ranges=0-${MAX_EXAMPLES_PER_REQUEST - 1} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${slow.memberToken}\r\n\r\n`;
  for (let i = 0; i < 15; i++) {
    socket.write(request);
    await new Promise((r) => setTimeout(r, 200));
  }
  // While it stalls, another member's step is served at once.
  const t0 = performance.now();
  const res = await examples(server, 'slow', 'mnist-60k/train?ranges=5000-5031', asMember(other.memberToken));
  assert.equal(res.status, 200);
  assert.equal((await res.arrayBuffer()).byteLength, 32 * EXAMPLE_BYTES);
  assert.ok(performance.now() - t0 < 2_000, 'served promptly beside the slow reader');
  // Past the stall limit the server has destroyed the connection: reading now drains what the kernel held, then it ends.
  await new Promise((r) => setTimeout(r, STALLED_REPLY_MS + 2 * STALL_CHECK_MS));
  socket.on('end', () => (ended = true));
  socket.resume();
  const cut = await Promise.race([closed.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), 5_000))]);
  socket.destroy();
  assert.ok(cut || ended, 'the server cut the connection that did not read');
  assert.equal((await fetch(`${server.url}/healthz`)).status, 200);
});

test('an address locked out by 60 wrong codes still reads data with a member token; a join with the right code from it is refused', async () => {
  const server = await serve();
  const room = 'lockout';
  const ann = await member(server, room, 'ann');
  // A guesser behind the class's address: 60 wrong codes on data reads, the lockout's budget.
  for (let i = 0; i < 60; i++) {
    const res = await examples(server, room, 'mnist-60k/train?ranges=0', { 'x-join-code': 'AAA-AAA' });
    assert.deepEqual(await refusalOf(res), [403, 'ERR_BAD_JOIN_CODE']);
  }
  // Locked out: the right code no longer opens a read or a join from this address...
  const byCode = await examples(server, room, 'mnist-60k/train?ranges=0', { 'x-join-code': codeFor(room) });
  assert.deepEqual(await refusalOf(byCode), [429, 'ERR_RATE_LIMITED']);
  const joining = connect(server.url, { transports: ['websocket'], forceNew: true, reconnection: false, auth: { room, code: codeFor(room) } });
  sockets.push(joining);
  const handshake = await new Promise<ErrorBody>((resolve, reject) => {
    joining.once('connect', () => reject(new Error('a join from a locked-out address was let in')));
    joining.once('connect_error', (err: Error & { data?: ErrorBody }) => resolve(err.data ?? { code: 'ERR_INTERNAL', message: err.message }));
  });
  assert.equal(handshake.code, 'ERR_RATE_LIMITED');
  // ...but the member already in reads its examples and the loss curve as before.
  const data = await examples(server, room, 'mnist-60k/train?ranges=0-31', asMember(ann.memberToken));
  assert.equal(data.status, 200);
  assert.equal((await data.arrayBuffer()).byteLength, 32 * EXAMPLE_BYTES);
  assert.equal((await fetch(`${server.url}/api/rooms/${room}/metrics`, { headers: asMember(ann.memberToken) })).status, 200);
});
