/**
 * The shedding rule (signaling-server/rooms/formation.ts): who goes when a re-formed ring's
 * links will not open. Pure: reports in, members out.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { membersToShed, type UnreachableReport } from '../../signaling-server/rooms/formation';

const ring = ['a', 'b', 'c', 'd', 'e'].map((id, index) => ({ id, index }));
const report = (reporter: string, ...unreachable: string[]): UnreachableReport => ({ generation: 7, reporter, unreachable });

test('a member both of its neighbours cannot reach is shed, and only it', () => {
  const shed = membersToShed([report('b', 'c'), report('d', 'c'), report('c', 'b', 'd')], ring, {});
  assert.deepEqual(shed.members, ['c']);
});

// Issue 38 (4): two neighbours could shed anyone, the chief included, by naming it. Each of
// the next three tests failed on the previous main.
test('issue 38 (4): the chief is never shed on its neighbours\' reports alone; of its shut links, the other ends go', () => {
  assert.deepEqual(membersToShed([report('b', 'a'), report('e', 'a')], ring, {}).members, [], 'a claim the chief denies');
  assert.deepEqual(membersToShed([report('b', 'a'), report('e', 'a'), report('a', 'b', 'e')], ring, {}).members, ['b', 'e']);
});

test('issue 38 (4): two neighbours naming a classmate that reaches them shed nobody: a shut link is seen from both ends', () => {
  assert.deepEqual(membersToShed([report('b', 'c'), report('d', 'c')], ring, {}).members, []);
});

test('issue 38 (4): the history of broken links follows the client address, so a seat that rejoins with a fresh member id keeps it', () => {
  // A broke links with two classmates, then rejoined as a2; the victim v joined after it.
  const seats = [{ id: 'chief', index: 0, address: '10.0.0.1' }, { id: 'a2', index: 7, address: '10.0.0.66' }, { id: 'v', index: 8, address: '10.0.0.9' }];
  const shed = membersToShed([report('a2', 'v'), report('v', 'a2')], seats, { '10.0.0.66': 2 });
  assert.deepEqual(shed.members, ['a2'], 'the common factor of broken links goes, not the newer victim');
  // Two tabs of one client count as one witness: not "both neighbours".
  const tabs = [{ id: 'chief', index: 0, address: '10.0.0.1' }, { id: 't1', index: 1, address: '10.0.0.66' }, { id: 'c', index: 2, address: '10.0.0.9' }, { id: 't2', index: 3, address: '10.0.0.66' }];
  assert.deepEqual(membersToShed([report('t1', 'c'), report('t2', 'c'), report('c', 't1', 't2')], tabs, { '10.0.0.66': 1 }).members, ['t1', 't2']);
});

test('issue 57 (6): a link named from both ends sheds the older end on a tie, never the newcomer (failed on the previous main); one that broke links before goes first', () => {
  assert.deepEqual(membersToShed([report('b', 'c'), report('c', 'b')], ring, {}).members, ['b'], 'the older of the two: the newcomer stays');
  assert.deepEqual(membersToShed([report('b', 'c'), report('c', 'b')], ring, { c: 1 }).members, ['c'], 'the common factor of broken links');
  // Links broken with different classmates outweigh more links broken with one.
  assert.deepEqual(membersToShed([report('b', 'c'), report('c', 'b')], ring, { b: 3, c: 2 }, { b: ['x'], c: ['x', 'y'] }).members, ['c'], 'the one that broke links with more classmates');
  const shed = membersToShed([report('a', 'b'), report('b', 'a'), report('d', 'e'), report('e', 'd')], ring, {});
  assert.deepEqual(shed.members, ['b', 'd'], 'two broken links, one end each');
  assert.deepEqual(shed.links, [['a', 'b'], ['d', 'e']]);
});

test('a joiner that reaches neither neighbour goes, not the neighbours, when the whole class shares one address (a class test shed an honest neighbour on the older-end tie)', () => {
  const oneNat = ['c0', 'c1', 'c2', 'iso'].map((id, index) => ({ id, index, address: '127.0.0.1' }));
  const shed = membersToShed([report('c2', 'iso'), report('c0', 'iso'), report('iso', 'c2', 'c0')], oneNat, {});
  assert.deepEqual(shed.members, ['iso']);
});

test('one client naming a classmate sheds nobody; strangers and names outside the ring are ignored', () => {
  assert.deepEqual(membersToShed([report('b', 'c')], ring, {}).members, []);
  assert.deepEqual(membersToShed([report('x', 'c'), report('y', 'c')], ring, {}).members, [], 'reporters outside the ring count for nothing');
  assert.deepEqual(membersToShed([report('b', 'z'), report('z', 'b')], ring, {}).members, []);
});

test('the ring is never shed empty: the oldest member stays', () => {
  const pair = [{ id: 'a', index: 0 }, { id: 'b', index: 3 }];
  assert.deepEqual(membersToShed([report('a', 'b'), report('b', 'a')], pair, { b: 0, a: 5 }).members, ['b'], 'the chief stays, whatever its history');
  const trio = [{ id: 'a', index: 0 }, { id: 'b', index: 1 }, { id: 'c', index: 2 }];
  const everyone = [report('a', 'b', 'c'), report('b', 'a', 'c'), report('c', 'a', 'b')];
  assert.deepEqual(membersToShed(everyone, trio, {}).members, ['b', 'c']);
});
