/**
 * The network check's probe of a link (shared/network/link-probe.ts): two ends over an
 * in-memory link measure each other's round trip and bandwidth; a shut link or a peer that
 * never answers gives nulls, not a hang; and a confused or hostile peer's probe messages
 * are refused without an answer, never counted past the probe's size. Over real RingNetworks
 * and tabs: test/e2e/network-check.spec.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LINK_PROBE_BYTES, LINK_PROBE_TIMEOUT_MS, LinkProbe, PROBE_HEADER_BYTES } from '../../shared/network/link-probe';
import { PHASE_PROBE } from '../../shared/collectives/wire';
import { ManualClock } from '../../shared/util/clock';

/** Two probes joined by a link that delivers each message a tick later, as `a` and `b`. */
function pair(open = { a: true, b: true }) {
  const sent: Record<'a' | 'b', Uint8Array[]> = { a: [], b: [] };
  const probes = {} as Record<'a' | 'b', LinkProbe>;
  const end = (self: 'a' | 'b', other: 'a' | 'b') =>
    new LinkProbe({
      send: (peer, bytes) => {
        assert.equal(peer, other);
        if (!open[self]) return false;
        sent[self].push(bytes);
        const copy = bytes.slice();
        setImmediate(() => probes[other].receive(self, copy));
        return true;
      },
    });
  probes.a = end('a', 'b');
  probes.b = end('b', 'a');
  return { probes, sent };
}

function message(kind: number, nonce: number, total: number, payload = 0): Uint8Array {
  const bytes = new Uint8Array(PROBE_HEADER_BYTES + payload);
  const view = new DataView(bytes.buffer);
  bytes[0] = PHASE_PROBE;
  bytes[1] = kind;
  view.setUint32(2, nonce, true);
  view.setUint32(6, total, true);
  return bytes;
}

test('two ends measure the link between them: a round trip, and the bandwidth of the probe\'s bytes one way', async () => {
  const { probes, sent } = pair();
  const figures = await probes.a.measure('b');
  assert.ok(figures.rttMs !== null && figures.rttMs >= 0, JSON.stringify(figures));
  assert.ok(figures.MBps !== null && figures.MBps > 0, JSON.stringify(figures));
  const bulk = sent.a.filter((m) => m[1] === 3);
  assert.equal(bulk.reduce((n, m) => n + m.byteLength - PROBE_HEADER_BYTES, 0), LINK_PROBE_BYTES, 'the probe\'s bytes, once');
  assert.ok(bulk.every((m) => m.byteLength <= 96 * 1024), 'every message fits the relay');
  assert.equal(sent.b.length, 3 + 1, 'three pongs and one acknowledgement');
  assert.equal(probes.a.refused + probes.b.refused, 0);
});

test('a shut link is not measured, at once; a peer that never answers is not measured after the timeout', async () => {
  const shut = pair({ a: false, b: true });
  assert.deepEqual(await shut.probes.a.measure('b'), { rttMs: null, MBps: null });

  const clock = new ManualClock();
  const silent = new LinkProbe({ send: () => true, clock });
  const result = silent.measure('b');
  clock.advance(LINK_PROBE_TIMEOUT_MS);
  assert.deepEqual(await result, { rttMs: null, MBps: null });
  assert.equal(clock.pending, 0, 'no timer left behind');
});

test('probe messages that no honest peer sends are refused without an answer', () => {
  const answers: Uint8Array[] = [];
  const probe = new LinkProbe({ send: (_peer, bytes) => (answers.push(bytes), true) });
  probe.receive('x', new Uint8Array([PHASE_PROBE, 1]));
  probe.receive('x', message(1, 7, 0, 5));
  probe.receive('x', message(2, 12345, 0));
  probe.receive('x', message(3, 1, LINK_PROBE_BYTES + 1, 10));
  probe.receive('x', message(3, 1, 0, 10));
  probe.receive('x', message(9, 1, 0));
  assert.equal(probe.refused, 6);
  assert.equal(answers.length, 0);

  // A bulk that says one size and then another, or sends past what it declared, is dropped, not acknowledged.
  probe.receive('x', message(3, 2, 100, 60));
  probe.receive('x', message(3, 2, 200, 60));
  probe.receive('x', message(3, 3, 100, 60));
  probe.receive('x', message(3, 3, 100, 60));
  assert.equal(probe.refused, 8);
  assert.equal(answers.length, 0);

  // An honest ping and an honest bulk are answered.
  probe.receive('x', message(1, 4, 0));
  probe.receive('x', message(3, 5, 100, 40));
  probe.receive('x', message(3, 5, 100, 60));
  assert.deepEqual(answers.map((a) => [a[1], new DataView(a.buffer).getUint32(2, true)]), [[2, 4], [4, 5]]);
});
