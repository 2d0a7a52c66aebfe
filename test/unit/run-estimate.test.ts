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

test('no estimate for a model the devices did not time, for the class\'s own examples, or for an empty room', () => {
  const cnn = estimateRun(room([member('a', 1)]), config({ model: 'cnn' }));
  assert.deepEqual(cnn, { ok: false, why: 'the devices timed mnist/mlp; mnist/cnn is measured once it runs' });
  assert.equal(estimateRun(room([member('a', 1)]), config({ data: 'own' })).ok, false);
  assert.equal(estimateRun(room([]), config()).ok, false);
  assert.equal(estimateRun(room([member('a', null)]), config()).ok, false);
});
