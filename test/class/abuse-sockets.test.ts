/**
 * The abuse suite over socket.io, against a real server (test/support/abuse.ts): handshakes
 * without the join code and guessing, random and malformed events and raw packets, floods
 * past the budgets (socket events and HTTP reads), and stale and replayed room messages
 * from strangers and other rooms' members. What it proves: the server stays up, other rooms
 * are unaffected, nothing on disk is corrupted, and a training room next door keeps
 * stepping. It prints the totals it threw. Oversized bodies, path traversal and forged
 * uploads are in abuse-http.test.ts; replayed peer-to-peer ring messages in
 * test/unit/ring-allreduce.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { DEFAULT_RATE_LIMITS } from '../../signaling-server/edge/rate-limits';
import { CLIENT_EVENT_NAMES, type AckResult } from '../../shared/protocol';
import { mulberry32 } from '../../shared/util/random';
import { codeFor } from '../support/server';
import {
  ATTACK_ROOM,
  IP,
  QUIET_ROOM,
  TRAIN_ROOM,
  answered,
  attacker,
  attackerIn,
  disconnected,
  emitWithAck,
  proveUnharmed,
  rawPacket,
  request,
  roomStatus,
  server,
  sleep,
  thrown,
  useAbuseServer,
  waitFor,
} from '../support/abuse';

const SEED = 20_240_607;

useAbuseServer();

// ---------------------------------------------------------------------------
// Attacks
// ---------------------------------------------------------------------------
test('handshakes without the room\'s join code are refused; guessing is rate-limited per address', async () => {
  const bad: unknown[] = [
    undefined,
    {},
    { room: TRAIN_ROOM },
    { room: '../../etc/passwd', code: codeFor(TRAIN_ROOM) },
    { room: TRAIN_ROOM, code: 'x'.repeat(10_000) },
    { room: TRAIN_ROOM, code: { $ne: null } },
    { room: [TRAIN_ROOM], code: [codeFor(TRAIN_ROOM)] },
    { room: `${TRAIN_ROOM}\u0000`, code: codeFor(TRAIN_ROOM) },
    { ['__proto__']: { room: TRAIN_ROOM, code: codeFor(TRAIN_ROOM) } },
  ];
  for (const auth of bad) {
    const { refused } = await attacker(IP.guesses, auth);
    assert.equal(refused?.code, 'ERR_BAD_JOIN_CODE', JSON.stringify(auth));
  }
  // Wrong codes, including the attackers' own room's code for the training room.
  const wrong = [codeFor(ATTACK_ROOM), codeFor('another-room'), 'K7M-Q2P'];
  const budget = DEFAULT_RATE_LIMITS.badJoinCodesPerWindow;
  // All at once, as a guesser would: the budget holds for concurrent handshakes too.
  const GUESSES = budget + 40;
  const results = await Promise.all(Array.from({ length: GUESSES }, (_, i) => attacker(IP.guesses, { room: TRAIN_ROOM, code: wrong[i % wrong.length] })));
  const codes = results.map((r) => r.refused?.code ?? 'connected');
  assert.equal(codes.filter((c) => c === 'ERR_BAD_JOIN_CODE').length, budget, JSON.stringify(codes));
  assert.equal(codes.filter((c) => c === 'ERR_RATE_LIMITED').length, GUESSES - budget);
  // Past its budget the address is refused even with the right code; the class is not.
  assert.equal((await attacker(IP.guesses, { room: TRAIN_ROOM, code: codeFor(TRAIN_ROOM) })).refused?.code, 'ERR_RATE_LIMITED');
  assert.equal((await roomStatus(TRAIN_ROOM)).members.length, 2);
});

/** An own property, even named __proto__ (as JSON.parse makes it on the server), never the prototype. */
function ownKey(o: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(o, key, { value, enumerable: true, writable: true, configurable: true });
}

