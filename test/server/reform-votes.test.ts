/**
 * Issue 57, defect 2, against a real server with socket.io clients: a bare ring:reform is a
 * vote. Before, one member's request made a new generation whenever the current one was 2 s
 * old (generations 4 to 8 in 10.5 s from one member), and every such generation aborts the
 * turn in flight on every member. Now a request re-forms only when another client, or a ring
 * neighbour, reports a failure of the same generation; a member's requests are capped per run,
 * ignored past the cap, and a member that keeps on is evicted with a reason the teacher sees.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { io as connect } from 'socket.io-client';
import { REFORM_MIN_GENERATION_AGE_MS } from '../../signaling-server/rooms/room';
import { SHED_REPORT_WINDOW_MS } from '../../signaling-server/rooms/formation';
import { MAX_REFORMS_PER_MEMBER_PER_RUN, REFORM_REQUESTS_PAST_CAP_BEFORE_EVICTION } from '../../signaling-server/rooms/reform-votes';
import type { AckResult, Generation, JoinAccepted } from '../../shared/protocol';
import type { ErrorBody } from '../../shared/protocol/errors';
import { codeFor, nextEvent, startTestRun, useTestServer, type TestSocket } from '../support/server';

// The test's loopback connections stand in for students on one class-network address
// through X-Forwarded-For, which the server believes only from a trusted balancer (loopback).
const t = useTestServer({ trustProxy: 'loopback' });

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Past REFORM_MIN_GENERATION_AGE_MS, with room for a loaded machine's timers. */
const generationOld = () => sleep(REFORM_MIN_GENERATION_AGE_MS + 200);
/** How long a request that re-forms takes to show: generous, a loaded machine. */
const SETTLE_MS = 500;

const ask = (s: TestSocket, generation: number, reason = 'ERR_TIMEOUT: the collective timed out') => s.emit('ring:reform', { generation, reason });

/** Every generation `s` hears from now on. */
function generationsHeard(s: TestSocket): number[] {
  const heard: number[] = [];
  s.on('ring:generation', (g: Generation) => heard.push(g.generation));
  return heard;
}

/** The codes of the server:error events `s` hears. */
function errorsOf(s: TestSocket): string[] {
  const codes: string[] = [];
  s.on('server:error', (e: ErrorBody) => codes.push(e.code));
  return codes;
}

/** Students `names` join `room` from client address `ip`, each on a connection of its own. */
async function studentsFrom(room: string, ip: string, names: readonly string[]): Promise<TestSocket[]> {
  const sockets: TestSocket[] = [];
  for (const name of names) {
    const s: TestSocket = t.keep(connect(t.server.url, { transports: ['websocket'], forceNew: true, reconnection: false, auth: { room, code: codeFor(room) }, extraHeaders: { 'x-forwarded-for': ip } }));
    await new Promise<void>((resolve, reject) => {
      s.once('connect', () => resolve());
      s.once('connect_error', reject);
    });
    const joined = await new Promise<AckResult<JoinAccepted>>((resolve) => s.emit('room:join', { room, name, kind: 'node', backend: 'cpu' }, resolve));
    assert.ok(joined.ok, JSON.stringify(joined));
    sockets.push(s);
  }
  return sockets;
}

test('one member asking every 2 s re-forms nothing; a second client asking for the same generation re-forms it at once', async (ctx) => {
  const room = 'reform-one-voice';
  const { students: [a, b, c] } = await t.students(room, ['a', 'b', 'c']);
  const { generation } = await startTestRun(t.server, room, a!);
  const heard = generationsHeard(b!);
  const refusals = errorsOf(a!);
  // The attack of issue 57: one member asks again as soon as each generation may be re-formed, for 10 s.
  const stormEnd = Date.now() + 10_000;
  let asked = 0;
  while (Date.now() < stormEnd) {
    await generationOld();
    ask(a!, (await t.status(room)).generation);
    asked++;
  }
  await sleep(SETTLE_MS);
  const after = await t.status(room);
  ctx.diagnostic(`${asked} requests from one member in 10 s: ${after.generation - generation} new generations (before the fix: one per request)`);
  assert.equal(after.generation, generation, `one member's ${asked} requests re-formed the ring ${heard.length} times`);
  assert.deepEqual(heard, []);
  assert.deepEqual(refusals, [], 'a vote is not refused: it waits for a second report');
  assert.equal(after.events.filter((e) => e.kind === 'reformed').length, 0);

  // An honest failure: another member's collective failed in the same generation too.
  const reformed = nextEvent(c!, 'ring:generation');
  ask(c!, generation);
  const g = await reformed;
  assert.equal(g.generation, generation + 1);
  assert.deepEqual(g.members.map((m) => m.name), ['a', 'b', 'c'], 'the same members, a fresh generation');
  const event = (await t.status(room)).events.filter((e) => e.kind === 'reformed').at(-1);
  assert.deepEqual(event?.members, ['c', 'a'], 'the log names whose requests re-formed the ring');
});

