/**
 * TensorFlow.js's WebAssembly backend, for a device with neither WebGPU nor WebGL: a tab on
 * an old laptop or a locked-down Chromebook, and a Node worker without a Vulkan GPU. It
 * steps every model here 2.8–4.5× faster than the CPU backend (bench/wasm-cpu.md). It lacks two
 * gradient kernels the tasks' models need (a convolution's filter gradient, an embedding's),
 * which come from cpu-kernels.ts. The package is loaded only when this backend is tried.
 */
import * as tf from '@tensorflow/tfjs';
import { useWasmKernels } from './cpu-kernels';

export const WASM_PACKAGE = '@tensorflow/tfjs-backend-wasm';

/**
 * Starts the WASM backend, its binaries fetched from `wasmPaths` (a folder's URL or path,
 * ending in '/'). Resolves with a description (SIMD, threads) once it is the backend, or
 * with why it could not start.
 */
export async function startWasmBackend(wasmPaths: string): Promise<{ adapter: string } | { unavailable: string }> {
  let wasm: typeof import('@tensorflow/tfjs-backend-wasm');
  try {
    wasm = await import('@tensorflow/tfjs-backend-wasm');
  } catch (err) {
    return { unavailable: `the package ${WASM_PACKAGE} did not load (${(err as Error).message})` };
  }
  wasm.setWasmPaths(wasmPaths);
  useWasmKernels();
  if (!(await tf.setBackend('wasm'))) return { unavailable: 'the tfjs WASM backend did not initialise' };
  await tf.ready();
  const simd = await tf.env().getAsync('WASM_HAS_SIMD_SUPPORT');
  const threads = wasm.getThreadsCount();
  return { adapter: `WebAssembly${simd ? ' SIMD' : ''}, ${threads} thread${threads === 1 ? '' : 's'}` };
}
