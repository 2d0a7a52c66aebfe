/**
 * Issue 38 (1): in a secure run, a turn whose sum failed is never summed again over fewer
 * members. The attack: a rank spoils the check word, so the masked sum S1 reaches it (and
 * the hub) but fails for everyone; then it accuses a classmate, and the survivors' redo
 * sums S2. Masked sums are exact, so S1 − S2 was the missing classmate's exact update.
 * Both tests failed on the main before the fix: S1 − S2 matched the evicted member's
 * contribution to the fixed point's precision. Now the turn is skipped and the redo sums zeros.
 *
 * Real trainers on real MNIST digits, real secure aggregation (WebCrypto keys, masks),
 * the in-memory ring and hub.
 */
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import * as tf from '@tensorflow/tfjs';
import { startConfigSchema } from '../../shared/tasks/start-config';
import { mnistShards, mnistSubset } from '../support/mnist';
import { createMemoryMesh } from '../support/memory-ring';
import { memberIds, relayedDirectories, secureOver, spoiler, withAllReduce } from '../support/secure-ring';
import { Trainer } from '../../shared/training/trainer';
import type { Collective } from '../../shared/collectives/collective';
import type { LoadedDataset } from '../../shared/tasks/task';
import type { StartConfig } from '../../shared/protocol';
import type { StepOptions } from '../../shared/training/step-ledger';

let dataset: LoadedDataset;
before(async () => {
  await tf.setBackend('cpu');
  dataset = mnistSubset();
});

/** Over the masks: what a rank contributes to each sum (its gradient, or its round's change). */
function recording(collective: Collective, inputs: Float32Array[]): Collective {
  return withAllReduce(collective, (original, buf, step, tag, options) => {
    inputs.push(buf.slice(0, buf.length - (options?.exactTail ?? 0)));
    return original(buf, step, tag, options);
  });
}

function norm(a: Float32Array): number {
  let s = 0;
  for (const v of a) s += v * v;
  return Math.sqrt(s);
}

/** ‖(a − b) − c‖ / ‖c‖: how far the difference of two sums is from one member's contribution. */
function distanceOfDifference(a: Float32Array, b: Float32Array, c: Float32Array): number {
  const d = new Float32Array(c.length);
  for (let i = 0; i < c.length; i++) d[i] = a[i]! - b[i]! - c[i]!;
  return norm(d) / norm(c);
}

async function retryAttack(config: StartConfig, hub: boolean, steps: StepOptions): Promise<void> {
  const n = 4;
  const attacker = 1;
  const target = 3;
  const ids = memberIds(n);
  const directories = relayedDirectories(ids);
  const seen: Float32Array[] = [];
  const inputs: Float32Array[][] = ids.map(() => []);
  let spoiling = false;
  const first = createMemoryMesh(n, { generation: 1, timeoutMs: 2_000, hub });
  const engines = first.rings.map((e, r) => (r === attacker ? spoiler(e, seen, () => spoiling) : e));
  const { secure } = secureOver(engines, ids, directories, 1);
  const trainers = secure.map((s, r) => new Trainer(config, mnistShards(config, dataset), recording(s, inputs[r]!)));
  await Promise.all(trainers.map((t) => t.trainStep(steps)));
  await Promise.all(trainers.map((t) => t.trainStep(steps)));

  // The attacker spoils its check word: every rank fails the turn, the attacker holds the sum.
  spoiling = true;
  const failed = await Promise.allSettled(trainers.map((t) => t.trainStep(steps)));
  spoiling = false;
  for (const f of failed) assert.equal(f.status === 'rejected' && (f.reason as { code?: string }).code, 'ERR_SECAGG_MISMATCH');
  const s1 = seen.at(-1)!;
  const contributions = inputs.map((list) => list.at(-1)!);
  // The attack model is real: what the attacker saw is the class's sum of the failed turn.
  const all = new Float32Array(s1.length);
  for (const c of contributions) for (let i = 0; i < c.length; i++) all[i]! += c[i]!;
  const saw = distanceOfDifference(s1, new Float32Array(s1.length), all);
  // (to the fixed point's 2^-17 per word, summed over the model's parameters)
  assert.ok(saw < 0.05, `the attacker saw the failed sum (to ${saw.toExponential(2)})`);

  // It accuses the target, who is evicted: the survivors form generation 2.
  await trainers[target]!.dispose();
  const survivors = trainers.filter((_, r) => r !== target);
  const second = createMemoryMesh(n - 1, { generation: 2, hub });
  const engines2 = second.rings.map((e, r) => (r === attacker ? spoiler(e, seen, () => false) : e));
  const again = secureOver(engines2, ids.slice(0, n - 1), directories.slice(0, n - 1), 2).secure;
  survivors.forEach((t, r) => t.setCollective(recording(again[r]!, inputs[r]!)));
  await Promise.all(survivors.map((t) => t.syncState()));
  const stepBefore = survivors[0]!.step;
  const retry = await Promise.all(survivors.map((t) => t.trainStep(steps)));
  const s2 = seen.at(-1)!;

  const leak = distanceOfDifference(s1, s2, contributions[target]!);
  assert.ok(leak > 0.5, `the two sums differ by the evicted member's contribution (to ${leak.toExponential(2)})`);
  assert.ok(retry.every((r) => r.finishing && r.examples === 0 && r.globalBatchSize === 0), 'the failed turn is skipped: nobody trains or sends it again');
  assert.equal(norm(s2), 0, 'the retry sums nothing');
  assert.ok(survivors.every((t) => t.step === stepBefore + retry[0]!.steps), 'the cursor moved past the skipped turn');

  // The class trains on, bit-identical.
  const next = await Promise.all(survivors.map((t) => t.trainStep(steps)));
  assert.ok(next.every((r) => !r.finishing && r.globalBatchSize > 0));
  assert.equal(new Set(await Promise.all(survivors.map((t) => t.weightsHash()))).size, 1);
  for (const t of survivors) await t.dispose();
}

test('issue 38 (1), local steps over the ring: a spoiled check word and an eviction do not reveal the evicted member’s round (failed on the previous main)', async () => {
  const config = startConfigSchema.parse({ sync: 'local-steps', localSteps: 2, batchSizePerWorker: 8, seed: 5, balanceShares: false, secureAggregation: true });
  await retryAttack(config, false, {});
});

test('issue 38 (1), every step through the hub: a spoiled check word and an eviction do not reveal the last rank’s gradient (failed on the previous main)', async () => {
  const config = startConfigSchema.parse({ allreduce: 'hub', batchSizePerWorker: 8, seed: 5, balanceShares: false, secureAggregation: true });
  await retryAttack(config, true, { meshReady: true, hubReady: true });
});
