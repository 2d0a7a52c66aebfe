/**
 * The Node worker's TensorFlow.js backend: WebGPU through Dawn (the `webgpu` package) when
 * a Vulkan adapter exists, as on a lab machine with a real GPU; otherwise WebAssembly
 * (tfjs-backend-wasm, 2.8–4.5× the CPU backend here: bench/wasm-cpu.md); the CPU
 * backend last, or when asked for.
 */
import * as tf from '@tensorflow/tfjs';
import type { Backend } from '../shared/protocol';
import { describeAdapter } from '../shared/compute/models';
import { startWasmBackend } from '../shared/compute/wasm-backend';
import { createRequire } from 'node:module';
import path from 'node:path';

export interface NodeBackendChoice {
  backend: Backend;
  adapter: string | undefined;
  /** Why WebGPU is not in use, when it is not. */
  webgpuUnavailable: string | null;
}

/** Dawn for Node: an optional package, so a machine without it trains on the CPU and is told what to install. */
const WEBGPU_PACKAGE = 'webgpu';

async function tryWebgpu(): Promise<{ adapter: string | undefined } | string> {
  let dawn: typeof import('webgpu');
  try {
    dawn = await import('webgpu');
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    if (e.code === 'ERR_MODULE_NOT_FOUND' && e.message.includes(`'${WEBGPU_PACKAGE}'`)) return `the optional package ${WEBGPU_PACKAGE} is not installed (npm install ${WEBGPU_PACKAGE})`;
    throw err;
  }
  const { create, globals } = dawn;
  Object.assign(globalThis, globals);
  const gpu = create([]);
  const adapter = await gpu.requestAdapter();
  if (!adapter) return 'no WebGPU adapter (Dawn found no Vulkan device)';
  // tfjs-backend-webgpu looks for navigator.gpu; Node's navigator (Node 21 and later) has
  // none of its own, and Node 20 has no navigator at all.
  const host = globalThis as { navigator?: object };
  host.navigator ??= {};
  Object.defineProperty(host.navigator, 'gpu', { value: gpu, configurable: true });
  await import('@tensorflow/tfjs-backend-webgpu');
  if (!(await tf.setBackend('webgpu'))) return 'the tfjs WebGPU backend did not initialise';
  return { adapter: describeAdapter((adapter as unknown as { info?: Record<string, string> }).info) };
}

/** The WASM backend's binaries, in its package's own folder. */
function wasmBinaries(): string {
  return `${path.dirname(createRequire(import.meta.url).resolve('@tensorflow/tfjs-backend-wasm/package.json'))}/dist/`;
}

/** `preferred` first (--backend); then WebGPU, WebAssembly and the CPU, in that order. */
export async function selectNodeBackend(preferred: Backend | null): Promise<NodeBackendChoice> {
  let reason = `the ${preferred} backend was requested`;
  if (preferred === null || preferred === 'webgpu') {
    try {
      const result = await tryWebgpu();
      if (typeof result !== 'string') return { backend: 'webgpu', adapter: result.adapter, webgpuUnavailable: null };
      reason = result;
    } catch (err) {
      reason = `WebGPU failed to load: ${(err as Error).message}`;
    }
  }
  if (preferred !== 'cpu') {
    let wasm: Awaited<ReturnType<typeof startWasmBackend>>;
    try {
      wasm = await startWasmBackend(wasmBinaries());
    } catch (err) {
      // A missing package throws in resolve, before the backend's own checks.
      wasm = { unavailable: `it failed: ${(err as Error).message}` };
    }
    if ('adapter' in wasm) return { backend: 'wasm', adapter: wasm.adapter, webgpuUnavailable: reason };
    reason = `${reason}; WebAssembly is not available either: ${wasm.unavailable}`;
  }
  await tf.setBackend('cpu');
  await tf.ready();
  return { backend: 'cpu', adapter: undefined, webgpuUnavailable: reason };
}