/** Payloads that are each wrong in their own way. */
function garbage(rand: () => number, depth = 0): unknown {
  const nasty = ['', '../../etc/passwd', '%2e%2e%2f%2e%2e%2f', '..%5c..%5c', '/etc/passwd', 'C:\\Windows\\win.ini', 'a\u0000b', 'ＡＢＣ', '．．／．．／', '..∕..∕', '<script>alert(1)</script>', '__proto__', 'constructor'];
  const numbers = [0, -0, -1, 0.5, 1e308, -1e308, 2 ** 53 + 2, 4_294_967_296, Number.MAX_VALUE, Number.MIN_VALUE];
  switch (Math.floor(rand() * (depth > 3 ? 6 : 11))) {
    case 0:
      return null;
    case 1:
      return rand() < 0.5;
    case 2:
      return numbers[Math.floor(rand() * numbers.length)];
    case 3:
      return nasty[Math.floor(rand() * nasty.length)];
    case 4:
      return 'x'.repeat(Math.floor(rand() * 20_000));
    case 5:
      return Buffer.from(Array.from({ length: Math.floor(rand() * 512) }, () => Math.floor(rand() * 256)));
    case 6:
      return Array.from({ length: Math.floor(rand() * 5) }, () => garbage(rand, depth + 1));
    case 7: {
      const keys = ['__proto__', 'constructor', 'prototype', 'room', 'name', 'run', 'generation', 'step', 'to', 'data', 'toString', 'valueOf', 'linkId', 'member'];
      const o: Record<string, unknown> = {};
      for (let i = Math.floor(rand() * 5); i >= 0; i--) ownKey(o, keys[Math.floor(rand() * keys.length)]!, garbage(rand, depth + 1));
      return o;
    }
    case 8: {
      let v: unknown = 'deep';
      for (let i = Math.floor(rand() * 200); i > 0; i--) v = rand() < 0.5 ? [v] : { a: v };
      return v;
    }
    default:
      return nearlyValid(rand, CLIENT_EVENT_NAMES[Math.floor(rand() * CLIENT_EVENT_NAMES.length)]!);
  }
}

/** A valid-looking payload of `event`, with one field broken (or none: then it is valid, from a non-member or for a stale run). */
function nearlyValid(rand: () => number, event: string, targets: string[] = []): unknown {
  const timing = { computeMs: 1, readbackMs: 1, crossMs: 0, commMs: 1, applyMs: 1 };
  const run = 1 + Math.floor(rand() * 3);
  const valid: Record<string, Record<string, unknown>> = {
    'room:join': { room: rand() < 0.8 ? ATTACK_ROOM : TRAIN_ROOM, name: `bot-${Math.floor(rand() * 1000)}`, kind: 'node', backend: 'cpu' },
    'signal:relay': { to: targets[Math.floor(rand() * targets.length)] ?? 'abcdef0123456789', linkId: 'l-1', data: { type: 'offer', sdp: 'v=0' } },
    'worker:progress': {
      run, generation: 1, step: 5, epoch: 0, loss: 1, trainAccuracy: 0.5, examplesPerSec: 10, weightsHash: '0123456789abcdef', totalSteps: 100, computeMs: 1,
      hashChecked: false, hashMismatch: false, batchShare: 0.5, linkMBps: 1, learningRate: 0.001, speedVsMedian: 1, collective: { algorithm: 'ring', alphaMs: 0, betaMBps: 0, reason: 'test', timing },
    },
    'worker:evaluated': { run, generation: 1, step: 5, epoch: 0, accuracy: 0.9 },
    'worker:finished': { run, generation: 1, step: 5, reason: rand() < 0.5 ? 'failed' : 'completed' },
    'ring:drop': { run, generation: 1, member: targets[0] ?? 'abcdef0123456789', step: 5, computeMs: 9000, deadlineMs: 1000 },
    'ring:reform': { generation: Math.floor(rand() * 5), reason: 'link broke' },
  };
  const payload = { ...(valid[event] ?? { what: 'unknown' }) };
  const keys = Object.keys(payload);
  const r = rand();
  if (r < 0.4 && keys.length > 0) payload[keys[Math.floor(rand() * keys.length)]!] = garbage(rand, 4);
  else if (r < 0.55 && keys.length > 0) delete payload[keys[Math.floor(rand() * keys.length)]!];
  else if (r < 0.7) ownKey(payload, rand() < 0.5 ? '__proto__' : 'extra', { polluted: true });
  return payload;
}

