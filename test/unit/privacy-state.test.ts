/**
 * The teacher page's privacy line (client/teacher/privacy-state.ts) for a secure ring of
 * more seats than devices (issue 38 (6)): the run holds, and the line must say so, and why,
 * rather than "Secure aggregation is on". The page itself is tested in a browser in
 * test/e2e/privacy-page.spec.ts (a ring of two waiting, then three training); here the
 * rendering of the case a browser test cannot set up (several tabs behind one address),
 * on a stand-in for the element.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { renderPrivacy } from '../../client/teacher/privacy-state';
import { DEFAULT_START_CONFIG } from '../../shared/tasks/start-config';
import type { RoomStatus } from '../../shared/protocol';

function rendered(members: number, clients: number): string {
  const el = { hidden: true, dataset: {} as Record<string, string>, textContent: '' };
  const status = { state: 'training', config: { ...DEFAULT_START_CONFIG, secureAggregation: true }, members: Array.from({ length: members }, () => ({})), clients } as unknown as RoomStatus;
  renderPrivacy(el as unknown as HTMLElement, status);
  assert.equal(el.hidden, false);
  return el.textContent;
}

test('issue 38 (6): three tabs from two devices wait for a third device, and the line says why (failed on the previous main)', () => {
  assert.equal(rendered(3, 2), "Secure aggregation is waiting for student 3: with 2 (3 members on 2 network addresses: one address counts once, unless you vouch under the seats setting that its members are different devices), each would learn the other's gradient from their sum.");
  assert.match(rendered(3, 3), /^Secure aggregation is on/);
  assert.match(rendered(2, 2), /^Secure aggregation is waiting for student 3: with 2, each/);
});
