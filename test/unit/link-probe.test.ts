/**
 * The network check's probe of a link (shared/network/link-probe.ts): two ends over an
 * in-memory link measure each other's round trip and bandwidth; a shut link or a peer that
 * never answers gives nulls, not a hang; and a confused or hostile peer's probe messages
 * are refused without an answer, never counted past the probe's size. Over real RingNetworks
 * and tabs: test/e2e/network-check.spec.ts. A slow link's bulk gets the time left of the check's budget.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LINK_PROBE_BYTES, LINK_PROBE_TIMEOUT_MS, LINK_RTT_SAMPLES, LinkProbe, PROBE_HEADER_BYTES } from '../../shared/network/link-probe';
import { MAX_REPORTED_MBPS, networkReportSchema } from '../../shared/protocol';
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

test('a slow link\'s bulk is measured within the budget it is given, past the ping\'s timeout', async () => {
  const clock = new ManualClock();
  /** The peer answers pings at once and acknowledges a bulk only BULK_MS after it went out: a link of ~40 kB/s. */
  const BULK_MS = 3 * LINK_PROBE_TIMEOUT_MS;
  let probe: LinkProbe;
  let bulkBytes = 0;
  const answer = (kind: number, nonce: number) => probe.receive('b', message(kind, nonce, 0));
  probe = new LinkProbe({
    clock,
    send: (_peer, bytes) => {
      const nonce = new DataView(bytes.buffer, bytes.byteOffset).getUint32(2, true);
      if (bytes[1] === 1) queueMicrotask(() => answer(2, nonce));
      if (bytes[1] === 3 && (bulkBytes += bytes.byteLength - PROBE_HEADER_BYTES) === LINK_PROBE_BYTES) clock.setTimeout(() => answer(4, nonce), BULK_MS);
      return true;
    },
  });
  const slow = probe.measure('b', BULK_MS + 1_000);
  for (let t = 0; t < BULK_MS; t += 1_000) {
    await new Promise((r) => setImmediate(r));
    clock.advance(1_000);
  }
  const figures = await slow;
  assert.ok(figures.MBps !== null && Math.abs(figures.MBps - LINK_PROBE_BYTES / BULK_MS / 1000) < 0.01, JSON.stringify(figures));
  assert.equal(clock.pending, 0, 'no timer left behind');
  assert.equal(probe.refused, 0);
});

test('a bulk acknowledged sooner than the pings\' half round trip (a busy device) still gives a figure a report may carry', async () => {
  const clock = new ManualClock();
  const PING_MS = 200;
  let probe: LinkProbe;
  const answer = (kind: number, nonce: number) => probe.receive('b', message(kind, nonce, 0));
  probe = new LinkProbe({
    clock,
    send: (_peer, bytes) => {
      const nonce = new DataView(bytes.buffer, bytes.byteOffset).getUint32(2, true);
      if (bytes[1] === 1) clock.setTimeout(() => answer(2, nonce), PING_MS);
      if (bytes[1] === 3) queueMicrotask(() => answer(4, nonce));
      return true;
    },
  });
  const figures = probe.measure('b');
  for (let i = 0; i < LINK_RTT_SAMPLES; i++) {
    await new Promise((r) => setImmediate(r));
    clock.advance(PING_MS);
  }
  const { rttMs, MBps } = await figures;
  assert.equal(rttMs, PING_MS);
  const report = networkReportSchema.safeParse({ check: 1, serverRttMs: 1, downMBps: 1, upMBps: 1, links: [{ peer: 'peerb0000', path: 'direct', rttMs, MBps }] });
  assert.ok(report.success, `${MBps} MB/s: ${report.error?.message}`);
  assert.equal(MBps, MAX_REPORTED_MBPS, 'no time measured: the bound, not Infinity');
});