test(`random and malformed socket events (seed ${SEED}) get coded answers, and the server stays up`, async () => {
  const rand = mulberry32(SEED);
  const trainIds = (await roomStatus(TRAIN_ROOM)).members.map((m) => m.id);
  const unknownNames = ['', 'room:', 'room:join ', 'ROOM:JOIN', 'admin:shutdown', '__proto__', 'constructor', 'x'.repeat(5_000), 'ring:generation', 'train:start', 'server:error'];
  const ATTACKERS = 4;
  const PER_ATTACKER = 750; // past the per-connection budget of 600 per window on purpose
  const acked = { expected: 0, answered: 0 };
  const codes = new Map<string, number>();
  const attackers = await Promise.all(Array.from({ length: ATTACKERS }, () => attackerIn(ATTACK_ROOM, IP.random)));
  await Promise.all(
    attackers.map(async (socket) => {
      socket.on('server:error', () => {});
      for (let i = 0; i < PER_ATTACKER; i++) {
        const known = rand() < 0.85;
        const event = known ? CLIENT_EVENT_NAMES[Math.floor(rand() * CLIENT_EVENT_NAMES.length)]! : unknownNames[Math.floor(rand() * unknownNames.length)]!;
        const payload = rand() < 0.5 ? nearlyValid(rand, event, trainIds) : garbage(rand);
        const shape = rand();
        const args: unknown[] = shape < 0.1 ? [] : shape < 0.2 ? [payload, garbage(rand), garbage(rand)] : [payload];
        // Acks: a function (the protocol's ack, or one on an event that has none), garbage where the ack goes, or none.
        const ackKind = rand();
        if (ackKind < 0.5) {
          const expectsAnswer = !known || (event === 'room:leave' ? args.length === 0 : (event === 'room:join' || event === 'signal:relay') && args.length === 1);
          if (expectsAnswer) acked.expected++;
          thrown.socketEvents++;
          (socket.emit as (e: string, ...a: unknown[]) => void)(event, ...args, (result: AckResult<object>) => {
            const code = result.ok ? 'ok' : result.error.code;
            codes.set(code, (codes.get(code) ?? 0) + 1);
            if (code === 'ERR_RATE_LIMITED') answered.rateLimitedEvents++;
            if (expectsAnswer) acked.answered++;
          });
        } else {
          if (ackKind < 0.75) args.push(garbage(rand));
          thrown.socketEvents++;
          (socket.emit as (e: string, ...a: unknown[]) => void)(event, ...args);
        }
        if (i % 25 === 24) await new Promise((r) => setImmediate(r));
      }
    }),
  );
  await waitFor('an answer to every ack the protocol promises', async () => acked.answered >= acked.expected, 10_000).catch(() => {});
  assert.equal(acked.answered, acked.expected, `acks answered: ${JSON.stringify(Object.fromEntries(codes))}`);
  assert.ok((codes.get('ERR_RATE_LIMITED') ?? 0) > 0, 'the events past the budget were refused');
  assert.ok((codes.get('ERR_BAD_REQUEST') ?? 0) > 0);
  for (const code of codes.keys()) assert.notEqual(code, 'ERR_INTERNAL');

  // Malformed socket.io packets straight onto the engine (which adds engine.io's "4"): each
  // is ignored or closes only its own connection.
  const malformed: Array<string | Buffer> = [
    '2', '4', '9', '2[', '2{"a":1}', '2[null]', '2[{}]', '2[1]', '2["connect"]', '2["disconnect"]', '2["newListener"]', '0', '0{"token":1}', '1', '4{"message":"x"}',
    '51-["room:join"]', '51-["room:join",{"_placeholder":true,"num":0}]', '51-["room:join",{"_placeholder":true,"num":5}]', '599999-["x"]', '5-1-["x"]',
    '2/admin,["room:join"]', '2/,["room:join"]', `2["room:join",${'['.repeat(40_000)}${']'.repeat(40_000)}]`, '3["not an ack"]', '31["late ack"]',
    '212345678901234567890["room:leave"]', '2-1["room:leave"]', '6', '61-[{"_placeholder":true,"num":0}]', Buffer.from([0, 1, 2, 3]), '\u0000\u0001', '',
  ];
  for (const packet of malformed) {
    const socket = await attackerIn(ATTACK_ROOM, IP.random);
    rawPacket(socket, packet);
    // Either the server ignores it or drops this one connection; it answers the next one either way.
    await Promise.race([disconnected(socket, 300).catch(() => null), sleep(300)]);
  }
  // A deep signal inside a valid packet, from a member of the attackers' room.
  const member = await attackerIn(ATTACK_ROOM, IP.random);
  const joined = await emitWithAck(member, 'room:join', { room: ATTACK_ROOM, name: 'deep', kind: 'node', backend: 'cpu' });
  if (joined.ok) {
    const deep = `{"a":${'['.repeat(20_000)}1${']'.repeat(20_000)}}`;
    const reply = new Promise<AckResult<object>>((resolve) => {
      const id = 777_777;
      (member.io.engine as unknown as { on(e: string, h: (d: unknown) => void): void }).on('message', (d) => {
        if (typeof d === 'string' && d.startsWith(`3${id}`)) resolve((JSON.parse(d.slice(`3${id}`.length)) as [AckResult<object>])[0]);
      });
      rawPacket(member, `2${id}["signal:relay",{"to":"${joined.memberId as string}","linkId":"l-1","data":${deep}}]`);
    });
    const answer = await Promise.race([reply, sleep(5_000).then(() => null)]);
    assert.ok(answer && !answer.ok, 'the deep signal is answered');
    assert.equal(answer.error.code, 'ERR_BAD_REQUEST');
  }
  assert.equal((await fetch(`${server.url}/healthz`)).status, 200);
});

