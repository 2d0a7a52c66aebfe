/**
 * The abuse suite over HTTP and sizes, against a real server (test/support/abuse.ts):
 * oversized socket packets and HTTP bodies, JSON bombs, path traversal in room names,
 * checkpoint ids and file names (`..`, `%2e%2e%2f`, `..%5c`, null bytes), and forged chief
 * uploads. What it proves: the server stays up, other rooms are unaffected, nothing on disk
 * is corrupted or written outside DATA_DIR, and a training room next door keeps stepping.
 * It prints the totals it threw. Handshakes, malformed events, floods and replays are in
 * abuse-sockets.test.ts.
 */
import { startConfigSchema } from '../../shared/tasks/start-config';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MAX_HTTP_JSON_BYTES, MAX_SOCKET_PACKET_BYTES, MAX_SIGNAL_BYTES, type AckResult, type JoinAccepted } from '../../shared/protocol';
import { CHECKPOINT_FILES, sha256Hex, type CheckpointMetadata } from '../../shared/checkpoints/checkpoint';
import { WeightsHasher } from '../../shared/util/weights-hash';
import { codeFor, TEST_TOKEN } from '../support/server';
import {
  ATTACK_ROOM,
  FORGE_ROOM,
  IP,
  QUIET_ROOM,
  TRAIN_ROOM,
  answered,
  attacker,
  attackerIn,
  checkpoints,
  disconnected,
  emitWithAck,
  pinned,
  proveUnharmed,
  request,
  roomStatus,
  server,
  teacher,
  thrown,
  trainBefore,
  useAbuseServer,
  waitFor,
  type HttpResult,
} from '../support/abuse';

useAbuseServer();

// ---------------------------------------------------------------------------
// Attacks
// ---------------------------------------------------------------------------
test('oversized packets drop their connection; oversized and bomb-shaped HTTP bodies get 413 and 400', async () => {
  const member = await attackerIn(ATTACK_ROOM, IP.random);
  const joined = await emitWithAck(member, 'room:join', { room: ATTACK_ROOM, name: 'big', kind: 'node', backend: 'cpu' });
  if (joined.ok) {
    // Over MAX_SIGNAL_BYTES but within a packet: a coded refusal, the connection stays.
    const big = await emitWithAck(member, 'signal:relay', { to: joined.memberId, linkId: 'l-1', data: { sdp: 'x'.repeat(MAX_SIGNAL_BYTES + 10) } });
    assert.equal(!big.ok && big.error.code, 'ERR_PAYLOAD_TOO_LARGE');
    assert.ok(member.connected);
  }
  for (const payload of ['x'.repeat(MAX_SOCKET_PACKET_BYTES + 1), Buffer.alloc(MAX_SOCKET_PACKET_BYTES + 1)]) {
    const socket = await attackerIn(ATTACK_ROOM, IP.random);
    const gone = disconnected(socket);
    thrown.socketEvents++;
    socket.emit('signal:relay' as 'room:leave', payload as never);
    await gone;
    answered.disconnectedForSize++;
  }

  const json = { ...teacher, 'content-type': 'application/json' };
  const tooBig = await request('POST', `/api/rooms/${TRAIN_ROOM}/start`, { headers: json, body: JSON.stringify({ model: 'mlp', pad: 'x'.repeat(MAX_HTTP_JSON_BYTES) }) });
  assert.deepEqual([tooBig.status, tooBig.json?.error?.code], [413, 'ERR_PAYLOAD_TOO_LARGE']);
  const depth = MAX_HTTP_JSON_BYTES / 2 - 10;
  for (const body of [
    '['.repeat(depth) + ']'.repeat(depth),
    '{"model":' + '{"a":'.repeat(2_000) + '1' + '}'.repeat(2_001),
    '{"model":"mlp","__proto__":{"polluted":true}}',
    '{"constructor":{"prototype":{"polluted":true}}}',
    '{"model":"mlp",',
    '{"learningRate":1e999}',
    'null',
  ]) {
    const res = await request('POST', `/api/rooms/${TRAIN_ROOM}/start`, { headers: json, body });
    assert.deepEqual([res.status, res.json?.error?.code], [400, 'ERR_BAD_REQUEST'], body.slice(0, 60));
  }
  // Without the teacher token nothing is even parsed.
  const anon = await request('POST', `/api/rooms/${TRAIN_ROOM}/start`, { headers: { 'content-type': 'application/json' }, body: '['.repeat(depth) });
  assert.equal(anon.status, 401);
  // A valid config against the running room changes nothing.
  const again = await request('POST', `/api/rooms/${TRAIN_ROOM}/start`, { headers: json, body: '{}' });
  assert.deepEqual([again.status, again.json?.error?.code], [409, 'ERR_BAD_STATE']);
  assert.equal(({} as Record<string, unknown>).polluted, undefined);
});

