/**
 * HTTPS on the LAN: the certificate (made once, kept in DATA_DIR, or the teacher's own), the
 * https server sharing the app and socket.io with the http one, and GET /api/info.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, promises as fs } from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { generate } from 'selfsigned';
import { io as connect } from 'socket.io-client';
import { startServer } from '../../signaling-server/server';
import { createLogger } from '../../signaling-server/logger';
import { CERT_RENEW_BEFORE_MS, defaultCertificateNames, lanAddresses, loadTlsCredentials, TlsError } from '../../signaling-server/edge/tls';
import { CERTIFICATE_FINGERPRINT_BYTES, type AckResult, type JoinAccepted, type ServerInfo } from '../../shared/protocol';
import { AS_TEACHER, codeFor, connectClient, join, TEST_JOIN_SECRET, TEST_TOKEN, type TestSocket } from '../support/server';

const tmp = () => mkdtempSync(path.join(os.tmpdir(), 'webring-tls-'));
const NAMES = defaultCertificateNames('classroom-laptop', ['192.0.2.7', 'fd00::7']);

async function rejectsWith(promise: Promise<unknown>, code: string, mentions: string): Promise<void> {
  await assert.rejects(promise, (err: unknown) => {
    assert.ok(err instanceof TlsError, `a TlsError, got ${String(err)}`);
    assert.equal(err.code, code);
    assert.ok(err.message.includes(mentions), `${JSON.stringify(err.message)} mentions ${mentions}`);
    return true;
  });
}

test('a self-signed certificate is made on first start, kept in DATA_DIR/tls and reused', async () => {
  const dataDir = tmp();
  const first = await loadTlsCredentials({ dataDir, names: NAMES });
  assert.equal(first.source, 'generated');
  assert.equal(first.reason, 'first start');
  assert.equal(first.certPath, path.join(dataDir, 'tls', 'cert.pem'));
  assert.equal(await fs.readFile(first.certPath, 'utf8'), first.cert);
  assert.equal(await fs.readFile(first.keyPath, 'utf8'), first.key);
  assert.equal((await fs.stat(first.keyPath)).mode & 0o777, 0o600);
  assert.deepEqual((await fs.readdir(path.join(dataDir, 'tls'))).sort(), ['cert.pem', 'key.pem'], 'no temp files left');

  const second = await loadTlsCredentials({ dataDir, names: NAMES });
  assert.equal(second.source, 'reused');
  assert.equal(second.cert, first.cert);
  assert.equal(second.fingerprint256, first.fingerprint256);
});

test('the certificate covers localhost, the host name and every LAN address', async () => {
  const { cert } = await loadTlsCredentials({ dataDir: tmp(), names: NAMES });
  const x509 = new X509Certificate(cert);
  for (const ip of ['127.0.0.1', '::1', '192.0.2.7', 'fd00::7']) assert.equal(x509.checkIP(ip), ip, `covers ${ip}`);
  for (const host of ['localhost', 'classroom-laptop', 'classroom-laptop.local']) assert.equal(x509.checkHost(host), host, `covers ${host}`);
  assert.match(x509.subjectAltName ?? '', /IP Address:192\.0\.2\.7/);
  assert.equal(x509.checkIP('192.0.2.8'), undefined);
  assert.ok(new Date(x509.validFrom).getTime() < Date.now(), 'valid already for laptops whose clock is behind');

  // The default names are this machine's: every non-internal address it has.
  const names = defaultCertificateNames();
  for (const address of lanAddresses()) assert.ok(names.ips.includes(address), `default names include ${address}`);
  assert.deepEqual(
    lanAddresses({ lo: [{ address: '127.0.0.1', family: 'IPv4', internal: true, netmask: '', mac: '', cidr: null }], eth0: [
      { address: 'fe80::1', family: 'IPv6', internal: false, netmask: '', mac: '', cidr: null, scopeid: 2 },
      { address: '10.1.2.3', family: 'IPv4', internal: false, netmask: '', mac: '', cidr: null },
    ] }),
    ['10.1.2.3', 'fe80::1'],
    'IPv4 first, loopback left out',
  );
});

test('a new certificate is made when the LAN addresses changed, or it ends soon', async () => {
  const dataDir = tmp();
  const first = await loadTlsCredentials({ dataDir, names: NAMES });
  const movedNames = { dns: NAMES.dns, ips: [...NAMES.ips, '198.51.100.4'] };
  const moved = await loadTlsCredentials({ dataDir, names: movedNames });
  assert.equal(moved.source, 'generated');
  assert.match(moved.reason ?? '', /198\.51\.100\.4/);
  assert.notEqual(moved.cert, first.cert);
  assert.equal(new X509Certificate(moved.cert).checkIP('198.51.100.4'), '198.51.100.4');

  const nearEnd = new Date(moved.validTo.getTime() - CERT_RENEW_BEFORE_MS / 2);
  const renewed = await loadTlsCredentials({ dataDir, names: movedNames, now: nearEnd });
  assert.equal(renewed.source, 'generated');
  assert.ok(renewed.validTo > moved.validTo);
});

test('a kept key that does not match its certificate is replaced, not served', async () => {
  const dataDir = tmp();
  const first = await loadTlsCredentials({ dataDir, names: NAMES });
  const other = await generate([{ name: 'commonName', value: 'other' }], { keyType: 'ec', algorithm: 'sha256' });
  await fs.writeFile(first.keyPath, other.private);
  const next = await loadTlsCredentials({ dataDir, names: NAMES });
  assert.equal(next.source, 'generated');
  assert.match(next.reason ?? '', /is not the key of/);
});

test('TLS_CERT and TLS_KEY are used as given, and nothing is generated', async () => {
  const dir = tmp();
  const own = await generate([{ name: 'commonName', value: 'school.example' }], { keyType: 'ec', algorithm: 'sha256' });
  const certPath = path.join(dir, 'own-cert.pem');
  const keyPath = path.join(dir, 'own-key.pem');
  await fs.writeFile(certPath, own.cert);
  await fs.writeFile(keyPath, own.private);
  const dataDir = tmp();
  const tls = await loadTlsCredentials({ dataDir, certPath, keyPath, names: NAMES });
  assert.equal(tls.source, 'files');
  assert.equal(tls.cert, own.cert);
  assert.equal(tls.key, own.private);
  assert.equal(tls.certPath, certPath);
  await assert.rejects(fs.stat(path.join(dataDir, 'tls')), { code: 'ENOENT' });
});

test('a bad TLS_CERT or TLS_KEY is a clear, coded start-up error', async () => {
  const dir = tmp();
  const dataDir = tmp();
  const own = await generate([{ name: 'commonName', value: 'school.example' }], { keyType: 'ec', algorithm: 'sha256' });
  const other = await generate([{ name: 'commonName', value: 'other' }], { keyType: 'ec', algorithm: 'sha256' });
  const certPath = path.join(dir, 'cert.pem');
  const wrongKey = path.join(dir, 'wrong-key.pem');
  const notPem = path.join(dir, 'notes.txt');
  await fs.writeFile(certPath, own.cert);
  await fs.writeFile(wrongKey, other.private);
  await fs.writeFile(notPem, 'hello');
  const missing = path.join(dir, 'no-such-cert.pem');

  await rejectsWith(loadTlsCredentials({ dataDir, certPath: missing, keyPath: wrongKey }), 'ERR_TLS_UNREADABLE', `TLS_CERT=${missing}`);
  await rejectsWith(loadTlsCredentials({ dataDir, certPath, keyPath: missing }), 'ERR_TLS_UNREADABLE', `TLS_KEY=${missing}`);
  await rejectsWith(loadTlsCredentials({ dataDir, certPath }), 'ERR_TLS_CONFIG', 'TLS_KEY');
  await rejectsWith(loadTlsCredentials({ dataDir, certPath: notPem, keyPath: wrongKey }), 'ERR_TLS_INVALID', 'not a PEM certificate');
  await rejectsWith(loadTlsCredentials({ dataDir, certPath, keyPath: notPem }), 'ERR_TLS_INVALID', 'not an unencrypted PEM private key');
  await rejectsWith(loadTlsCredentials({ dataDir, certPath, keyPath: wrongKey }), 'ERR_TLS_INVALID', 'is not the key of');
});

test('https and http serve the same app and socket.io; /api/info lists https URLs first', async () => {
  const dataDir = tmp();
  const tls = await loadTlsCredentials({ dataDir, names: NAMES });
  const server = await startServer({
    port: 0,
    host: '127.0.0.1',
    dataDir,
    teacherToken: TEST_TOKEN,
    joinSecret: TEST_JOIN_SECRET,
    clientDir: path.join(os.tmpdir(), 'webring-no-client'),
    log: createLogger(process.env.LOG_LEVEL ?? 'silent'),
    defaultRoom: 'class',
    https: { port: 0, cert: tls.cert, key: tls.key },
  });
  const sockets: TestSocket[] = [];
  try {
    assert.ok(server.httpsPort && server.httpsPort !== server.port);
    const httpsOrigin = `https://127.0.0.1:${server.httpsPort}`;
    // The self-signed certificate is its own trust anchor, as the student's "Proceed" makes it.
    const viaHttps = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      https
        .get(`${httpsOrigin}/api/info`, { ca: tls.cert }, (res) => {
          let body = '';
          res.on('data', (chunk: Buffer) => (body += chunk.toString()));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        })
        .on('error', reject);
    });
    assert.equal(viaHttps.status, 200);
    const info = JSON.parse(viaHttps.body) as ServerInfo;
    assert.deepEqual(info, (await (await fetch(`${server.url}/api/info`)).json()) as ServerInfo);
    assert.deepEqual(info, {
      defaultRoom: 'class',
      defaultTask: 'mnist',
      httpPort: server.port,
      httpsPort: server.httpsPort,
      // The start of the served certificate's fingerprint, for students to compare before they click through.
      certificateFingerprint: new X509Certificate(tls.cert).fingerprint256.split(':').slice(0, CERTIFICATE_FINGERPRINT_BYTES).join(':'),
      studentUrls: [`${httpsOrigin}/?room=class`, `http://127.0.0.1:${server.port}/?room=class`],
      localUrl: `http://localhost:${server.port}/?room=class`,
    });
    // The public info never carries a join code; the teacher's join info does, in every link.
    const code = codeFor('class');
    assert.ok(!JSON.stringify(info).includes(code));
    assert.equal((await fetch(`${server.url}/api/rooms/class/join`)).status, 401);
    const joinInfo = await (await fetch(`${server.url}/api/rooms/class/join`, { headers: { authorization: `Bearer ${TEST_TOKEN}` } })).json();
    assert.deepEqual(joinInfo, {
      room: 'class',
      code,
      studentUrls: [`${httpsOrigin}/?room=class&code=${code}`, `http://127.0.0.1:${server.port}/?room=class&code=${code}`],
      localUrl: `http://localhost:${server.port}/?room=class&code=${code}`,
    });

    // One tab over https, one over http, one room: the same socket.io server. The join code
    // typed in lower case and without its dash still opens the room.
    const typed = code.toLowerCase().replace('-', '');
    const secure: TestSocket = connect(httpsOrigin, { transports: ['websocket'], forceNew: true, reconnection: false, ca: tls.cert, auth: { room: 'class', code: typed } });
    sockets.push(secure);
    await new Promise<void>((resolve, reject) => {
      secure.once('connect', () => resolve());
      secure.once('connect_error', reject);
    });
    const plain = await connectClient(server, 'class');
    sockets.push(plain);
    const a: AckResult<JoinAccepted> = await new Promise((resolve) => secure.emit('room:join', { room: 'class', name: 'over-https', kind: 'node', backend: 'cpu' }, resolve));
    const b: AckResult<JoinAccepted> = await join(plain, 'class', 'over-http');
    assert.ok(a.ok && b.ok);
    assert.equal(a.room, 'class');
    const status = (await (await fetch(`${server.url}/api/rooms/class`, AS_TEACHER)).json()) as { room: string; members: Array<{ name: string }> };
    assert.equal(status.room, 'class');
    assert.deepEqual(status.members.map((m) => m.name), ['over-https', 'over-http']);
  } finally {
    for (const s of sockets) s.disconnect();
    await server.close();
  }
});
