/**
 * A single server's rooms outlive it: room.json follows every membership and run change
 * without any handler saving it, and a restarted server gives the members their places
 * back for the reconnect grace, then drops whoever did not return.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { RunningServer } from '../../signaling-server/server';
import type { AckResult, JoinAccepted, RoomStatus } from '../../shared/protocol';
import type { RoomFile } from '../../signaling-server/rooms/room-codec';
import { AS_TEACHER, connectClient, join, nextEvent, startTestServer, TEST_TOKEN, type TestSocket } from '../support/server';

const ROOM = 'restart';
const GRACE_MS = 600;
/** How long a test waits for room.json to show a change (the write is queued after the change). */
const WRITE_WAIT_MS = 3_000;

async function status(server: RunningServer): Promise<RoomStatus> {
  return (await (await fetch(`${server.url}/api/rooms/${ROOM}`, AS_TEACHER)).json()) as RoomStatus;
}

function post(server: RunningServer, route: string, body: unknown = {}): Promise<Response> {
  return fetch(`${server.url}/api/rooms/${ROOM}/${route}`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${TEST_TOKEN}` }, body: JSON.stringify(body) });
}

/** Waits until room.json satisfies `ok`, and returns it. */
async function roomFileWhen(file: string, ok: (f: RoomFile) => boolean): Promise<RoomFile> {
  const deadline = Date.now() + WRITE_WAIT_MS;
  let last: unknown = null;
  while (Date.now() < deadline) {
    try {
      const parsed = JSON.parse(readFileSync(file, 'utf8')) as RoomFile;
      if (ok(parsed)) return parsed;
      last = parsed;
    } catch (err) {
      last = err; // not written yet, or caught mid-rename
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.fail(`room.json never got there; last seen: ${JSON.stringify(last)}`);
}

test('room.json follows membership and run changes by itself; after a restart members have the grace to come back', async () => {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'webring-restart-'));
  const file = path.join(dataDir, 'rooms', ROOM, 'room.json');
  const sockets: TestSocket[] = [];
  const first = await startTestServer({ dataDir, reconnectGraceMs: GRACE_MS });
  let second: RunningServer | null = null;
  try {
    const [a, b] = [await connectClient(first, ROOM), await connectClient(first, ROOM)];
    sockets.push(a, b);
    const alice = await join(a, ROOM, 'alice');
    await join(b, ROOM, 'bob');
    assert.ok(alice.ok);
    const joined = await roomFileWhen(file, (f) => f.active.length === 2);
    assert.equal(joined.generation, 2);

    const started = nextEvent(a, 'train:start');
    assert.equal((await post(first, 'start', { maxSteps: 50, resumeFrom: 'none' })).status, 200);
    await started;
    await roomFileWhen(file, (f) => f.state === 'training' && f.run === 1);
    assert.equal((await post(first, 'pause')).status, 200);
    await roomFileWhen(file, (f) => f.state === 'paused');

    // A crash leaves room.json as it was; a clean close would let everyone leave first.
    const crashed = readFileSync(file);
    for (const s of sockets) s.disconnect();
    await first.close();
    writeFileSync(file, crashed);

    second = await startTestServer({ dataDir, reconnectGraceMs: GRACE_MS });
    const restored = await status(second);
    assert.equal(restored.generation, 2);
    assert.equal(restored.state, 'paused');
    assert.deepEqual(restored.members.map((m) => [m.name, m.index, m.connected]), [['alice', 0, false], ['bob', 1, false]]);

    const back = await connectClient(second, ROOM);
    sockets.push(back);
    const rejoined = await new Promise<AckResult<JoinAccepted>>((resolve) =>
      back.emit('room:join', { room: ROOM, name: 'alice', kind: 'node', backend: 'cpu', rejoin: { memberId: alice.memberId, memberToken: alice.memberToken } }, resolve),
    );
    assert.ok(rejoined.ok && rejoined.index === 0, JSON.stringify(rejoined));

    const bobGone = await nextEvent(back, 'ring:generation', (g) => g.members.length === 1, GRACE_MS + WRITE_WAIT_MS);
    assert.equal(bobGone.generation, 3);
    assert.deepEqual(bobGone.members.map((m) => [m.name, m.rank]), [['alice', 0]]);
    await roomFileWhen(file, (f) => f.active.length === 1 && f.generation === 3);
  } finally {
    for (const s of sockets) s.disconnect();
    await second?.close();
  }
});