test('path traversal in room names, checkpoint ids and file names gets coded 4xx, in events and routes', async () => {
  const evil = [
    '../../etc/passwd', '..%2F..%2Fetc%2Fpasswd', '%2e%2e%2f%2e%2e%2fetc', '%252e%252e%252f', '..%5c..%5cwin.ini', '..\\..\\win.ini', '/etc/passwd', '%2Fetc%2Fpasswd',
    'room%00.json', '%00', '%EF%BC%8E%EF%BC%8E%EF%BC%8F', '..%E2%88%95..%E2%88%95', '%C0%AE%C0%AE%2F', '.', '..', '...', '~', 'room.json',
  ];
  const ckpt = pinned.id;
  const routes: Array<[string, string]> = [];
  for (const e of evil) {
    routes.push(['GET', `/api/rooms/${e}`], ['GET', `/api/rooms/${e}/checkpoints`], ['GET', `/api/rooms/${e}/checkpoints/latest/model.json`]);
    routes.push(['GET', `/api/rooms/${TRAIN_ROOM}/checkpoints/${e}/model.json`], ['GET', `/api/rooms/${TRAIN_ROOM}/checkpoints/${ckpt}/${e}`]);
    routes.push(['GET', `/api/rooms/${TRAIN_ROOM}/checkpoints/latest/${e}`], ['POST', `/api/rooms/${e}/checkpoints`], ['POST', `/api/rooms/${e}/stop`]);
  }
  for (const raw of ['/api/rooms/abuse-train/checkpoints/../../../../../etc/passwd', '/../../../../etc/passwd', '/data/../../../etc/passwd', '/api/../../etc/passwd', `/api/rooms/${TRAIN_ROOM}/checkpoints/${ckpt}/../room.json`]) {
    routes.push(['GET', raw]);
  }
  for (const [method, route] of routes) {
    const res = await request(method, route, method === 'POST' ? { headers: teacher, body: '' } : {});
    assert.ok(res.status >= 400 && res.status < 500, `${method} ${route}: ${res.status} ${res.body.slice(0, 100)}`);
    assert.ok(!res.body.includes('root:'), `${method} ${route} leaked a file`);
    if (route.startsWith('/api/') && res.json) assert.ok(res.json.error?.code?.startsWith('ERR_'), `${method} ${route}: ${res.body.slice(0, 100)}`);
  }
  // In events: a room name with a traversal never gets past the schema, nor the handshake.
  const member = await attackerIn(ATTACK_ROOM, IP.random);
  for (const room of evil.map(decodeURIComponentSafe)) {
    const res = await emitWithAck(member, 'room:join', { room, name: 'trav', kind: 'node', backend: 'cpu' });
    assert.ok(!res.ok && ['ERR_BAD_REQUEST', 'ERR_BAD_JOIN_CODE'].includes(res.error.code), `${room}: ${JSON.stringify(res)}`);
    const { refused } = await attacker(IP.random, { room, code: codeFor(ATTACK_ROOM) });
    assert.equal(refused?.code, 'ERR_BAD_JOIN_CODE');
  }
});

