/**
 * The CPU backend's filter gradient (shared/compute/cpu-kernels.ts) against the definition,
 * written out as plain loops: every stride, padding and shape a model here could use, with
 * the zeros ReLU leaves in its input; and the embedding gradient, the same way. The CNN's and the
 * names model's training on the CPU backend rest on them, and on the WASM backend, which
 * has no kernels of its own for them: there the same code runs, reading the WASM heap.
 */
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import * as tf from '@tensorflow/tfjs';
import { useFastCpuKernels } from '../../shared/compute/cpu-kernels';
import { selectNodeBackend } from '../../node-worker/node-backend';
import { mulberry32 } from '../../shared/util/random';

before(async () => {
  useFastCpuKernels();
  // Registers the WASM backend and its missing kernels; each test picks its backend.
  assert.equal((await selectNodeBackend('wasm')).backend, 'wasm');
});

const BACKENDS = ['cpu', 'wasm'] as const;

/** dW by the definition: Σ over batch and output positions of x at the tap times dy. */
function reference(x: Float32Array, xShape: number[], dy: Float32Array, dyShape: number[], fh: number, fw: number, stride: number, top: number, left: number): Float64Array {
  const [n, h, w, cin] = xShape as [number, number, number, number];
  const [, oh, ow, cout] = dyShape as [number, number, number, number];
  const dW = new Float64Array(fh * fw * cin * cout);
  for (let r = 0; r < fh; r++)
    for (let c = 0; c < fw; c++)
      for (let i = 0; i < cin; i++)
        for (let o = 0; o < cout; o++) {
          let sum = 0;
          for (let b = 0; b < n; b++)
            for (let y = 0; y < oh; y++)
              for (let z = 0; z < ow; z++) {
                const xr = y * stride + r - top;
                const xc = z * stride + c - left;
                if (xr < 0 || xr >= h || xc < 0 || xc >= w) continue;
                sum += x[((b * h + xr) * w + xc) * cin + i]! * dy[((b * oh + y) * ow + z) * cout + o]!;
              }
          dW[((r * fw + c) * cin + i) * cout + o] = sum;
        }
  return dW;
}

for (const backend of BACKENDS) test(`the ${backend} filter gradient equals the definition for every stride and padding, with ReLU zeros in the input`, async () => {
  assert.ok(await tf.setBackend(backend));
  // The faster kernel is the one the CPU backend runs (tfjs-backend-cpu's own is named conv2DBackpropFilter).
  assert.notEqual(tf.getKernel('Conv2DBackpropFilter', backend)?.kernelFunc.name, 'conv2DBackpropFilter');
  const rand = mulberry32(11);
  const cases = [
    { x: [3, 12, 12, 1], f: [5, 5, 1, 4], stride: 1, pad: 'valid' as const },
    { x: [2, 10, 9, 3], f: [3, 3, 3, 5], stride: 2, pad: 'same' as const },
    { x: [2, 8, 8, 4], f: [5, 5, 4, 6], stride: 1, pad: 'same' as const },
    { x: [1, 7, 7, 2], f: [2, 3, 2, 2], stride: 2, pad: 'valid' as const },
  ];
  for (const k of cases) {
    const xs = Float32Array.from({ length: k.x.reduce((a, b) => a * b, 1) }, () => (rand() < 0.4 ? 0 : rand() * 2 - 1));
    const x = tf.tensor4d(xs, k.x as [number, number, number, number]);
    const filter = tf.randomNormal(k.f as [number, number, number, number], 0, 1, 'float32', 3) as tf.Tensor4D;
    const y = tf.conv2d(x, filter, k.stride, k.pad);
    const dys = Float32Array.from({ length: y.size }, () => rand() * 2 - 1);
    const dy = tf.tensor4d(dys, y.shape as [number, number, number, number]);
    // The gradient of Σ(conv(x, W) · dy) with respect to W is the filter gradient of dy.
    const dW = tf.grad((w: tf.Tensor) => tf.sum(tf.mul(tf.conv2d(x, w as tf.Tensor4D, k.stride, k.pad), dy)))(filter);
    const info = tf.backend_util.computeConv2DInfo(k.x as [number, number, number, number], k.f as [number, number, number, number], k.stride, 1, k.pad);
    const want = reference(xs, k.x, dys, y.shape, k.f[0]!, k.f[1]!, k.stride, info.padInfo.top, info.padInfo.left);
    const have = dW.dataSync();
    assert.equal(have.length, want.length);
    for (let i = 0; i < want.length; i++) {
      assert.ok(Math.abs(have[i]! - want[i]!) <= 1e-5 * (1 + Math.abs(want[i]!)), `${JSON.stringify(k)}: dW[${i}] = ${have[i]}, want ${want[i]}`);
    }
    tf.dispose([x, filter, y, dy, dW]);
  }
});

for (const backend of BACKENDS) test(`the ${backend} embedding gradient (unsorted segment sum) equals the definition, ids out of range dropped`, async () => {
  assert.ok(await tf.setBackend(backend));
  assert.notEqual(tf.getKernel('UnsortedSegmentSum', backend)?.kernelFunc.name, 'unsortedSegmentSum');
  const rand = mulberry32(5);
  const rows = 300;
  const width = 24;
  const segments = 28;
  const xs = Float32Array.from({ length: rows * width }, () => rand() * 2 - 1);
  // Most ids in range, a few past either end, as a corrupt input would give.
  const ids = Int32Array.from({ length: rows }, (_, r) => (r % 97 === 0 ? segments + 3 : r % 89 === 0 ? -1 : Math.floor(rand() * segments)));
  const got = tf.tidy(() => tf.unsortedSegmentSum(tf.tensor2d(xs, [rows, width]), tf.tensor1d(ids, 'int32'), segments).arraySync() as number[][]);
  const want = Array.from({ length: segments }, () => new Float64Array(width));
  for (let r = 0; r < rows; r++) {
    const s = ids[r]!;
    if (s < 0 || s >= segments) continue;
    for (let c = 0; c < width; c++) want[s]![c]! += xs[r * width + c]!;
  }
  for (let s = 0; s < segments; s++) for (let c = 0; c < width; c++) assert.equal(got[s]![c], Math.fround(want[s]![c]!), `segment ${s}, column ${c}`);
  // An embedding's gradient through a model runs on it: the same sums as the definition.
  const table = tf.variable(tf.randomNormal([segments, width], 0, 1, 'float32', 2));
  const grads = tf.grad((t: tf.Tensor) => tf.sum(tf.gather(t, tf.tensor1d([1, 1, 5, 27], 'int32'))))(table);
  const rowsOf = grads.arraySync() as number[][];
  assert.deepEqual([rowsOf[1]![0], rowsOf[5]![0], rowsOf[27]![0], rowsOf[0]![0]], [2, 1, 1, 0]);
  tf.dispose([table, grads]);
});
