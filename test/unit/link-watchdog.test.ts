/**
 * The link watchdog (shared/training/link-watchdog.ts): a generation whose ring links stay
 * shut past the deadline is reported, naming the neighbours; one whose links opened, or
 * that a newer generation replaced, is not.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '../../shared/util/clock';
import { LinkWatchdog, LINK_OPEN_DEADLINE_MS } from '../../shared/training/link-watchdog';
import type { Generation, ReformRequest } from '../../shared/protocol';

const generation = (n: number): Generation => ({ room: 'r', generation: n, members: [], hub: null });

function watchdog(shut: () => string[]) {
  const clock = new ManualClock();
  const reports: ReformRequest[] = [] as ReformRequest[];
  let latest: Generation | null = null;
  const dog = new LinkWatchdog({ clock, unreachableIn: () => shut(), latest: () => latest, report: (r) => reports.push(r), log: () => {} });
  return { clock, reports, dog, announce: (g: Generation) => ((latest = g), dog.watch(g)) };
}

test('links still shut at the deadline are reported, and again at each deadline after', () => {
  const { clock, reports, announce } = watchdog(() => ['b']);
  announce(generation(4));
  clock.advance(LINK_OPEN_DEADLINE_MS - 1);
  assert.deepEqual(reports, []);
  clock.advance(1);
  assert.deepEqual(reports.map((r: ReformRequest) => [r.generation, r.unreachable]), [[4, ['b']]]);
  clock.advance(LINK_OPEN_DEADLINE_MS);
  assert.equal(reports.length, 2);
});

test('links that opened, and generations replaced by newer ones, are not reported', () => {
  let shut: string[] = ['b'];
  const { clock, reports, announce } = watchdog(() => shut);
  announce(generation(4));
  clock.advance(LINK_OPEN_DEADLINE_MS / 2);
  announce(generation(5));
  clock.advance(LINK_OPEN_DEADLINE_MS / 2);
  assert.deepEqual(reports, [], 'generation 4 was replaced before its deadline');
  shut = [];
  clock.advance(LINK_OPEN_DEADLINE_MS);
  assert.deepEqual(reports, [], 'generation 5 opened its links');
});
