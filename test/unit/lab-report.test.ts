/**
 * The lab's arithmetic: each network model's bound for each algorithm (the cases the
 * issue reasons with: on one access point the hub needs half the ring's airtime, on a
 * switch the ring wins by about N/2), and the four targets computed from rows, met or not.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { boundMs, busMBps } from '../../lab/bounds';
import { requiredAt, targets } from '../../lab/report';
import { measureOrder } from '../../lab/allreduce-rows';
import { internet, wifi, wiredLab } from '../../lab/network-models';
import type { AllReduceRow, AutoRow } from '../../lab/allreduce-rows';
import type { Algorithm } from '../../shared/protocol';
import { mixedClassTarget } from '../../lab/mixed-class';
import type { TrainingRow } from '../../lab/training-rows';
import type { DeviceProfile } from '../../lab/cpu-caps';

const MB = 2 ** 20;
const close = (a: number, b: number) => assert.ok(Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(b)), `${a} ≠ ${b}`);

test('wifi: the ring needs 4(N-1)·S of air, the hub on a wired server 2N·S, with the server on the air 4N·S', () => {
  const air = wifi({ airMbit: 80 }); // 10 MB/s = 10_000 bytes per ms
  const s = 10_000_000;
  close(boundMs(air, 'ring', 8, s), (4 * 7 * s) / 10_000);
  close(boundMs(air, 'hub', 8, s), (2 * 8 * s) / 10_000);
  close(boundMs(air, 'ring', 8, s) / boundMs(air, 'hub', 8, s), 1.75);
  close(boundMs(wifi({ airMbit: 80, serverOnAir: true }), 'hub', 8, s), (4 * 8 * s) / 10_000);
});

test('wired-lab: each ring port carries 2(N-1)/N·S, the hub\'s port N·S: the ring wins by N²/(2(N-1))', () => {
  const lab = wiredLab({ portMbit: 80, serverMbit: 80 });
  const s = 10_000_000;
  close(boundMs(lab, 'ring', 4, s), (1.5 * s) / 10_000);
  close(boundMs(lab, 'hub', 4, s), (4 * s) / 10_000);
  // A hub behind a gigabit port is limited by the students' own ports instead.
  close(boundMs(wiredLab({ portMbit: 80, serverMbit: 8000 }), 'hub', 4, s), s / 10_000);
  close(boundMs(lab, 'halving-doubling', 4, s), boundMs(lab, 'ring', 4, s));
});

test('internet: the slower of a site\'s uplink and downlink, and for the hub the server\'s link too', () => {
  const net = internet({ downMbit: 16, upMbit: 8, serverMbit: 40 }); // 2 MB/s down, 1 MB/s up, 5 MB/s server
  const s = 1_000_000;
  close(boundMs(net, 'ring', 4, s), (1.5 * s) / 1_000);
  close(boundMs(net, 'hub', 4, s), s / 1_000);
  close(boundMs(net, 'hub', 8, s), (8 * s) / 5_000);
  assert.equal(boundMs(net, 'ring', 1, s), 0);
  close(busMBps(4, 4 * MB, 1000), (1.5 * 4 * MB) / 1e6);
});

const cpu = { mean: 0.5, peak: 0.7, cores: 2, intervals: 4 };
function row(model: AllReduceRow['model'], n: number, bytes: number, algorithm: Algorithm, ms: number): AllReduceRow {
  return { model, n, bytes, wire: 'fp32', algorithm, ms, boundMs: ms / 2, ofBound: 0.5, busMBps: busMBps(n, bytes, ms), cpu, throttled: 0, counts: true };
}
function auto(model: AutoRow['model'], n: number, bytes: number, picked: Algorithm, fastest: Algorithm, ratio: number): AutoRow {
  return { model, n, bytes, wire: 'fp32', picked, fastest, pickedOverFastest: ratio, models: { ring: null, halvingDoubling: null, hub: null }, shape: null };
}
const profiles = [wifi(), wiredLab({ portMbit: 20, serverMbit: 20 }), internet()];

test('the targets from rows: each figure, met or not, and the worst auto case named', () => {
  // 20 Mbit/s = 2.5 MB/s; the ring's bus bandwidth is 1.5 · 16 MiB / ms.
  const ringMs = (1.5 * 16 * MB) / 2.3e3;
  const rows = [row('wired-lab', 4, 16 * MB, 'ring', ringMs), row('wired-lab', 4, 16 * MB, 'hub', ringMs * 2.5), row('wifi', 8, 16 * MB, 'ring', 9000), row('wifi', 8, 16 * MB, 'hub', 5000)];
  const autos = [auto('wifi', 8, 16 * MB, 'hub', 'hub', 1), auto('internet', 2, MB, 'ring', 'hub', 1.08), auto('wired-lab', 4, 16 * MB, 'ring', 'ring', 1)];
  const t = Object.fromEntries(targets(rows, autos, profiles).map((x) => [x.id, x]));
  close(t['ring-vs-hub-wired-n4-16mb']!.value!, 2.5);
  assert.equal(t['ring-vs-hub-wired-n4-16mb']!.met, true);
  close(t['bus-vs-port-wired-n4-16mb']!.value!, 2.3 / 2.5);
  assert.equal(t['bus-vs-port-wired-n4-16mb']!.met, true);
  close(t['auto-vs-ring-wifi-n8-16mb']!.value!, 1.8);
  assert.equal(t['auto-vs-ring-wifi-n8-16mb']!.met, true);
  close(t['auto-vs-best-worst-case']!.value!, 1.08);
  assert.match(t['auto-vs-best-worst-case']!.detail, /internet, N = 2/);

  const worse = targets([row('wired-lab', 4, 16 * MB, 'ring', 20_000), row('wired-lab', 4, 16 * MB, 'hub', 30_000)], [auto('wifi', 2, MB, 'ring', 'hub', 1.4)], profiles);
  assert.deepEqual(worse.map((x) => x.met), [false, false, false, false]);
  assert.equal(worse[2]!.value, null, 'wifi N = 8 not measured: no figure, not met');
});

test('mixed-class-phone: the balanced class against what three laptops and a phone allow', () => {
  const row = (devices: DeviceProfile[], examplesPerSec: number, counts = true): TrainingRow =>
    ({ devices, n: devices.length, examplesPerSec, batchShares: devices.map(() => 0.25), counts }) as unknown as TrainingRow;
  const laptops = row(['laptop', 'laptop', 'laptop', 'laptop'], 100);
  const mixed: DeviceProfile[] = ['laptop', 'laptop', 'laptop', 'phone'];
  // Compute allows (3 × 0.2 + 0.05) / 0.8 = 0.8125 of the laptops' 100 examples/s.
  const met = mixedClassTarget(laptops, row(mixed, 25), row(mixed, 70));
  assert.equal(met.value, Number((70 / 81.25).toFixed(3)));
  assert.equal(met.met, true);
  assert.match(met.detail, /unbalanced 25\.0 \(0\.31 of allowed\), allowed 81\.3 = 0\.8125 × 100\.0/);
  assert.equal(mixedClassTarget(laptops, row(mixed, 25), row(mixed, 60)).met, false, '0.74 of the allowed rate misses 0.85');
  assert.equal(mixedClassTarget(laptops, row(mixed, 25), row(mixed, 80, false)).met, false, 'a row that does not count never meets a target');
});

test("the order rows are timed in: auto's pick first, then by bound, so that what cannot beat a measured time is skipped; the targets' rows always run", () => {
  const bound = (a: Algorithm) => ({ ring: 30, 'halving-doubling': 20, hub: 10 })[a];
  assert.deepEqual(measureOrder(['ring', 'halving-doubling', 'hub'], 'ring', bound), ['ring', 'hub', 'halving-doubling']);
  assert.deepEqual(measureOrder(['ring', 'halving-doubling', 'hub'], 'hub', bound), ['hub', 'halving-doubling', 'ring']);
  assert.deepEqual(measureOrder(['ring', 'hub'], 'halving-doubling', bound), ['hub', 'ring'], 'a pick outside the plan is not timed');
  assert.deepEqual(requiredAt('wired-lab', 4, 16 * MB, 'fp32'), ['ring', 'hub']);
  assert.deepEqual(requiredAt('wifi', 8, 16 * MB, 'fp32'), ['ring']);
  assert.deepEqual(requiredAt('wifi', 8, 16 * MB, 'fp16'), []);
});
