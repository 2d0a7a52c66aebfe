/**
 * ICE config on the wire: the join and rejoin acks carry the member's own TURN credentials,
 * `ice:config` renews them for members only, and a bad TURN setting stops `npm start` with a
 * clear message before anything listens.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { RunningServer } from '../../signaling-server/server';
import { iceOptionsFromEnv, turnCredential, type IceOptions } from '../../signaling-server/edge/turn';
import { iceConfigSchema, type AckResult, type IceConfig } from '../../shared/protocol';
import { connectClient, join, startTestServer } from '../support/server';

const SECRET = 'server-test-turn-secret';
const TURN_URL = 'turn:127.0.0.1:3478?transport=udp,turns:turn.school.example:443?transport=tcp';

const start = (ice?: IceOptions): Promise<RunningServer> => startTestServer(ice ? { ice } : {});

const askIce = (socket: Awaited<ReturnType<typeof connectClient>>) =>
  new Promise<AckResult<{ ice: IceConfig }>>((resolve) => socket.emit('ice:config', resolve));

test('join and ice:config hand each member its own TURN credentials', async () => {
  const server = await start(iceOptionsFromEnv({ TURN_URL, TURN_SECRET: SECRET, TURN_TTL_S: '3600', ICE_TRANSPORT_POLICY: 'relay' }));
  const a = await connectClient(server);
  const b = await connectClient(server);
  try {
    // Not a member yet: no credentials for a bare socket.
    const early = await askIce(a);
    assert.equal(early.ok, false);
    assert.equal(!early.ok && early.error.code, 'ERR_NOT_IN_ROOM');

    const before = Math.floor(Date.now() / 1000);
    const ja = await join(a, 'ice-room', 'ada');
    const jb = await join(b, 'ice-room', 'bao');
    assert.ok(ja.ok && jb.ok);
    for (const j of [ja, jb]) {
      const ice = iceConfigSchema.parse(j.ice);
      assert.equal(ice.iceTransportPolicy, 'relay');
      const server0 = ice.iceServers[0]!;
      assert.deepEqual(server0.urls, TURN_URL.split(','));
      const [expiry, id] = server0.username!.split(':');
      assert.equal(id, j.memberId);
      assert.ok(Number(expiry) >= before + 3600 && Number(expiry) <= before + 3601, `expiry ${expiry}`);
      assert.equal(ice.expiresAt, Number(expiry) * 1000);
      // What coturn will recompute from its static-auth-secret.
      assert.equal(server0.credential, turnCredential(SECRET, server0.username!));
    }
    assert.notEqual(ja.ice.iceServers[0]!.credential, jb.ice.iceServers[0]!.credential);

    const renewed = await askIce(a);
    assert.ok(renewed.ok);
    assert.equal(renewed.ice.iceServers[0]!.username!.split(':')[1], ja.memberId);
    assert.ok(renewed.ice.expiresAt! >= ja.ice.expiresAt!);

    // A rejoin on a new connection (server restart, network blip) renews them too.
    const a2 = await connectClient(server, 'ice-room');
    try {
      const back = await new Promise<AckResult<{ memberId: string; ice: IceConfig }>>((resolve) =>
        a2.emit('room:join', { room: 'ice-room', name: 'ada', kind: 'node', backend: 'cpu', rejoin: { memberId: ja.memberId, memberToken: ja.memberToken } }, resolve),
      );
      assert.ok(back.ok);
      assert.equal(back.ice.iceServers[0]!.username!.split(':')[1], ja.memberId);
    } finally {
      a2.close();
    }
  } finally {
    a.close();
    b.close();
    await server.close();
  }
});

test('without TURN the join ack says so: no ICE servers, policy all', async () => {
  const server = await start();
  const a = await connectClient(server);
  try {
    const j = await join(a, 'plain-room', 'ada');
    assert.ok(j.ok);
    assert.deepEqual(j.ice, { iceServers: [], iceTransportPolicy: 'all', expiresAt: null });
  } finally {
    a.close();
    await server.close();
  }
});

test('npm start refuses a TURN_URL without TURN_SECRET, before it builds or listens', async () => {
  const root = path.resolve(import.meta.dirname, '../..');
  const result = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
    const child = execFile(
      process.execPath,
      ['--import', 'tsx', 'signaling-server/main.ts'],
      {
        cwd: root,
        env: { ...process.env, PORT: '0', HTTPS_PORT: '0', DATA_DIR: mkdtempSync(path.join(os.tmpdir(), 'webring-ice-main-')), TURN_URL: 'turn:127.0.0.1:3478', TURN_SECRET: '' },
        timeout: 30_000,
      },
      (_err, _stdout, stderr) => resolve({ code: child.exitCode, stderr }),
    );
  });
  assert.equal(result.code, 2, result.stderr);
  assert.match(result.stderr, /ERR_TURN_CONFIG: TURN_URL is set but TURN_SECRET is not/);
});