test("behind one address (one client), a ring neighbour's failure backs a request and a classmate's across the ring does not", async () => {
  const room = 'reform-neighbours';
  // Four seats of one class-network address: one client by the seat rule, ring a-b-c-d-a.
  const [a, b, c, d] = await studentsFrom(room, '192.168.57.10', ['a', 'b', 'c', 'd']);
  const { generation } = await startTestRun(t.server, room, a!);
  const ids = (await t.status(room)).members.map((m) => m.id);
  await generationOld();
  // a and c are not neighbours: one client's two seats across the ring are one voice.
  ask(a!, generation);
  ask(c!, generation);
  await sleep(SETTLE_MS);
  assert.equal((await t.status(room)).generation, generation, 'two seats of one client that do not link re-form nothing');
  // b links to both: its collective failed too.
  const reformed = nextEvent(d!, 'ring:generation');
  ask(b!, generation);
  assert.equal((await reformed).generation, generation + 1);

  // A neighbour's unreachable report (its link to c stayed shut) backs c's bare request as well.
  await generationOld();
  const next = generation + 1;
  ask(c!, next);
  await sleep(SETTLE_MS);
  assert.equal((await t.status(room)).generation, next);
  const again = nextEvent(a!, 'ring:generation');
  b!.emit('ring:reform', { generation: next, reason: 'ring links did not open', unreachable: [ids[2]!] });
  ask(c!, next);
  assert.equal((await again).generation, next + 1);
  await sleep(SHED_REPORT_WINDOW_MS + SETTLE_MS);
  assert.deepEqual((await t.status(room)).members.map((m) => m.name), ['a', 'b', 'c', 'd'], 'a one-sided report sheds nobody');
});

test('a member asking past its cap for the run is ignored, then evicted, and the teacher sees why; the class trains on', async () => {
  const room = 'reform-cap';
  const { students: [a, b, c], ids } = await t.students(room, ['a', 'b', 'c']);
  const { generation } = await startTestRun(t.server, room, a!);
  const refusals = errorsOf(c!);
  await generationOld();
  for (let i = 0; i < MAX_REFORMS_PER_MEMBER_PER_RUN; i++) ask(c!, generation);
  await sleep(SETTLE_MS);
  assert.equal((await t.status(room)).generation, generation, 'a lone voice, however often');
  assert.deepEqual(refusals, []);
  // Its requests counted: one from another client re-forms the generation.
  const reformed = nextEvent(a!, 'ring:generation');
  ask(b!, generation);
  assert.equal((await reformed).generation, generation + 1);

  // Past the cap its requests are no votes: b's failure alone re-forms nothing now.
  await generationOld();
  const next = generation + 1;
  ask(c!, next);
  ask(b!, next);
  await sleep(SETTLE_MS);
  assert.equal((await t.status(room)).generation, next, "c's request past its cap backs nobody");
  assert.deepEqual(refusals, ['ERR_TOO_MANY_REFORMS']);

  // It keeps on: evicted, told why, and the class re-forms without it.
  const dropped = nextEvent(c!, 'member:dropped');
  const without = nextEvent(a!, 'ring:generation');
  for (let i = 1; i < REFORM_REQUESTS_PAST_CAP_BEFORE_EVICTION; i++) ask(c!, next);
  const notice = await dropped;
  assert.equal(notice.reason, 'evicted');
  assert.equal(notice.reason === 'evicted' && notice.misbehaviour, 'reforms');
  assert.deepEqual((await without).members.map((m) => m.name), ['a', 'b']);
  const status = await t.status(room);
  assert.equal(status.state, 'training', 'the run goes on');
  assert.deepEqual(status.dropped.map((m) => [m.id, m.reason, m.misbehaviour]), [[ids[2], 'evicted', 'reforms']]);
  assert.match(status.dropped[0]!.detail, new RegExp(`asked for ${MAX_REFORMS_PER_MEMBER_PER_RUN + REFORM_REQUESTS_PAST_CAP_BEFORE_EVICTION} re-forms in this run`));
  assert.deepEqual(status.events.filter((e) => e.kind === 'evicted').at(-1)?.members, ['c']);
  assert.ok(refusals.every((code) => code === 'ERR_TOO_MANY_REFORMS'), refusals.join(', '));
});

test('a ring of one re-forms on its own word; outside a run there is nothing to re-form', async () => {
  const room = 'reform-alone';
  const { students: [a] } = await t.students(room, ['a']);
  await generationOld();
  const idle = nextEvent(a!, 'server:error');
  ask(a!, (await t.status(room)).generation);
  assert.equal((await idle).code, 'ERR_BAD_STATE');
  const { generation } = await startTestRun(t.server, room, a!);
  await generationOld();
  const reformed = nextEvent(a!, 'ring:generation');
  ask(a!, generation);
  assert.equal((await reformed).generation, generation + 1);
});
