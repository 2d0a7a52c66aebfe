/**
 * The school lab's targets (lab/school-wifi.ts): an isolated class counts only when it
 * trains to wifi's accuracy with every student relayed and nobody dropped, and a mixed class
 * only when its isolated half relays while its open students keep their links between
 * themselves direct. The runs themselves: `npm run lab -- --section school` (bench/lab-school.md).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { schoolMarkdown, schoolTargets, type SchoolNetwork, type SchoolRow } from '../../lab/school-wifi';

function row(network: SchoolNetwork, accuracy: number | null, relayed: SchoolRow['relayed'], isolated: number[], stepMs = 900): SchoolRow {
  return {
    network, n: 4, isolated, epochs: 2, globalBatch: 128, steps: 938, accuracy, stepMs, runMs: 400_000, algorithm: 'hub', reason: '',
    relayed, dropped: [], cpu: { mean: 0.6, peak: 1, cores: 2, intervals: 100 }, counts: true,
  };
}
const everyone = (names: string[]) => names.map((name) => ({ name, peers: ['hub'] }));

test('the isolated class: wifi\'s accuracy, every student relayed, and its step time over wifi\'s as the figure', () => {
  const wifi = row('wifi', 0.9644, [], []);
  const isolated = row('school-wifi-isolated', 0.9641, everyone(['lab-w0', 'lab-w1', 'lab-w2', 'lab-w3']), [0, 1, 2, 3], 850);
  const [t] = schoolTargets([wifi, isolated]);
  assert.equal(t!.id, 'school-isolated-trains');
  assert.equal(t!.met, true, t!.detail);
  assert.ok(Math.abs(t!.value! - 850 / 900) < 1e-9);

  assert.equal(schoolTargets([wifi, { ...isolated, accuracy: 0.95 }])[0]!.met, false, 'a point and a half below wifi');
  assert.equal(schoolTargets([wifi, { ...isolated, relayed: everyone(['lab-w0', 'lab-w1', 'lab-w2']) }])[0]!.met, false, 'one student not through the relay: not the isolated network');
  assert.equal(schoolTargets([wifi, { ...isolated, dropped: ['lab-w2'] }])[0]!.met, false, 'somebody dropped');
  assert.equal(schoolTargets([wifi, { ...isolated, counts: false }])[0]!.met, false, 'the machine was the bound');
  const alone = schoolTargets([isolated])[0]!;
  assert.equal(alone.met, false);
  assert.equal(alone.value, null, 'no wifi row: nothing to compare with');
});

test('the mixed class: the isolated half relays, the open half reaches the hub directly: both paths at once', () => {
  const wifi = row('wifi', 0.9644, [], []);
  // Workers 1 and 3 isolated; 0 and 2 relay only to them.
  const relayed = [
    { name: 'lab-w0', peers: ['lab-w1', 'lab-w3'] },
    { name: 'lab-w1', peers: ['hub', 'lab-w0', 'lab-w2'] },
    { name: 'lab-w2', peers: ['lab-w1', 'lab-w3'] },
    { name: 'lab-w3', peers: ['hub', 'lab-w0', 'lab-w2'] },
  ];
  const mixed = row('school-wifi-mixed', 0.9646, relayed, [1, 3]);
  const t = schoolTargets([wifi, mixed])[1]!;
  assert.equal(t.id, 'school-mixed-both-paths');
  assert.equal(t.met, true, t.detail);
  assert.equal(t.value, 1, 'both open students reach the hub directly');
  assert.match(t.detail, /fell back to the relay: none/);

  // An open student whose links were slow to open went through the relay: reported, and the class still used both paths.
  const slowOpen = relayed.map((r) => (r.name === 'lab-w2' ? { name: 'lab-w2', peers: ['hub', 'lab-w0', 'lab-w1', 'lab-w3'] } : r));
  const withSlow = schoolTargets([wifi, { ...mixed, relayed: slowOpen }])[1]!;
  assert.equal(withSlow.value, 0.5);
  assert.equal(withSlow.met, true, withSlow.detail);
  assert.match(withSlow.detail, /lab-w0–lab-w2, lab-w2–hub/);

  const everyOpenRelayed = relayed.map((r) => (r.name === 'lab-w0' || r.name === 'lab-w2' ? { ...r, peers: [...r.peers, 'hub'] } : r));
  const onePath = schoolTargets([wifi, { ...mixed, relayed: everyOpenRelayed }])[1]!;
  assert.equal(onePath.met, false, 'every open student relays to the hub: one path only');
  assert.equal(onePath.value, 0);
  assert.equal(schoolTargets([wifi, { ...mixed, relayed: relayed.filter((r) => r.name !== 'lab-w3') }])[1]!.met, false, 'an isolated student that never relayed');
  assert.equal(schoolTargets([wifi, { ...mixed, accuracy: 0.9 }])[1]!.met, false, 'below wifi\'s accuracy');
});

test('the report says how each row was measured and shows every row and target', () => {
  const rows = [row('wifi', 0.9644, [], []), row('school-wifi-isolated', 0.9644, everyone(['lab-w0', 'lab-w1', 'lab-w2', 'lab-w3']), [0, 1, 2, 3])];
  const md = schoolMarkdown({ generatedAt: '2026-11-28T10:00:00.000Z', commit: 'abc1234', versions: { node: '20.20.2', tfjs: '4.22.0' }, machine: { cores: 2, kernel: 'k', node: 'v20' }, minutes: 20, rows, targets: schoolTargets(rows), errors: [] });
  assert.match(md, /Measured 2026-11-28T10:00:00.000Z on commit abc1234 by `npm run lab -- --section school`.*Node 20\.20\.2, tfjs 4\.22\.0/);
  assert.match(md, /\| school-isolated-trains \|.*\| yes \|/);
  assert.match(md, /\| school-wifi-isolated \| 4 of 4 \| 938 \| 96\.44 % \|/);
  assert.match(md, /\| school-mixed-both-paths \|.*\| – \| no \| not measured in this run \|/);
});