test('floods past the budget are refused with ERR_RATE_LIMITED, told once, and /healthz answers throughout', async () => {
  const flooder = await attackerIn(ATTACK_ROOM, IP.flood);
  const told: string[] = [];
  flooder.on('server:error', (e) => told.push(e.code));
  const FLOOD = 3_000;
  const latencies: number[] = [];
  const probe = (async () => {
    for (let i = 0; i < 10; i++) {
      const t0 = Date.now();
      assert.equal((await fetch(`${server.url}/healthz`)).status, 200);
      latencies.push(Date.now() - t0);
      await sleep(50);
    }
  })();
  // Sent in bursts of 100 with a turn of the event loop between: the attacker shares this
  // process with the server, and its own encoding must not be what /healthz measures.
  const pending: Array<Promise<AckResult<Record<string, unknown>>>> = [];
  for (let i = 0; i < FLOOD; i++) {
    pending.push(emitWithAck(flooder, 'room:join', { room: ATTACK_ROOM, name: `flood-${i}`, kind: 'node', backend: 'cpu' }));
    if (i % 100 === 99) await new Promise((r) => setImmediate(r));
  }
  const acks = await Promise.all(pending);
  await probe;
  const limited = acks.filter((a) => !a.ok && a.error.code === 'ERR_RATE_LIMITED').length;
  answered.rateLimitedEvents += limited;
  assert.equal(limited, FLOOD - DEFAULT_RATE_LIMITS.socketEventsPerWindow);
  // Unknown events past the budget are refused too, not answered one for one.
  const unknownFlooder = await attackerIn(ATTACK_ROOM, IP.flood);
  const unknownTold: string[] = [];
  unknownFlooder.on('server:error', (e) => unknownTold.push(e.code));
  for (let i = 0; i < FLOOD; i++) {
    thrown.socketEvents++;
    (unknownFlooder.emit as (e: string, ...a: unknown[]) => void)('no:such-event', i);
    if (i % 100 === 99) await new Promise((r) => setImmediate(r));
  }
  await emitWithAck(unknownFlooder, 'room:leave').then((r) => assert.ok(!r.ok));
  await sleep(200);
  assert.ok(unknownTold.length <= DEFAULT_RATE_LIMITS.socketEventsPerWindow + 1, `${unknownTold.length} server:error replies to ${FLOOD} unknown events`);
  assert.equal(unknownTold.filter((c) => c === 'ERR_RATE_LIMITED').length, 1);
  assert.equal(told.filter((c) => c === 'ERR_RATE_LIMITED').length, 1);
  assert.ok(Math.max(...latencies) < 1_000, `/healthz latencies during the flood: ${latencies.join(', ')} ms`);

  // HTTP: past the per-address budget, 429; /healthz is not behind it. Kept-alive
  // connections, 100 at a time, until 300 requests were refused (how many that takes
  // depends on how fast this machine gets through a window's budget).
  const agent = new http.Agent({ keepAlive: true, maxSockets: 100, localAddress: IP.httpFlood } as http.AgentOptions);
  const statuses: number[] = [];
  const t0 = Date.now();
  while (statuses.filter((s) => s === 429).length < 300 && statuses.length < 8_000) {
    // A student of the room flooding it: reads need the join code.
    const batch = await Promise.all(Array.from({ length: 100 }, () => request('GET', `/api/rooms/${TRAIN_ROOM}`, { ip: IP.httpFlood, agent, headers: { 'x-join-code': codeFor(TRAIN_ROOM) } })));
    statuses.push(...batch.map((r) => r.status));
  }
  agent.destroy();
  assert.ok(statuses.filter((s) => s === 429).length >= 300, `429s: ${statuses.filter((s) => s === 429).length} of ${statuses.length} in ${(Date.now() - t0) / 1000} s`);
  assert.ok(statuses.every((s) => s === 200 || s === 429));
  assert.equal((await request('GET', '/healthz', { ip: IP.httpFlood })).status, 200);
});

