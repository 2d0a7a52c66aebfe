/**
 * The teacher's estimate of a run before Start (client/teacher/run-estimate.ts): steps from
 * the dataset, the batch and the class; compute from the devices' probes (balanced or not);
 * the exchange from the model's weight and the network check (or the assumed network);
 * which way `auto` would send the gradients; no estimate for a model nobody timed. Against
 * a real run of three tabs: test/e2e/network-check.spec.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ASSUMED_MBPS, STEP_OVERHEAD_MS, estimateRun } from '../../client/teacher/run-estimate';
import { DEFAULT_START_CONFIG } from '../../shared/tasks/start-config';
import type { MemberInfo, RoomStatus, StartConfig } from '../../shared/protocol';

const member = (id: string, msPerExample: number | null, model = 'mlp'): MemberInfo =>
  ({ id, name: id, probe: msPerExample === null ? null : { device: 'laptop', task: 'mnist', model, msPerExample } }) as MemberInfo;

const room = (members: MemberInfo[], extra: Partial<RoomStatus> = {}): RoomStatus => ({ members, waiting: [], hub: null, network: null, ...extra }) as RoomStatus;

const config = (over: Partial<StartConfig> = {}): StartConfig => ({ ...DEFAULT_START_CONFIG, dataset: 'mnist-60k', model: 'mlp', epochs: 1, batchSizePerWorker: 32, ...over });

test('steps, balanced compute and the assumed network: 60,000 digits in batches of 96 on three devices', () => {
  const result = estimateRun(room([member('a', 1), member('b', 1), member('c', 2)]), config({ balanceShares: true, allreduce: 'ring' }));
  assert.ok(result.ok);
  const e = result.estimate;
  assert.equal(e.steps, Math.ceil(60_000 / 96));
  // Balanced: 96 examples at 1 + 1 + 0.5 examples per ms together.
  assert.equal(e.computeMs, 96 / 2.5);
  assert.equal(e.network, 'assumed');
  // A ring of three moves 2·2/3 of the gradient (101,770 float32) at the assumed rate, and 4 round trips.
  const ring = (4 / 3) * ((101_770 * 4) / (ASSUMED_MBPS * 1000)) + 4 * 5;
  assert.ok(Math.abs(e.exchangeMs - ring) < 1e-9, `${e.exchangeMs} against ${ring}`);
  assert.equal(e.stepMs, e.computeMs + e.exchangeMs + STEP_OVERHEAD_MS);
  const unbalanced = estimateRun(room([member('a', 1), member('b', 1), member('c', 2)]), config({ balanceShares: false, allreduce: 'ring' }));
  assert.ok(unbalanced.ok && unbalanced.estimate.computeMs === 32 * 2, 'equal shares wait for the slowest device');
});

test('the network check decides: the hub when it runs and costs least, the server when no link opened; maxSteps caps the steps', () => {
  const check = (path: 'direct' | 'relay') => ({ check: 1, startedAt: 0, reports: ['a', 'b', 'c', 'd'].map((id) => ({ member: id, check: 1, serverRttMs: 3, downMBps: 20, upMBps: 10, links: [{ peer: 'a', path }] })) });
  const members = ['a', 'b', 'c', 'd'].map((id) => member(id, 1));
  const hub = estimateRun(room(members, { hub: member('h', null), network: check('direct') }), config({ maxSteps: 50 }));
  assert.ok(hub.ok);
  assert.equal(hub.estimate.network, 'measured');
  assert.equal(hub.estimate.steps, 50);
  assert.equal(hub.estimate.path, 'hub', 'auto with a hub running: the hub');
  // The laptop's link carries four gradients in and four sums out, at the slowest device's rate.
  assert.ok(Math.abs(hub.estimate.exchangeMs - (2 * 4 * (101_770 * 4)) / 10_000 - 6) < 1e-9);
  const ring = estimateRun(room(members, { hub: member('h', null), network: check('direct') }), config({ maxSteps: 50, allreduce: 'ring' }));
  assert.ok(ring.ok && ring.estimate.path === 'ring' && ring.estimate.exchangeMs < hub.estimate.exchangeMs);
  const relayed = estimateRun(room(members, { network: check('relay') }), config());
  assert.ok(relayed.ok && relayed.estimate.path === 'relay');
});

test('the ring and halving-doubling cost what the links between devices measured; the hub, what the server\'s did', () => {
  const members = ['a', 'b', 'c', 'd'].map((id) => member(id, 1));
  // Every device reaches the server at 10 MB/s in 3 ms, but the slowest link between two devices carries 2 MB/s in 8 ms; the hub's link is not a pair.
  const links = [
    { peer: 'b', path: 'direct' as const, rttMs: 4, MBps: 5 },
    { peer: 'c', path: 'relay' as const, rttMs: 8, MBps: 2 },
    { peer: 'h', path: 'direct' as const, rttMs: 1, MBps: 0.5 },
    { peer: 'd', path: 'shut' as const, rttMs: null, MBps: null },
  ];
  const network = { check: 1, startedAt: 0, reports: members.map((m) => ({ member: m.id, check: 1, serverRttMs: 3, downMBps: 20, upMBps: 10, links })) };
  const ring = estimateRun(room(members, { hub: member('h', null), network }), config({ allreduce: 'ring' }));
  assert.ok(ring.ok);
  const expected = ((2 * 3) / 4) * ((101_770 * 4) / 2_000) + 2 * 3 * 8;
  assert.ok(Math.abs(ring.estimate.exchangeMs - expected) < 1e-9, `${ring.estimate.exchangeMs} against ${expected}`);
  const hub = estimateRun(room(members, { hub: member('h', null), network }), config());
  assert.ok(hub.ok && hub.estimate.path === 'hub');
  assert.ok(Math.abs(hub.estimate.exchangeMs - ((2 * 4 * (101_770 * 4)) / 10_000 + 6)) < 1e-9, 'the hub still at the server\'s figures');
  // A check from devices that did not probe their links (an older page): the server's figures stand in.
  const unprobed = { ...network, reports: network.reports.map((r) => ({ ...r, links: [{ peer: 'b', path: 'direct' as const }] })) };
  const fallback = estimateRun(room(members, { network: unprobed }), config({ allreduce: 'ring' }));
  assert.ok(fallback.ok && Math.abs(fallback.estimate.exchangeMs - (((2 * 3) / 4) * ((101_770 * 4) / 10_000) + 2 * 3 * 3)) < 1e-9);
});

test('a check that timed the form\'s model on every device gives it an estimate; one device missing, none', () => {
  const members = [member('a', 1), member('b', 1)];
  const cnnProbe = (ms: number) => ({ device: 'laptop' as const, task: 'mnist', model: 'cnn', msPerExample: ms });
  const report = (id: string, probe?: ReturnType<typeof cnnProbe>) => ({ member: id, check: 1, serverRttMs: 3, downMBps: 20, upMBps: 10, links: [], ...(probe ? { probe } : {}) });
  const both = estimateRun(room(members, { network: { check: 1, startedAt: 0, reports: [report('a', cnnProbe(4)), report('b', cnnProbe(4))] } }), config({ model: 'cnn', balanceShares: false }));
  assert.ok(both.ok, JSON.stringify(both));
  assert.equal(both.estimate.computeMs, 32 * 4, 'the CNN\'s time per example, not the MLP\'s');
  const one = estimateRun(room(members, { network: { check: 1, startedAt: 0, reports: [report('a', cnnProbe(4)), report('b')] } }), config({ model: 'cnn' }));
  assert.deepEqual(one, { ok: false, why: 'the devices timed mnist/mlp; Check the network to time mnist/cnn on them' });
  // The default model keeps the admission probes, whatever the check timed.
  const mlp = estimateRun(room(members, { network: { check: 1, startedAt: 0, reports: [report('a', cnnProbe(4)), report('b', cnnProbe(4))] } }), config({ balanceShares: false }));
  assert.ok(mlp.ok && mlp.estimate.computeMs === 32 * 1);
});

test('no estimate for a model the devices did not time, for the class\'s own examples, or for an empty room', () => {
  const cnn = estimateRun(room([member('a', 1)]), config({ model: 'cnn' }));
  assert.deepEqual(cnn, { ok: false, why: 'the devices timed mnist/mlp; Check the network to time mnist/cnn on them' });
  assert.equal(estimateRun(room([member('a', 1)]), config({ data: 'own' })).ok, false);
  assert.equal(estimateRun(room([]), config()).ok, false);
  assert.equal(estimateRun(room([member('a', null)]), config()).ok, false);
});
