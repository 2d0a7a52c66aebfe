/** The admission probe, the class summary the teacher reads before Start, and the first shares it sizes. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as tf from '@tensorflow/tfjs';
import { describeClass, probeDevice } from '../../shared/compute/device-probe';
import { ShareBalancer } from '../../shared/training/share-balancer';
import { deviceClassOf } from '../../client/device-class';
import type { DeviceProbe } from '../../shared/protocol';

test('the probe times the model on this backend, says which device and model, and leaves no tensor behind', async () => {
  await tf.setBackend('cpu');
  const before = tf.memory().numTensors;
  const mlp = await probeDevice({ device: 'laptop', model: 'mlp' });
  const cnn = await probeDevice({ device: 'laptop', model: 'cnn' });
  assert.equal(tf.memory().numTensors, before, 'no tensors leak');
  assert.deepEqual([mlp.device, mlp.model, cnn.model], ['laptop', 'mlp', 'cnn']);
  assert.ok(mlp.msPerExample > 0 && cnn.msPerExample > mlp.msPerExample, `the CNN costs more per example than the MLP: ${cnn.msPerExample} vs ${mlp.msPerExample}`);
});

const probe = (device: DeviceProbe['device'], msPerExample: number): DeviceProbe => ({ device, task: 'mnist', model: 'mlp', msPerExample });

test('the class summary counts devices and calls one slow at twice the median or more', () => {
  assert.equal(describeClass([probe('laptop', 1), probe('laptop', 1.2), probe('laptop', 0.9), probe('tablet', 3)]), '3 laptops, 1 slow tablet');
  assert.equal(describeClass([probe('laptop', 1), probe('phone', 1.5), null]), '1 laptop, 1 phone, 1 not measured');
  assert.equal(describeClass([probe('node', 1), probe('node', 1)]), '2 Node workers');
  assert.equal(describeClass([]), '');
});

test('with balanceShares the first shares follow the probes; without, or with one unmeasured member, they are equal', () => {
  const on = new ShareBalancer(true);
  on.reset(3, [1, 1, 4]);
  const shares = Array.from(on.current!);
  assert.ok(Math.abs(shares[0]! - 4 / 9) < 1e-9 && Math.abs(shares[2]! - 1 / 9) < 1e-9, `speed 1/ms: ${shares}`);
  on.reset(3, [1, 0, 4]);
  assert.deepEqual(Array.from(on.current!), [1 / 3, 1 / 3, 1 / 3]);
  const off = new ShareBalancer(false);
  off.reset(3, [1, 1, 4]);
  assert.equal(off.current, null);
});

test('the device class comes from the user agent', () => {
  const ua = (userAgent: string, maxTouchPoints = 0, mobile?: boolean) => deviceClassOf({ userAgent, maxTouchPoints, ...(mobile === undefined ? {} : { userAgentData: { mobile } }) });
  assert.equal(ua('Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 Chrome/131.0 Safari/537.36'), 'laptop');
  assert.equal(ua('Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 Chrome/131.0 Mobile Safari/537.36'), 'phone');
  assert.equal(ua('Mozilla/5.0 (Linux; Android 13; SM-X200) AppleWebKit/537.36 Chrome/131.0 Safari/537.36'), 'tablet');
  assert.equal(ua('Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) Mobile/15E148'), 'phone');
  assert.equal(ua('Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) Safari/605.1.15', 5), 'tablet', 'iPadOS says Macintosh, with touch');
  assert.equal(ua('Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) Safari/605.1.15', 0), 'laptop');
  assert.equal(ua('Mozilla/5.0 (X11; CrOS x86_64) Chrome/131.0', 0, false), 'laptop');
});