function decodeURIComponentSafe(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/** A checkpoint upload the store would accept for `room` (small, made up, self-consistent). */
function fakeCheckpoint(room: string, step: number, weightFloats = 4): Record<string, Buffer> {
  const weights = Buffer.from(new Float32Array(weightFloats).fill(0.25).buffer);
  const optimizerData = Buffer.alloc(0);
  const meta: CheckpointMetadata = {
    format: 1, room, run: 1, step, epoch: 0, dataCursor: { epoch: 0, offset: 0 }, worldSize: 1, members: [],
    config: startConfigSchema.parse({ optimizer: 'sgd' }), backend: 'cpu', createdAt: new Date().toISOString(),
    weightsSha256: sha256Hex(weights), optimizerSha256: sha256Hex(optimizerData),
    weightsHash: new WeightsHasher().update(new Float32Array(weights.buffer, weights.byteOffset, weightFloats)).digest(),
  };
  return {
    [CHECKPOINT_FILES.model]: Buffer.from(JSON.stringify({ modelTopology: { class_name: 'Sequential' }, format: 'layers-model', weightsManifest: [{ paths: ['./model.weights.bin'], weights: [{ name: 'w', shape: [4], dtype: 'float32' }] }] })),
    [CHECKPOINT_FILES.weights]: weights,
    [CHECKPOINT_FILES.optimizerSpecs]: Buffer.from(JSON.stringify({ optimizer: 'sgd', weightSpecs: [] })),
    [CHECKPOINT_FILES.optimizerData]: optimizerData,
    [CHECKPOINT_FILES.metadata]: Buffer.from(JSON.stringify(meta)),
  };
}

function multipart(files: Record<string, Buffer>, boundary = 'abuse-boundary-7'): { body: Buffer; type: string } {
  const parts: Buffer[] = [];
  for (const [name, bytes] of Object.entries(files)) {
    parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${name}"; filename="${name}"\r\nContent-Type: application/octet-stream\r\n\r\n`), bytes, Buffer.from('\r\n'));
  }
  parts.push(Buffer.from(`--${boundary}--\r\n`));
  return { body: Buffer.concat(parts), type: `multipart/form-data; boundary=${boundary}` };
}

function upload(room: string, token: string | null, files: Record<string, Buffer>, extra: { type?: string; body?: Buffer } = {}): Promise<HttpResult> {
  const form = multipart(files);
  const headers: Record<string, string> = { 'content-type': extra.type ?? form.type };
  if (token !== null) headers.authorization = `Bearer ${token}`;
  return request('POST', `/api/rooms/${encodeURIComponent(room)}/checkpoints`, { ip: IP.uploads, headers, body: extra.body ?? form.body });
}

test('forged chief uploads are refused, and no checkpoint lands but the real chiefs\'', async () => {
  const trainChief = (await roomStatus(TRAIN_ROOM)).chief!;
  const join = async (name: string) => {
    const socket = await attackerIn(FORGE_ROOM, IP.uploads);
    const res = (await emitWithAck(socket, 'room:join', { room: FORGE_ROOM, name, kind: 'node', backend: 'cpu' })) as AckResult<JoinAccepted>;
    assert.ok(res.ok, JSON.stringify(res));
    return { socket, ...res };
  };
  const mine = await join('forger-a');
  const other = await join('forger-b');
  assert.equal((await roomStatus(FORGE_ROOM)).chief, mine.memberId);
  const forged = fakeCheckpoint(TRAIN_ROOM, 999_999);

  const refusals: Array<[string, Promise<HttpResult>, number]> = [
    ['no token', upload(TRAIN_ROOM, null, forged), 403],
    ['a wrong token', upload(TRAIN_ROOM, 'f'.repeat(48), forged), 403],
    ['an empty bearer', upload(TRAIN_ROOM, '', forged), 403],
    ['the teacher token', upload(TRAIN_ROOM, TEST_TOKEN, forged), 403],
    ['another room\'s member token', upload(TRAIN_ROOM, mine.memberToken, forged), 403],
    ['another room\'s member token, other', upload(TRAIN_ROOM, other.memberToken, forged), 403],
    ['a non-chief member token', upload(FORGE_ROOM, other.memberToken, fakeCheckpoint(FORGE_ROOM, 5)), 403],
    ['a member id as token', upload(TRAIN_ROOM, trainChief, forged), 403],
  ];
  for (const [what, res, want] of refusals) {
    const r = await res;
    assert.equal(r.status, want, `${what}: ${r.body.slice(0, 200)}`);
    assert.equal(r.json?.error?.code, 'ERR_NOT_CHIEF', what);
  }

  // The forgers' own chief: everything malformed or mismatched is a 400 or 413, nothing stored.
  // Its room trains (run 1, as the forged metadata says): checkpoints are stored only during a run.
  const forgersRun = await fetch(`${server.url}/api/rooms/${FORGE_ROOM}/start`, {
    method: 'POST',
    headers: { ...teacher, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'mlp', optimizer: 'sgd', resumeFrom: 'none' }),
  });
  assert.equal(forgersRun.status, 200, await forgersRun.text());
  const chiefToken = mine.memberToken;
  {
    const listBefore = (await checkpoints(FORGE_ROOM)).map((c) => c.id);
    const good = fakeCheckpoint(FORGE_ROOM, 3);
    const tamper = (file: string, bytes: Buffer) => ({ ...good, [file]: bytes });
    const metaWith = (patch: Record<string, unknown>) => Buffer.from(JSON.stringify({ ...JSON.parse(good[CHECKPOINT_FILES.metadata]!.toString()), ...patch }));
    // One at a time: a room takes one upload at once (signaling-server/edge/upload-gate.ts).
    const bad: Array<[string, () => Promise<HttpResult>, number]> = [
      ['metadata for the training room', () => upload(FORGE_ROOM, chiefToken, fakeCheckpoint(TRAIN_ROOM, 3)), 400],
      ['into the training room', () => upload(TRAIN_ROOM, chiefToken, fakeCheckpoint(TRAIN_ROOM, 3)), 403],
      ['weights not matching their sha256', () => upload(FORGE_ROOM, chiefToken, tamper(CHECKPOINT_FILES.weights, Buffer.alloc(16, 1))), 400],
      ['weights shorter than the manifest', () => upload(FORGE_ROOM, chiefToken, fakeCheckpoint(FORGE_ROOM, 3, 3)), 400],
      ['weights longer than the manifest', () => upload(FORGE_ROOM, chiefToken, fakeCheckpoint(FORGE_ROOM, 3, 5)), 400],
      ['a manifest naming another file', () => upload(FORGE_ROOM, chiefToken, tamper(CHECKPOINT_FILES.model, Buffer.from(JSON.stringify({ modelTopology: {}, weightsManifest: [{ paths: ['../../../../etc/passwd'], weights: [{ name: 'w', shape: [4], dtype: 'float32' }] }] })))), 400],
      ['metadata that is not JSON', () => upload(FORGE_ROOM, chiefToken, tamper(CHECKPOINT_FILES.metadata, Buffer.from('{"format":1,'))), 400],
      ['metadata of a negative step', () => upload(FORGE_ROOM, chiefToken, tamper(CHECKPOINT_FILES.metadata, metaWith({ step: -1 }))), 400],
      ['metadata with a path for a room', () => upload(FORGE_ROOM, chiefToken, tamper(CHECKPOINT_FILES.metadata, metaWith({ room: '../../outside' }))), 400],
      ['a missing file', () => upload(FORGE_ROOM, chiefToken, Object.fromEntries(Object.entries(good).slice(1))), 400],
      ['an extra file field', () => upload(FORGE_ROOM, chiefToken, { ...good, '../../outside/evil.bin': Buffer.from('x') }), 400],
      ['a field that is not a file', () => request('POST', `/api/rooms/${FORGE_ROOM}/checkpoints`, { ip: IP.uploads, headers: { authorization: `Bearer ${chiefToken}`, 'content-type': 'multipart/form-data; boundary=b' }, body: Buffer.from('--b\r\nContent-Disposition: form-data; name="metadata.json"\r\n\r\n{}\r\n--b--\r\n') }), 400],
      ['a truncated multipart body', () => upload(FORGE_ROOM, chiefToken, good, { body: multipart(good).body.subarray(0, 300) }), 400],
      ['a multipart body with another boundary', () => upload(FORGE_ROOM, chiefToken, good, { type: 'multipart/form-data; boundary=nope' }), 400],
      ['multipart without a boundary', () => upload(FORGE_ROOM, chiefToken, good, { type: 'multipart/form-data' }), 400],
      ['JSON instead of multipart', () => upload(FORGE_ROOM, chiefToken, good, { type: 'application/json', body: Buffer.from('{}') }), 400],
      ['a file over the cap', () => upload(FORGE_ROOM, chiefToken, tamper(CHECKPOINT_FILES.optimizerData, Buffer.alloc(32 * 1024 * 1024 + 1))), 413],
    ];
    for (const [what, send, want] of bad) {
      const r = await send();
      assert.equal(r.status, want, `${what}: ${r.body.slice(0, 200)}`);
      assert.ok(r.json?.error?.code?.startsWith('ERR_') && r.json.error.code !== 'ERR_INTERNAL', `${what}: ${r.body.slice(0, 200)}`);
    }
    assert.deepEqual((await checkpoints(FORGE_ROOM)).map((c) => c.id), listBefore);

    // A stale chief: once it has left, its token writes nothing.
    const left = new Promise<void>((resolve) => mine.socket.once('disconnect', () => resolve()));
    mine.socket.disconnect();
    await left;
    await waitFor('the forgers\' second member to be chief', async () => (await roomStatus(FORGE_ROOM)).chief === other.memberId, 5_000);
    const stale = await upload(FORGE_ROOM, chiefToken, good);
    assert.deepEqual([stale.status, stale.json?.error?.code], [403, 'ERR_NOT_CHIEF']);
    assert.deepEqual((await checkpoints(FORGE_ROOM)).map((c) => c.id), listBefore);
  }
  // The training room's checkpoints are all its own chief's.
  const list = await checkpoints(TRAIN_ROOM);
  assert.ok(list.length > 0);
  for (const c of list) assert.equal(c.writer, trainBefore.chief, `checkpoint ${c.id} written by ${c.writer}`);
  assert.ok(list.every((c) => c.step < 999_999));
});

// ---------------------------------------------------------------------------
// What it proves
// ---------------------------------------------------------------------------
test('what it proves: the server is up, the other rooms are unaffected, the disk is intact, the class kept stepping', async () => {
  await proveUnharmed('abuse (http)', [TRAIN_ROOM, ATTACK_ROOM, QUIET_ROOM, FORGE_ROOM]);
});
