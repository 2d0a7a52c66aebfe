/**
 * Faster gradients for TensorFlow.js's CPU backend, the one Node workers and tabs without
 * WebGPU or WebGL train on: a convolution's filter gradient, and an embedding's.
 *
 * tfjs-backend-cpu's own Conv2DBackpropFilter reads every element through
 * TensorBuffer.get(), which recomputes a flat index from four coordinates at every multiply:
 * 4.3 s of a 4.5 s step for a small convolutional model at batch 64 on this project's build machine, where
 * the forward convolution takes 0.1 s. This one walks the typed arrays directly, output
 * position by output position, and skips the zeros ReLU leaves in its input; it sums in
 * float64, as the original does, and stores float32. Channels-first data goes to the
 * original kernel.
 *
 * tfjs-backend-cpu's UnsortedSegmentSum (an embedding's gradient) makes one equal, cast,
 * multiply and sum pass over the whole gradient per segment: 28 passes, 142 ms of a 245 ms
 * step of the names task's model at batch 192. This one adds each row into its segment once,
 * in float64, and stores float32 (113 ms a step then). Rows whose id is outside
 * [0, numSegments) are dropped, as TensorFlow drops them; other dtypes go to the original.
 */
import * as tf from '@tensorflow/tfjs';

/** What tfjs hands a kernel: its inputs, the backend that owns their data, and its attributes. */
interface KernelArgs {
  inputs: Record<string, tf.TensorInfo>;
  backend: { data: { get(id: unknown): { values: unknown } }; makeTensorInfo(shape: number[], dtype: tf.DataType, values: Float32Array): tf.TensorInfo };
  attrs: Record<string, unknown>;
}

type KernelFunc = (args: KernelArgs) => tf.TensorInfo;

const BACKEND = 'cpu';
const FASTER: Record<string, (args: KernelArgs, fallback: KernelFunc) => tf.TensorInfo> = {
  Conv2DBackpropFilter: (args, fallback) => conv2dBackpropFilter(args, fallback),
  UnsortedSegmentSum: (args, fallback) => segmentSum(args, fallback),
};

let installed = false;

/** Replaces the CPU backend's kernels above once per process; later calls do nothing. */
export function useFastCpuKernels(): void {
  if (installed) return;
  // The CPU backend registers its kernels when @tensorflow/tfjs is imported; without it there is nothing to speed up.
  if (!tf.getKernel('Conv2DBackpropFilter', BACKEND)) return;
  installed = true;
  for (const [kernelName, faster] of Object.entries(FASTER)) {
    const original = tf.getKernel(kernelName, BACKEND);
    if (!original) continue;
    const fallback = original.kernelFunc as unknown as KernelFunc;
    tf.unregisterKernel(kernelName, BACKEND);
    tf.registerKernel({ kernelName, backendName: BACKEND, kernelFunc: ((args: KernelArgs) => faster(args, fallback)) as unknown as tf.KernelFunc });
  }
}

/** dW[r, c, i, o] = Σ over batch and output positions of x[at the tap] · dy, for channels-last data. */
export function conv2dBackpropFilter(args: KernelArgs, fallback: KernelFunc): tf.TensorInfo {
  const { inputs, backend, attrs } = args;
  const x = inputs.x!;
  const dy = inputs.dy!;
  const filterShape = attrs.filterShape as [number, number, number, number];
  const dataFormat = (attrs.dataFormat as 'NHWC' | 'NCHW' | undefined) ?? 'NHWC';
  if (dataFormat !== 'NHWC' || x.dtype !== 'float32' || dy.dtype !== 'float32') return fallback(args);
  const info = tf.backend_util.computeConv2DInfo(
    x.shape as [number, number, number, number],
    filterShape,
    attrs.strides as number | [number, number],
    1,
    attrs.pad as 'valid' | 'same' | number,
    attrs.dimRoundingMode as 'floor' | 'round' | 'ceil' | undefined,
    false,
    'channelsLast',
  );
  const xv = backend.data.get(x.dataId).values as Float32Array;
  const dyv = backend.data.get(dy.dataId).values as Float32Array;
  const { batchSize, inHeight, inWidth, inChannels, outHeight, outWidth, outChannels, strideHeight, strideWidth, filterHeight, filterWidth } = info;
  const top = info.padInfo.top;
  const left = info.padInfo.left;
  const sum = new Float64Array(filterHeight * filterWidth * inChannels * outChannels);
  for (let b = 0; b < batchSize; b++) {
    for (let yr = 0; yr < outHeight; yr++) {
      for (let yc = 0; yc < outWidth; yc++) {
        const dyAt = ((b * outHeight + yr) * outWidth + yc) * outChannels;
        for (let wr = 0; wr < filterHeight; wr++) {
          const xr = yr * strideHeight + wr - top;
          if (xr < 0 || xr >= inHeight) continue;
          for (let wc = 0; wc < filterWidth; wc++) {
            const xc = yc * strideWidth + wc - left;
            if (xc < 0 || xc >= inWidth) continue;
            const xAt = ((b * inHeight + xr) * inWidth + xc) * inChannels;
            const wAt = (wr * filterWidth + wc) * inChannels;
            for (let i = 0; i < inChannels; i++) {
              const v = xv[xAt + i]!;
              if (v === 0) continue;
              const out = (wAt + i) * outChannels;
              for (let o = 0; o < outChannels; o++) sum[out + o] = sum[out + o]! + v * dyv[dyAt + o]!;
            }
          }
        }
      }
    }
  }
  return backend.makeTensorInfo(filterShape, 'float32', Float32Array.from(sum));
}

/** out[s, …] = Σ over rows r with segmentIds[r] = s of x[r, …]; segmentIds covers x's leading dimensions. */
export function segmentSum(args: KernelArgs, fallback: KernelFunc): tf.TensorInfo {
  const { inputs, backend, attrs } = args;
  const x = inputs.x!;
  const ids = inputs.segmentIds!;
  const numSegments = attrs.numSegments as number;
  if (x.dtype !== 'float32' || ids.dtype !== 'int32') return fallback(args);
  const rows = ids.shape.reduce((a, b) => a * b, 1);
  const xv = backend.data.get(x.dataId).values as Float32Array;
  const iv = backend.data.get(ids.dataId).values as Int32Array;
  const width = rows === 0 ? 0 : xv.length / rows;
  const sum = new Float64Array(numSegments * width);
  for (let r = 0; r < rows; r++) {
    const s = iv[r]!;
    if (s < 0 || s >= numSegments) continue;
    const from = r * width;
    const to = s * width;
    for (let c = 0; c < width; c++) sum[to + c]! += xv[from + c]!;
  }
  return backend.makeTensorInfo([numSegments, ...x.shape.slice(ids.shape.length)], 'float32', Float32Array.from(sum));
}
