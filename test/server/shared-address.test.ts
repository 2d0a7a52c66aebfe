/**
 * Issue 57, defects 5 and 6, against a real server with socket.io clients; each test failed
 * on the previous main.
 * - 5: members count by network address for secure aggregation, so a class behind one NAT
 *   was one client and its secure run held for ever, and nothing told the teacher why. Now
 *   the status names the cause, and the teacher may vouch that the members sharing the
 *   address are distinct devices: the ring hears a generation counting each, and the hold clears.
 * - 6: of a link both ends report shut, the newer end was shed on a tie, so one seat that
 *   refused one newcomer's link kept it out for good. Now a tie sheds the older end.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { io as connect } from 'socket.io-client';
import { SHED_REPORT_WINDOW_MS } from '../../signaling-server/rooms/formation';
import { MIN_SECURE_MEMBERS, type AckResult, type JoinAccepted, type MemberDropped } from '../../shared/protocol';
import { AS_TEACHER, codeFor, nextEvent, startTestRun, useTestServer, type TestSocket } from '../support/server';

// Addresses come through X-Forwarded-For from loopback, which the server trusts as its
// balancer; a long key deadline keeps the secure run's members (which publish no keys) in.
const t = useTestServer({ trustProxy: 'loopback', keyDeadlineMs: 60_000 });

/** A school's one public address (TEST-NET-3): no seat cap by default. */
const SCHOOL_NAT = '203.0.113.7';
/** How long a shedding takes to show after its window: generous, a loaded machine. */
const SETTLE_MS = 700;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Student `name` joins `room` from client address `ip`; its socket and member id. */
async function studentFrom(room: string, ip: string, name: string): Promise<{ socket: TestSocket; id: string }> {
  const options = { transports: ['websocket'], forceNew: true, reconnection: false, auth: { room, code: codeFor(room) }, extraHeaders: { 'x-forwarded-for': ip } };
  const socket: TestSocket = t.keep(connect(t.server.url, options));
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', () => resolve());
    socket.once('connect_error', reject);
  });
  const joined = await new Promise<AckResult<JoinAccepted>>((resolve) => socket.emit('room:join', { room, name, kind: 'node', backend: 'cpu' }, resolve));
  assert.ok(joined.ok, JSON.stringify(joined));
  return { socket, id: joined.memberId };
}

function putSeats(room: string, body: unknown): Promise<Response> {
  return fetch(`${t.server.url}/api/rooms/${room}/seats`, { method: 'PUT', headers: { ...AS_TEACHER.headers, 'content-type': 'application/json' }, body: JSON.stringify(body) });
}

test('issue 57 (5): a secure run of four members behind one address holds with its cause in the status; the teacher vouches and the ring counts four (failed on the previous main)', async () => {
  const room = 'one-nat';
  const members = [];
  for (const name of ['a', 'b', 'c', 'd']) members.push(await studentFrom(room, SCHOOL_NAT, name));
  const start = await startTestRun(t.server, room, members[0]!.socket, { secureAggregation: true });

  const held = await t.status(room);
  assert.equal(held.clients, 1, 'one address, one client: the run holds');
  assert.equal(held.seats.vouched, false, 'not vouched by default');
  assert.match(held.secureHold ?? '', new RegExp(`needs ${MIN_SECURE_MEMBERS} distinct clients and the ring has 1: all 4 members share one network address`));
  assert.match(held.secureHold ?? '', /vouch for them/);

  assert.equal((await putSeats(room, {})).status, 400, 'a request that names nothing changes nothing');

  const counted = nextEvent(members[1]!.socket, 'ring:generation', (g) => g.generation > start.generation);
  const res = await putSeats(room, { vouched: true });
  assert.equal(res.status, 200, await res.clone().text());
  const body = (await res.json()) as { vouched: boolean };
  assert.equal(body.vouched, true);
  assert.equal((await counted).clients, 4, 'the held ring hears a generation that counts every member');

  const after = await t.status(room);
  assert.equal(after.clients, 4);
  assert.equal(after.secureHold, null, 'the hold clears');
  assert.equal(after.seats.vouched, true);
  assert.equal(after.seats.perAddress, null, 'the seat cap is untouched');

  // Withdrawn, the ring counts by address again.
  await putSeats(room, { vouched: false });
  assert.equal((await t.status(room)).clients, 1);
});

test('issue 57 (6): a seat that refuses a newer classmate\'s link is shed itself; the newcomer stays (failed on the previous main)', async () => {
  const room = 'refusing-seat';
  const chief = await studentFrom(room, '10.57.0.1', 'chief');
  const seat = await studentFrom(room, '10.57.0.2', 'seat');
  const newcomer = await studentFrom(room, '10.57.0.3', 'newcomer');
  const { generation } = await startTestRun(t.server, room, chief.socket);
  const seatDropped = nextEvent(seat.socket, 'member:dropped', () => true, SHED_REPORT_WINDOW_MS + 5_000);
  let newcomerDropped: MemberDropped | null = null;
  newcomer.socket.on('member:dropped', (d: MemberDropped) => (newcomerDropped = d));

  // Both ends of the seat–newcomer link report it shut; their histories tie.
  seat.socket.emit('ring:reform', { generation, reason: 'ring links did not open', unreachable: [newcomer.id] });
  newcomer.socket.emit('ring:reform', { generation, reason: 'ring links did not open', unreachable: [seat.id] });
  assert.equal((await seatDropped).reason, 'unreachable');
  await sleep(SETTLE_MS);

  const status = await t.status(room);
  assert.deepEqual(status.members.map((m) => m.name), ['chief', 'newcomer'], 'the newcomer stays in the ring');
  assert.equal(newcomerDropped, null);
  assert.deepEqual(status.dropped.map((d) => [d.name, d.reason]), [['seat', 'unreachable']]);
});