test('stale and replayed room messages from strangers and other rooms\' members leave the training room alone', async () => {
  const train = await roomStatus(TRAIN_ROOM);
  const [chief, second] = train.members;
  const run = train.run;
  const generation = train.generation;
  // A member of the attackers' room replays what a real member of the training room would send.
  const outsider = await attackerIn(ATTACK_ROOM, IP.random);
  const outsiderJoin = await emitWithAck(outsider, 'room:join', { room: ATTACK_ROOM, name: 'replayer', kind: 'node', backend: 'cpu' });
  // A stranger: let in with the attackers' code, never joined.
  const stranger = await attackerIn(ATTACK_ROOM, IP.random);
  const replays: Array<[string, unknown]> = [
    ['worker:progress', { run, generation, step: train.step + 1_000, epoch: 0, loss: 0, trainAccuracy: 1, examplesPerSec: 1e9, weightsHash: 'ffffffffffffffff', totalSteps: 1, computeMs: 0, hashChecked: true, hashMismatch: true, batchShare: 1, linkMBps: 0, learningRate: 0.001, speedVsMedian: 1, collective: { algorithm: 'ring', alphaMs: 0, betaMBps: 0, reason: 'test', timing: { dataMs: 0, computeMs: 0, readbackMs: 0, crossMs: 0, commMs: 0, applyMs: 0 } } }],
    ['worker:finished', { run, generation, step: train.step, reason: 'failed', code: 'ERR_TIMEOUT' }],
    ['worker:finished', { run: Math.max(1, run - 1), generation: Math.max(0, generation - 1), step: 0, reason: 'completed' }],
    ['worker:evaluated', { run, generation, step: train.step, epoch: 0, accuracy: 0 }],
    ['ring:drop', { run, generation, member: second!.id, step: train.step, computeMs: 99_999, deadlineMs: 1 }],
    ['ring:drop', { run, generation, member: chief!.id, step: train.step, computeMs: 99_999, deadlineMs: 1 }],
    ['ring:reform', { generation, reason: 'replayed' }],
    ['ring:reform', { generation: generation - 1, reason: 'stale' }],
  ];
  const told: string[] = [];
  outsider.on('server:error', (e) => told.push(e.code));
  stranger.on('server:error', (e) => told.push(e.code));
  for (let round = 0; round < 20; round++) {
    for (const [event, payload] of replays) {
      for (const s of [outsider, stranger]) {
        thrown.socketEvents++;
        (s.emit as (e: string, p: unknown) => void)(event, payload);
      }
    }
  }
  // Replayed signals: to the training room's members (refused), and a valid earlier one within the attackers' room.
  for (const to of [chief!.id, second!.id]) {
    const r = await emitWithAck(outsider, 'signal:relay', { to, linkId: 'g1-0-1', data: { type: 'offer', sdp: 'v=0' } });
    assert.equal(!r.ok && r.error.code, 'ERR_NOT_IN_ROOM');
    const s = await emitWithAck(stranger, 'signal:relay', { to, linkId: 'g1-0-1', data: { type: 'offer', sdp: 'v=0' } });
    assert.equal(!s.ok && s.error.code, 'ERR_NOT_IN_ROOM');
  }
  if (outsiderJoin.ok) {
    const self = outsiderJoin.memberId as string;
    const relayed: unknown[] = [];
    outsider.on('signal:relay', (r) => relayed.push(r));
    for (let i = 0; i < 3; i++) assert.ok((await emitWithAck(outsider, 'signal:relay', { to: self, linkId: 'g1-0-1', data: { type: 'offer', sdp: 'v=0' } })).ok);
    await sleep(100);
    // The server relays what a member of the room sends; the peers drop replaced link ids (shared/ring-network.ts).
    assert.equal(relayed.length, 3);
  }
  // A rejoin claim on the training room's chief, from a stranger holding only another room's code.
  const claim = await emitWithAck(stranger, 'room:join', { room: TRAIN_ROOM, name: 'imposter', kind: 'node', backend: 'cpu', rejoin: { memberId: chief!.id, memberToken: 'a'.repeat(48) } });
  assert.equal(!claim.ok && claim.error.code, 'ERR_BAD_JOIN_CODE');
  await sleep(300);
  assert.ok(told.length > 0 && told.every((c) => ['ERR_NOT_IN_ROOM', 'ERR_STALE_RUN', 'ERR_NOT_CHIEF', 'ERR_BAD_REQUEST'].includes(c)), told.join(','));

  const after = await roomStatus(TRAIN_ROOM);
  assert.equal(after.generation, generation, 'no re-form, no drop');
  assert.equal(after.run, run);
  assert.equal(after.state, 'training');
  assert.deepEqual(after.members.map((m) => m.id), train.members.map((m) => m.id));
  assert.ok(after.step >= train.step, 'the step never goes back');
  assert.ok(after.step < train.step + 1_000);
  assert.equal(after.consistency.mismatches, 0);
  assert.deepEqual(after.dropped, []);
});

// ---------------------------------------------------------------------------
// What it proves
// ---------------------------------------------------------------------------
test('what it proves: the server is up, the other rooms are unaffected, the disk is intact, the class kept stepping', async () => {
  await proveUnharmed('abuse (sockets)', [TRAIN_ROOM, ATTACK_ROOM, QUIET_ROOM]);
});
