/**
 * The PeerFactory over the standard RTCPeerConnection (shared/network/rtc-peer.ts), on real
 * WebRTC in this process (@roamhq/wrtc, as the Node worker runs it): two peers handshake
 * through relayed signals, even when candidates overtake the offer; messages arrive whole, in
 * order and exactly the bytes of the view sent; a bad signal fails the link with a code;
 * destroying one end closes the other. (Tabs over the browser's RTCPeerConnection: every E2E.)
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { WRTC_PACKAGE, createWrtcPeerFactory } from '../../shared/network/wrtc-peer-factory';
import type { PeerEvents, PeerHandle } from '../../shared/network/peer';
import { WebringError, type ErrorCode } from '../../shared/protocol/errors';

const factory = await createWrtcPeerFactory(() => ({ iceServers: [] }));
const WAIT_MS = 15_000;

/** One end: its handle, what it heard, and promises for its events. */
interface End {
  handle: PeerHandle;
  signals: Array<Record<string, unknown>>;
  received: Uint8Array[];
  errors: Array<{ code: ErrorCode; message: string }>;
  connected: Promise<void>;
  closed: Promise<void>;
  /** Resolves once `n` messages have arrived. */
  messages(n: number): Promise<void>;
}

function end(initiator: boolean, onSignal: (data: Record<string, unknown>) => void = () => {}): End {
  let connect!: () => void;
  let close!: () => void;
  const waiters: Array<{ n: number; resolve: () => void }> = [];
  const e: Partial<End> = { signals: [], received: [], errors: [] };
  e.connected = new Promise((r) => (connect = r));
  e.closed = new Promise((r) => (close = r));
  const events: PeerEvents = {
    onSignal: (data) => {
      e.signals!.push(data);
      onSignal(data);
    },
    onConnect: () => connect(),
    onData: (bytes) => {
      e.received!.push(bytes.slice());
      for (const w of waiters) if (e.received!.length >= w.n) w.resolve();
    },
    onDrain: () => {},
    onClose: () => close(),
    onError: (code, message) => e.errors!.push({ code, message }),
  };
  e.messages = (n) => (e.received!.length >= n ? Promise.resolve() : new Promise((resolve) => waiters.push({ n, resolve })));
  e.handle = factory({ initiator }, events);
  return e as End;
}

function within<T>(p: Promise<T>, what: string): Promise<T> {
  return Promise.race([p, new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`${what}: not within ${WAIT_MS} ms`)), WAIT_MS))]);
}

/** Two ends whose signals are relayed to each other as the server would, asynchronously. */
function pair(): { a: End; b: End } {
  const ends: { a?: End; b?: End } = {};
  ends.a = end(true, (data) => setTimeout(() => ends.b!.handle.signal(data), 1));
  ends.b = end(false, (data) => setTimeout(() => ends.a!.handle.signal(data), 1));
  return ends as { a: End; b: End };
}

test('two peers connect over relayed signals; messages arrive whole, in order, exactly the bytes of the view sent', async () => {
  const { a, b } = pair();
  await within(Promise.all([a.connected, b.connected]), 'connect');
  // A view into a larger buffer: only its own bytes travel.
  const backing = new Uint8Array(4096).map((_, i) => i % 251);
  const view = backing.subarray(100, 1100);
  const big = new Uint8Array(200 * 1024).map((_, i) => (i * 7) % 256);
  a.handle.send(view);
  a.handle.send(big);
  for (let i = 0; i < 50; i++) a.handle.send(Uint8Array.of(i, i + 1));
  b.handle.send(Uint8Array.of(42));
  await within(Promise.all([b.messages(52), a.messages(1)]), 'messages');
  assert.deepEqual(b.received[0], view);
  assert.deepEqual(b.received[1], big);
  assert.deepEqual(b.received.slice(2).map((m) => m[0]), Array.from({ length: 50 }, (_, i) => i), 'in order');
  assert.deepEqual(a.received, [Uint8Array.of(42)]);
  assert.equal(typeof a.handle.bufferedAmount(), 'number');
  // The signals keep simple-peer's shapes: a description, then trickled candidates.
  assert.deepEqual(Object.keys(a.signals[0]!).sort(), ['sdp', 'type']);
  assert.equal(a.signals[0]!.type, 'offer');
  assert.equal(b.signals[0]!.type, 'answer');
  assert.ok(a.signals.some((s) => s.type === 'candidate' && typeof (s.candidate as { candidate?: unknown }).candidate === 'string'));
  // Destroying one end closes the other.
  a.handle.destroy();
  await within(Promise.all([a.closed, b.closed]), 'close');
  assert.deepEqual([a.errors, b.errors], [[], []]);
});

test('candidates that overtake the offer wait for it, and the link still opens', async () => {
  const held: Array<Record<string, unknown>> = [];
  const ends: { a?: End; b?: End } = {};
  // The initiator's signals reach the other end candidates first, then the offer.
  ends.a = end(true, (data) => {
    held.push(data);
    if (data.type !== 'offer') return;
    setTimeout(() => {
      for (const s of [...held.filter((h) => h.type === 'candidate'), data]) ends.b!.handle.signal(s);
    }, 50);
  });
  ends.b = end(false, (data) => setTimeout(() => ends.a!.handle.signal(data), 1));
  const { a, b } = ends as { a: End; b: End };
  await within(Promise.all([a.connected, b.connected]), 'connect');
  a.handle.send(Uint8Array.of(1, 2, 3));
  await within(b.messages(1), 'message');
  assert.deepEqual(b.received[0], Uint8Array.of(1, 2, 3));
  a.handle.destroy();
  b.handle.destroy();
});

test('a signal that is no offer, answer or candidate fails the link with ERR_PEER_FAILED, and throws nothing', async () => {
  for (const bad of [{ type: 'offer' }, { type: 'candidate', candidate: 'x' }, { type: 'renegotiate' }, { sdp: 'v=0', type: 'answer', extra: 1 }, { type: 'offer', sdp: 'x'.repeat(70_000) }]) {
    const b = end(false);
    b.handle.signal(bad);
    await within(b.closed, JSON.stringify(bad).slice(0, 40));
    assert.equal(b.errors[0]?.code, 'ERR_PEER_FAILED', JSON.stringify(bad).slice(0, 40));
  }
  // An offer whose SDP is nonsense fails in the handshake, by name.
  const b = end(false);
  b.handle.signal({ type: 'offer', sdp: 'not an sdp' });
  await within(b.closed, 'a nonsense SDP');
  assert.match(b.errors[0]!.message, /handshake failed/);
});

test('a machine without @roamhq/wrtc is told which package to install (ERR_MISSING_PACKAGE); any other load failure keeps its own words', async () => {
  const noConfig = () => ({ iceServers: [] });
  // What Node throws for an import of a package that is not installed.
  const missing = Object.assign(new Error(`Cannot find package '${WRTC_PACKAGE}' imported from /app/shared/network/wrtc-peer-factory.ts`), { code: 'ERR_MODULE_NOT_FOUND' });
  await assert.rejects(createWrtcPeerFactory(noConfig, () => Promise.reject(missing)), (e: unknown) => e instanceof WebringError && e.code === 'ERR_MISSING_PACKAGE' && e.message.includes(`npm install ${WRTC_PACKAGE}`));
  const broken = new Error('wrtc.node: invalid ELF header');
  await assert.rejects(createWrtcPeerFactory(noConfig, () => Promise.reject(broken)), (e: unknown) => e === broken);
});
