/**
 * The admission probe: before a worker joins, it times a few forward and backward passes of
 * the default model on a small batch, on the backend it will train with. Two things follow:
 *  - the device is prepared before it takes part: the backend is up and the model's
 *    kernels are compiled (a WebGPU tab's first pass compiles its shaders, which took
 *    seconds that a joining tab used to cost the whole class at its first step);
 *  - its speed is known before its first step: with balanceShares its first share is
 *    already sized to it, and the teacher sees "3 laptops, 1 slow tablet" before Start.
 *
 * The first pass is the warm-up and is not timed; the fastest timed pass is kept, since
 * anything else on the device (another tab, a garbage collection) only ever adds time.
 */
import * as tf from '@tensorflow/tfjs';
import type { DeviceClass, DeviceProbe } from '../protocol';
import { DEFAULT_TASK, taskOf } from '../tasks/registry';
import { batchShape, buildModel } from './models';
import { sleep, systemClock, type Clock } from '../util/clock';

/** Examples per probe pass: small, so that a phone is done in about a second. */
export const PROBE_BATCH = 8;
/** Timed passes after the warm-up. */
export const PROBE_PASSES = 3;
/** Any seed: the weights only need the model's shapes. */
const PROBE_SEED = 1;

export interface ProbeOptions {
  device: DeviceClass;
  /** Default: the default task and its default model, the one most runs train. */
  task?: string;
  model?: string;
  clock?: Clock;
  /** A fault a test plays (FaultInjector.slowMsPerExample): the probe sees the same slow device the trainer will. */
  slowMsPerExample?: number;
}

/** Runs the probe on the current tfjs backend; leaves no tensor behind. */
export async function probeDevice(options: ProbeOptions): Promise<DeviceProbe> {
  const task = taskOf(options.task ?? DEFAULT_TASK.id);
  const model = options.model ?? task.models[0]!.id;
  const outputs = task.outputs.length;
  const clock = options.clock ?? systemClock;
  const net = buildModel({ task: task.id, model, seed: PROBE_SEED, classes: [...task.outputs] });
  const variables = net.trainableWeights.map((w) => (w as unknown as { val: tf.Variable }).val);
  // Any input of the right shape: the time does not depend on the values (symbol indices read 0).
  const x = tf.randomUniform(batchShape(task.id, PROBE_BATCH), 0, 1, 'float32', PROBE_SEED);
  const y = tf.tidy(() => tf.oneHot(tf.tensor1d(Int32Array.from({ length: PROBE_BATCH }, (_, i) => i % outputs), 'int32'), outputs));
  try {
    const times: number[] = [];
    for (let pass = 0; pass <= PROBE_PASSES; pass++) {
      const t0 = clock.now();
      const { value, grads } = tf.variableGrads(() => tf.losses.softmaxCrossEntropy(y, net.apply(x, { training: true }) as tf.Tensor2D) as tf.Scalar, variables);
      // Read everything back, as a training step does: the timing covers the device's whole pass.
      await Promise.all([value.data(), ...Object.values(grads).map((g) => g.data())]);
      value.dispose();
      tf.dispose(grads);
      if (options.slowMsPerExample) await sleep(clock, options.slowMsPerExample * PROBE_BATCH);
      if (pass > 0) times.push(clock.now() - t0);
    }
    return { device: options.device, task: task.id, model, msPerExample: Math.max(Math.min(...times) / PROBE_BATCH, 1e-3) };
  } finally {
    x.dispose();
    y.dispose();
    net.dispose();
  }
}

const NOT_MEASURED = 'not measured';

/** How many times slower than the class's median probe a device must be to be called slow. */
export const SLOW_DEVICE_FACTOR = 2;

/**
 * The class's devices in one line, for the teacher before Start: "3 laptops, 1 slow
 * tablet". A device is slow when its probe is SLOW_DEVICE_FACTOR× the median or more;
 * members without a probe are "not measured".
 */
export function describeClass(probes: ReadonlyArray<DeviceProbe | null>): string {
  const measured = probes.filter((p): p is DeviceProbe => p !== null).map((p) => p.msPerExample).sort((a, b) => a - b);
  const mid = measured.length >> 1;
  const median = measured.length === 0 ? 0 : measured.length % 2 === 1 ? measured[mid]! : (measured[mid - 1]! + measured[mid]!) / 2;
  const counts = new Map<string, number>();
  for (const p of probes) {
    const label = p === null ? NOT_MEASURED : `${p.msPerExample >= SLOW_DEVICE_FACTOR * median ? 'slow ' : ''}${p.device === 'node' ? 'Node worker' : p.device}`;
    counts.set(label, (counts.get(label) ?? 0) + 1);
  }
  const order = (label: string) => (label.startsWith('slow') ? 1 : label === NOT_MEASURED ? 2 : 0);
  return [...counts.entries()]
    .sort((a, b) => order(a[0]) - order(b[0]) || b[1] - a[1])
    .map(([label, n]) => `${n} ${n === 1 || label === NOT_MEASURED ? label : `${label}s`}`)
    .join(', ');
}
