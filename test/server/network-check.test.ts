/**
 * The teacher's network check through the real server: only the teacher starts one, for a
 * room that exists; every member hears room:network-check; each may download and upload the
 * bandwidth probe once per check, with its member token, while the check is open; each
 * answers once, for the current check only. Refusals are coded and change nothing; the
 * answers show in the room API's `network`. With real tabs: test/e2e/network-check.spec.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { AS_TEACHER, join, nextEvent, useTestServer, type TestSocket } from '../support/server';
import { NETWORK_PROBE_BYTES, type AckResult, type JoinAccepted } from '../../shared/protocol';

const t = useTestServer();

const report = (check: number, peer: string) => ({ check, serverRttMs: 2.5, downMBps: 80, upMBps: 40, links: [{ peer, path: 'relay' }] });

function nextServerError(socket: TestSocket): Promise<string> {
  return new Promise((resolve) => socket.once('server:error', (e) => resolve(e.code)));
}

test('a network check: the teacher starts it, every member hears it, probes once each way and answers once; the rest is refused with a code', async () => {
  const room = 'net-check';
  const a = await t.client(room);
  const b = await t.client(room);
  const ja = (await join(a, room, 'ann')) as AckResult<JoinAccepted> & { ok: true };
  const jb = (await join(b, room, 'bo')) as AckResult<JoinAccepted> & { ok: true };
  const url = (path: string) => `${t.server.url}/api/rooms/${room}${path}`;

  // Only the teacher, and only for a room that exists.
  assert.equal((await fetch(url('/network-check'), { method: 'POST' })).status, 401);
  assert.equal((await fetch(`${t.server.url}/api/rooms/no-such-room/network-check`, { method: 'POST', ...AS_TEACHER })).status, 404);
  const heard = [nextEvent(a, 'room:network-check'), nextEvent(b, 'room:network-check')];
  const started = await fetch(url('/network-check'), { method: 'POST', ...AS_TEACHER });
  assert.equal(started.status, 200);
  const { check } = (await started.json()) as { check: number };
  for (const h of await Promise.all(heard)) assert.deepEqual(h, { check });

  // The probe: once down and once up per member and check, with its token.
  const asAnn = { authorization: `Bearer ${ja.memberToken}` };
  const down = await fetch(url(`/network-probe?check=${check}`), { headers: asAnn });
  assert.equal(down.status, 200);
  assert.equal((await down.arrayBuffer()).byteLength, NETWORK_PROBE_BYTES);
  assert.equal((await fetch(url(`/network-probe?check=${check}`), { headers: asAnn })).status, 429, 'a second download');
  assert.equal((await fetch(url(`/network-probe?check=${check}`), { method: 'POST', headers: asAnn, body: new Uint8Array(1024) })).status, 204);
  assert.equal((await fetch(url(`/network-probe?check=${check}`), { method: 'POST', headers: asAnn, body: new Uint8Array(1024) })).status, 429, 'a second upload');
  assert.equal((await fetch(url(`/network-probe?check=${check}`), { method: 'POST', headers: { authorization: `Bearer ${jb.memberToken}` }, body: new Uint8Array(NETWORK_PROBE_BYTES + 1) })).status, 413, 'too large');
  assert.equal((await fetch(url(`/network-probe?check=${check + 1}`), { headers: { authorization: `Bearer ${jb.memberToken}` } })).status, 409, 'another check');
  assert.equal((await fetch(url(`/network-probe?check=${check}`))).status, 401, 'no reader');

  // The answers: once each, for this check, well-formed.
  a.emit('worker:network', report(check, jb.memberId) as never);
  const wrongCheck = nextServerError(b);
  b.emit('worker:network', report(check + 7, ja.memberId) as never);
  assert.equal(await wrongCheck, 'ERR_STALE_RUN');
  const malformed = nextServerError(b);
  b.emit('worker:network', { ...report(check, ja.memberId), serverRttMs: -1 } as never);
  assert.equal(await malformed, 'ERR_BAD_REQUEST');
  const twice = nextServerError(a);
  a.emit('worker:network', report(check, jb.memberId) as never);
  assert.equal(await twice, 'ERR_BAD_REQUEST');
  const status = await t.status(room);
  assert.equal(status.network?.check, check);
  assert.deepEqual(status.network?.reports, [{ ...report(check, jb.memberId), member: ja.memberId }]);
});
