/**
 * Gradient kernels in plain JavaScript for TensorFlow.js's CPU and WASM backends, the ones
 * Node workers and tabs without WebGPU or WebGL train on: a convolution's filter gradient,
 * and an embedding's.
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
 *
 * tfjs-backend-wasm has neither kernel, so without them it cannot train a convolutional
 * model or one with an embedding: the same code is registered there (useWasmKernels), reading its inputs from
 * the WASM heap and writing its output there. What it cannot do (channels-first data, other
 * dtypes) is an ERR_BAD_DATA there, not a wrong answer.
 */
import * as tf from '@tensorflow/tfjs';
import { WebringError } from '../protocol/errors';

/** What tfjs hands a kernel: its inputs, the backend that owns their data, and its attributes. */
interface KernelArgs {
  inputs: Record<string, tf.TensorInfo>;
  backend: unknown;
  attrs: Record<string, unknown>;
}

type KernelFunc = (args: KernelArgs) => tf.TensorInfo;

/** How a kernel reads its inputs' values and makes its float32 output, on one backend. */
interface KernelIo {
  read(backend: unknown, info: tf.TensorInfo): ArrayLike<number>;
  output(backend: unknown, shape: number[], values: Float32Array): tf.TensorInfo;
}

/** The CPU backend keeps each tensor's values as a typed array in its data map. */
const CPU_IO: KernelIo = {
  read: (backend, info) => (backend as { data: { get(id: unknown): { values: ArrayLike<number> } } }).data.get(info.dataId).values,
  output: (backend, shape, values) => (backend as { makeTensorInfo(s: number[], d: tf.DataType, v: Float32Array): tf.TensorInfo }).makeTensorInfo(shape, 'float32', values),
};

/** The WASM backend's values live on its heap: readSync copies them out, makeOutput copies the result in. */
const WASM_IO: KernelIo = {
  read: (backend, info) => (backend as { readSync(id: unknown): ArrayLike<number> }).readSync(info.dataId),
  output: (backend, shape, values) => (backend as { makeOutput(s: number[], d: tf.DataType, offset?: number, v?: Float32Array): tf.TensorInfo }).makeOutput(shape, 'float32', undefined, values),
};

type JsKernel = (args: KernelArgs, io: KernelIo, fallback: KernelFunc) => tf.TensorInfo;
const JS_KERNELS: Record<string, JsKernel> = { Conv2DBackpropFilter: conv2dBackpropFilter, UnsortedSegmentSum: segmentSum };

let cpuInstalled = false;

/** Replaces the CPU backend's kernels above once per process; later calls do nothing. */
export function useFastCpuKernels(): void {
  if (cpuInstalled) return;
  // The CPU backend registers its kernels when @tensorflow/tfjs is imported; without it there is nothing to speed up.
  if (!tf.getKernel('Conv2DBackpropFilter', 'cpu')) return;
  cpuInstalled = true;
  for (const [kernelName, kernel] of Object.entries(JS_KERNELS)) {
    const original = tf.getKernel(kernelName, 'cpu');
    if (!original) continue;
    const fallback = original.kernelFunc as unknown as KernelFunc;
    tf.unregisterKernel(kernelName, 'cpu');
    tf.registerKernel({ kernelName, backendName: 'cpu', kernelFunc: ((args: KernelArgs) => kernel(args, CPU_IO, fallback)) as unknown as tf.KernelFunc });
  }
}

/**
 * Registers the kernels above for the WASM backend where it has none of its own (call after
 * importing @tensorflow/tfjs-backend-wasm, which registers its kernels on import).
 */
export function useWasmKernels(): void {
  for (const [kernelName, kernel] of Object.entries(JS_KERNELS)) {
    if (tf.getKernel(kernelName, 'wasm')) continue;
    const unsupported: KernelFunc = () => {
      throw new WebringError('ERR_BAD_DATA', `the WASM backend's ${kernelName} takes channels-last float32 data only`);
    };
    tf.registerKernel({ kernelName, backendName: 'wasm', kernelFunc: ((args: KernelArgs) => kernel(args, WASM_IO, unsupported)) as unknown as tf.KernelFunc });
  }
}

/** dW[r, c, i, o] = Σ over batch and output positions of x[at the tap] · dy, for channels-last data. */
export function conv2dBackpropFilter(args: KernelArgs, io: KernelIo, fallback: KernelFunc): tf.TensorInfo {
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
  const xv = io.read(backend, x);
  const dyv = io.read(backend, dy);
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
  return io.output(backend, filterShape, Float32Array.from(sum));
}

/** out[s, …] = Σ over rows r with segmentIds[r] = s of x[r, …]; segmentIds covers x's leading dimensions. */
export function segmentSum(args: KernelArgs, io: KernelIo, fallback: KernelFunc): tf.TensorInfo {
  const { inputs, backend, attrs } = args;
  const x = inputs.x!;
  const ids = inputs.segmentIds!;
  const numSegments = attrs.numSegments as number;
  if (x.dtype !== 'float32' || ids.dtype !== 'int32') return fallback(args);
  const rows = ids.shape.reduce((a, b) => a * b, 1);
  const xv = io.read(backend, x);
  const iv = io.read(backend, ids);
  const width = rows === 0 ? 0 : xv.length / rows;
  const sum = new Float64Array(numSegments * width);
  for (let r = 0; r < rows; r++) {
    const s = iv[r]!;
    if (s < 0 || s >= numSegments) continue;
    const from = r * width;
    const to = s * width;
    for (let c = 0; c < width; c++) sum[to + c]! += xv[from + c]!;
  }
  return io.output(backend, [numSegments, ...x.shape.slice(ids.shape.length)], Float32Array.from(sum));
}
