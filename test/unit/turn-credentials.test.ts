/**
 * TURN credentials in coturn's use-auth-secret scheme (signaling-server/edge/turn.ts), the env
 * checks that refuse a bad TURN setting at start-up, and the worker's IceConfigHolder.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import {
  DEFAULT_TURN_TTL_S,
  iceConfigFor,
  iceOptionsFromEnv,
  MAX_TURN_TTL_S,
  restCredentials,
  turnCredential,
  TurnConfigError,
} from '../../signaling-server/edge/turn';
import { ICE_REFRESH_MARGIN_MS, IceConfigHolder } from '../../shared/network/ice-config';
import { iceConfigSchema, type AckResult, type IceConfig } from '../../shared/protocol';
import { WebringError } from '../../shared/protocol/errors';

const SECRET = 'north-wing-secret-2024';
const URL_UDP = 'turn:turn.school.example:3478?transport=udp';
const URL_TLS = 'turns:turn.school.example:443?transport=tcp';

test('the credential matches a vector computed outside node (openssl dgst -sha1 -hmac)', () => {
  // printf '%s' '1700003600:abcd1234' | openssl dgst -sha1 -hmac 'north-wing-secret-2024' -binary | base64
  assert.equal(turnCredential(SECRET, '1700003600:abcd1234'), 'z7OCeG6OFI3Ogd/WiTQAxyNkRVQ=');
});

test('username is "<unix expiry>:<id>", expiring ttl seconds from now, signed with the secret', () => {
  const nowMs = 1_700_000_000_500; // half a second past a whole second: expiry counts whole seconds
  const c = restCredentials(SECRET, 3600, 'abcd1234', nowMs);
  assert.equal(c.username, '1700003600:abcd1234');
  assert.equal(c.expiresAtS, 1_700_003_600);
  assert.equal(c.credential, createHmac('sha1', SECRET).update(c.username).digest('base64'));
  assert.notEqual(c.credential, turnCredential('another-secret-of-length', c.username));
});

test('iceConfigFor gives each member its own credentials, in the wire schema', () => {
  const options = iceOptionsFromEnv({ TURN_URL: `${URL_UDP}, ${URL_TLS}`, TURN_SECRET: SECRET });
  const now = 1_700_000_000_000;
  const a = iceConfigFor(options, 'membera1', now);
  const b = iceConfigFor(options, 'memberb2', now);
  assert.deepEqual(iceConfigSchema.parse(a), a);
  assert.equal(a.iceTransportPolicy, 'all');
  assert.equal(a.expiresAt, now + DEFAULT_TURN_TTL_S * 1000);
  assert.deepEqual(a.iceServers[0]!.urls, [URL_UDP, URL_TLS]);
  assert.equal(a.iceServers[0]!.username, `${now / 1000 + DEFAULT_TURN_TTL_S}:membera1`);
  assert.notEqual(a.iceServers[0]!.credential, b.iceServers[0]!.credential);
  // Later is fresher: a refresh moves the expiry.
  const later = iceConfigFor(options, 'membera1', now + 60_000);
  assert.equal(later.expiresAt! - a.expiresAt!, 60_000);
});

test('without TURN_URL the config is as before: no ICE servers, no expiry', () => {
  const options = iceOptionsFromEnv({});
  assert.deepEqual(options, { turn: null, policy: 'all' });
  assert.deepEqual(iceConfigFor(options, 'membera1'), { iceServers: [], iceTransportPolicy: 'all', expiresAt: null });
});

test('TURN_TTL_S and ICE_TRANSPORT_POLICY=relay are read', () => {
  const options = iceOptionsFromEnv({ TURN_URL: URL_TLS, TURN_SECRET: SECRET, TURN_TTL_S: '900', ICE_TRANSPORT_POLICY: 'relay' });
  assert.deepEqual(options, { turn: { urls: [URL_TLS], secret: SECRET, ttlS: 900 }, policy: 'relay' });
  assert.equal(iceConfigFor(options, 'membera1', 0).iceTransportPolicy, 'relay');
});

test('bad TURN settings are refused with ERR_TURN_CONFIG and a message naming the variable', () => {
  const cases: Array<[Record<string, string>, string]> = [
    [{ TURN_URL: URL_UDP }, 'TURN_SECRET is not'],
    [{ TURN_SECRET: SECRET }, 'TURN_URL is not'],
    [{ TURN_URL: URL_UDP, TURN_SECRET: 'short' }, 'at least 16'],
    [{ TURN_URL: 'http://turn.school.example', TURN_SECRET: SECRET }, 'not a turn: or turns: URI'],
    [{ TURN_URL: 'stun:turn.school.example:3478', TURN_SECRET: SECRET }, 'not a turn: or turns: URI'],
    [{ TURN_URL: 'turn:host:3478?transport=sctp', TURN_SECRET: SECRET }, 'not a turn: or turns: URI'],
    [{ TURN_URL: `${URL_UDP},`, TURN_SECRET: SECRET }, 'not a turn: or turns: URI'],
    [{ TURN_URL: 'turn:host:70000', TURN_SECRET: SECRET }, 'out of range'],
    [{ TURN_URL: URL_UDP, TURN_SECRET: SECRET, TURN_TTL_S: '10' }, 'TURN_TTL_S'],
    [{ TURN_URL: URL_UDP, TURN_SECRET: SECRET, TURN_TTL_S: String(MAX_TURN_TTL_S + 1) }, 'TURN_TTL_S'],
    [{ TURN_URL: URL_UDP, TURN_SECRET: SECRET, TURN_TTL_S: '1h' }, 'TURN_TTL_S'],
    [{ TURN_URL: URL_UDP, TURN_SECRET: SECRET, ICE_TRANSPORT_POLICY: 'none' }, 'ICE_TRANSPORT_POLICY'],
    [{ ICE_TRANSPORT_POLICY: 'relay' }, 'needs a TURN server'],
  ];
  for (const [env, mentions] of cases) {
    assert.throws(
      () => iceOptionsFromEnv(env),
      (err: unknown) => err instanceof TurnConfigError && err.code === 'ERR_TURN_CONFIG' && err.message.includes(mentions),
      `${JSON.stringify(env)} is refused, mentioning ${mentions}`,
    );
  }
  // IPv6 literals and bare hosts are fine.
  assert.deepEqual(iceOptionsFromEnv({ TURN_URL: 'turn:[fd00::7]:3478,turns:turn.school.example', TURN_SECRET: SECRET }).turn?.urls, [
    'turn:[fd00::7]:3478',
    'turns:turn.school.example',
  ]);
});

function holderWith(now: { ms: number }, answers: Array<AckResult<{ ice: IceConfig }> | Error>) {
  const logs: string[] = [];
  let requests = 0;
  const holder = new IceConfigHolder({
    request: async () => {
      requests += 1;
      const next = answers.shift();
      if (!next) throw new Error('no answer left');
      if (next instanceof Error) throw next;
      return next;
    },
    log: (m) => logs.push(m),
    now: () => now.ms,
  });
  return { holder, logs, requests: () => requests };
}

const configUntil = (expiresAt: number, policy: 'all' | 'relay' = 'relay'): IceConfig => ({
  iceServers: [{ urls: [URL_UDP], username: `${expiresAt / 1000}:membera1`, credential: 'c2lnbmVk' }],
  iceTransportPolicy: policy,
  expiresAt,
});

test('IceConfigHolder: direct until told otherwise, then dials with the server config', () => {
  const { holder, requests } = holderWith({ ms: 0 }, []);
  assert.deepEqual(holder.rtcConfiguration(), { iceServers: [], iceTransportPolicy: 'all' });
  holder.update(configUntil(10 * 3600_000));
  assert.deepEqual(holder.rtcConfiguration(), { iceServers: configUntil(10 * 3600_000).iceServers, iceTransportPolicy: 'relay' });
  assert.equal(requests(), 0, 'no refresh while far from expiry');
});

test('IceConfigHolder: refuses a malformed config at the edge', () => {
  const { holder } = holderWith({ ms: 0 }, []);
  assert.throws(
    () => holder.update({ iceServers: [{ urls: ['http://evil.example'] }], iceTransportPolicy: 'relay', expiresAt: null }),
    (err: unknown) => err instanceof WebringError && err.code === 'ERR_BAD_REQUEST',
  );
  assert.deepEqual(holder.rtcConfiguration().iceServers, [], 'the old config stays');
});

test('IceConfigHolder: renews once when a dial finds the credentials close to expiry', async () => {
  const now = { ms: 0 };
  const first = configUntil(ICE_REFRESH_MARGIN_MS + 60_000);
  const fresh = configUntil(6 * 3600_000);
  const { holder, requests, logs } = holderWith(now, [{ ok: true, ice: fresh }]);
  holder.update(first);
  holder.rtcConfiguration();
  assert.equal(requests(), 0);
  now.ms = 120_000; // inside the margin now
  const dialled = holder.rtcConfiguration();
  holder.rtcConfiguration(); // a second dial meanwhile does not ask again
  assert.equal(requests(), 1);
  // The dial in flight uses the still-valid old credentials; the next one gets the new ones.
  assert.equal(dialled.iceServers![0]!.username, first.iceServers[0]!.username);
  await holder.refresh();
  assert.equal(holder.current.expiresAt, fresh.expiresAt);
  assert.match(logs.join('\n'), /renewed/);
});

test('IceConfigHolder: a failed renewal is logged with its code and the old config stays', async () => {
  const now = { ms: 0 };
  const first = configUntil(60_000);
  const { holder, logs } = holderWith(now, [{ ok: false, error: { code: 'ERR_RATE_LIMITED', message: 'slow down' } }, new Error('timeout')]);
  holder.update(first);
  await holder.refresh();
  assert.match(logs[0]!, /ERR_RATE_LIMITED/);
  await holder.refresh();
  assert.match(logs[1]!, /ERR_INTERNAL: timeout/);
  assert.deepEqual(holder.current, first);
});
