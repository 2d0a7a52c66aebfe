/**
 * The server's record of a room's network check (signaling-server/rooms/network-checks.ts)
 * and its two windows: probe transfers only in the first NETWORK_CHECK_WINDOW_MS, answers
 * until NETWORK_CHECK_REPORT_WINDOW_MS, since a device that times a model for the check
 * answers after compiling it. Past them, coded refusals that change nothing. Through the real
 * server: test/server/network-check.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { NetworkChecks } from '../../signaling-server/rooms/network-checks';
import { NETWORK_CHECK_REPORT_WINDOW_MS, NETWORK_CHECK_WINDOW_MS } from '../../shared/protocol';
import { WebringError } from '../../shared/protocol/errors';

const report = (check: number) => ({ check, serverRttMs: 2, downMBps: 10, upMBps: 5, links: [] });
const code = (fn: () => void): string | null => {
  try {
    fn();
    return null;
  } catch (err) {
    return err instanceof WebringError ? err.code : 'not a WebringError';
  }
};

test('probes close after the probe window; answers are taken until the report window, then refused', () => {
  const checks = new NetworkChecks();
  const t0 = 1_000_000;
  const check = checks.start('room', t0);
  assert.equal(code(() => checks.probe('room', check, 'ann', 'down', t0 + NETWORK_CHECK_WINDOW_MS)), null);
  assert.equal(code(() => checks.probe('room', check, 'ann', 'up', t0 + NETWORK_CHECK_WINDOW_MS + 1)), 'ERR_STALE_RUN', 'a probe after its window');
  assert.equal(code(() => checks.report('room', 'ann', report(check), t0 + NETWORK_CHECK_WINDOW_MS + 1)), null, 'a device that timed a model answers late');
  assert.equal(code(() => checks.report('room', 'bo', report(check), t0 + NETWORK_CHECK_REPORT_WINDOW_MS + 1)), 'ERR_STALE_RUN', 'an answer after the report window');
  assert.deepEqual(checks.of('room')?.reports.map((r) => r.member), ['ann']);
});
