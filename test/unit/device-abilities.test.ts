/**
 * client/device-abilities.ts: what the student page says a browser can and cannot do before
 * Join. The scopes here stand in for engines that lack an API (WebKitGTK has no
 * RTCPeerConnection; plain http hides crypto.subtle); test/e2e/missing-apis.spec.ts takes the
 * APIs away from real Chromium tabs and trains with them.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { checkSecureKeys, detectAbilities, hasWebRtc, type AbilityScope } from '../../client/device-abilities';

/** Node's own WebCrypto, WebAssembly and a stand-in for the rest: a browser with everything. */
const full: AbilityScope = {
  RTCPeerConnection: class {},
  crypto: globalThis.crypto,
  indexedDB: {},
  Worker: class {},
  WebAssembly: globalThis.WebAssembly,
  navigator: { gpu: {} },
  isSecureContext: true,
};

test('a browser with every API is told it can do everything, and ECDH P-256 keys are really made', async () => {
  const { abilities, secureKeysWhy } = await detectAbilities(full);
  assert.deepEqual(abilities.filter((a) => !a.ok), []);
  assert.equal(secureKeysWhy, null);
  assert.deepEqual(abilities.map((a) => a.key), ['webrtc', 'secureKeys', 'indexedDb', 'workers', 'webAssembly', 'webGpu']);
});

test('without RTCPeerConnection the device relays; without crypto.subtle it sits out secure runs, and says why', async () => {
  const { RTCPeerConnection: _rtc, crypto: _crypto, ...rest } = full;
  const scope: AbilityScope = { ...rest, isSecureContext: false };
  assert.equal(hasWebRtc(scope), false);
  const { abilities, secureKeysWhy } = await detectAbilities(scope);
  const byKey = Object.fromEntries(abilities.map((a) => [a.key, a]));
  assert.equal(byKey.webrtc!.ok, false);
  assert.match(byKey.webrtc!.text, /goes through the teacher’s computer/);
  assert.equal(byKey.secureKeys!.ok, false);
  assert.match(secureKeysWhy ?? '', /not secure/);
  assert.equal(byKey.webGpu!.ok, true);
});

test('an engine that lists crypto.subtle but refuses the P-256 curve cannot make secure keys, and the refusal is kept', async () => {
  const refusing: AbilityScope = {
    ...full,
    crypto: { subtle: { generateKey: () => Promise.reject(new DOMException('curve not supported', 'NotSupportedError')) } as Pick<SubtleCrypto, 'generateKey'> },
  };
  const keys = await checkSecureKeys(refusing);
  assert.equal(keys.ok, false);
  assert.match(keys.why ?? '', /curve not supported/);
});

test('no IndexedDB, no Worker, no WebAssembly, no WebGPU: each is said in plain words', async () => {
  const scope: AbilityScope = { RTCPeerConnection: full.RTCPeerConnection, crypto: full.crypto, navigator: {} };
  const { abilities } = await detectAbilities(scope);
  assert.deepEqual(abilities.filter((a) => !a.ok).map((a) => a.key), ['indexedDb', 'workers', 'webAssembly', 'webGpu']);
  for (const a of abilities) assert.ok(a.text.length > 20 && !/undefined|null/.test(a.text), a.text);
});
