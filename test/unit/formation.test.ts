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

test('a link named from both ends sheds the newer end; one that broke links before goes first', () => {
  assert.deepEqual(membersToShed([report('b', 'c'), report('c', 'b')], ring, {}).members, ['c'], 'the newer of the two');
  assert.deepEqual(membersToShed([report('b', 'c'), report('c', 'b')], ring, { b: 1 }).members, ['b'], 'the common factor of broken links');
  const shed = membersToShed([report('a', 'b'), report('b', 'a'), report('d', 'e'), report('e', 'd')], ring, {});
  assert.deepEqual(shed.members, ['b', 'e'], 'two broken links, one end each');
  assert.deepEqual(shed.links, [['a', 'b'], ['d', 'e']]);
});

test('one client naming a classmate sheds nobody; strangers and names outside the ring are ignored', () => {
  assert.deepEqual(membersToShed([report('b', 'c')], ring, {}).members, []);
  assert.deepEqual(membersToShed([report('x', 'c'), report('y', 'c')], ring, {}).members, [], 'reporters outside the ring count for nothing');
  assert.deepEqual(membersToShed([report('b', 'z'), report('z', 'b')], ring, {}).members, []);
});

test('the ring is never shed empty: the oldest member stays', () => {
  const pair = [{ id: 'a', index: 0 }, { id: 'b', index: 3 }];
  assert.deepEqual(membersToShed([report('a', 'b'), report('b', 'a')], pair, { b: 0, a: 5 }).members, ['a'], 'the history picks a');
  const trio = [{ id: 'a', index: 0 }, { id: 'b', index: 1 }, { id: 'c', index: 2 }];
  const everyone = [report('a', 'b', 'c'), report('b', 'a', 'c'), report('c', 'a', 'b')];
  assert.deepEqual(membersToShed(everyone, trio, {}).members, ['b', 'c']);
});
