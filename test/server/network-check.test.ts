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

test('a check may name the form\'s model: every member hears it, answers with its time for it and each link\'s figures; an unknown model is refused', async () => {
  const room = 'net-check-model';
  const a = await t.client(room);
  const ja = (await join(a, room, 'ann')) as AckResult<JoinAccepted> & { ok: true };
  const url = `${t.server.url}/api/rooms/${room}/network-check`;
  const post = (body: unknown) => fetch(url, { method: 'POST', headers: { ...AS_TEACHER.headers, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  for (const bad of [{ workload: { task: 'mnist', model: 'no-such-model' } }, { workload: { task: 'no-such-task', model: 'cnn' } }, { workload: { task: 'mnist' } }, { model: 'cnn' }]) {
    const res = await post(bad);
    assert.equal(res.status, 400, JSON.stringify(bad));
    assert.equal(((await res.json()) as { error: { code: string } }).error.code, 'ERR_BAD_REQUEST');
  }
  assert.equal((await t.status(room)).network, null, 'a refused check starts nothing');
  const heard = nextEvent(a, 'room:network-check');
  const started = await post({ workload: { task: 'mnist', model: 'cnn' } });
  assert.equal(started.status, 200);
  const { check } = (await started.json()) as { check: number };
  assert.deepEqual(await heard, { check, workload: { task: 'mnist', model: 'cnn' } });
  const answer = { ...report(check, 'hub'), links: [{ peer: 'b'.repeat(16), path: 'direct', rttMs: 4.5, MBps: 12 }], probe: { device: 'laptop', task: 'mnist', model: 'cnn', msPerExample: 3.5 } };
  const refused = nextServerError(a);
  a.emit('worker:network', { ...answer, links: [{ ...answer.links[0], MBps: -1 }] } as never);
  assert.equal(await refused, 'ERR_BAD_REQUEST', 'a link figure out of bounds');
  a.emit('worker:network', answer as never);
  const status = await t.status(room);
  assert.deepEqual(status.network?.reports, [{ ...answer, member: ja.memberId }]);
});
