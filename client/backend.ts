/**
 * Picks the fastest tfjs backend that can train: WebGPU, then WebGL, then WebAssembly
 * (shared/compute/wasm-backend.ts, 2.8–4.5× the CPU backend's speed), then the CPU.
 * It runs in the tab's compute thread (a dedicated Web Worker, compute-thread.ts), or on the
 * page when the tab computes there: so it uses only what both have (navigator.gpu,
 * OffscreenCanvas, isSecureContext), never the document.
 */
import * as tf from '@tensorflow/tfjs';
import '@tensorflow/tfjs-backend-webgpu';
import type { Backend } from '../shared/protocol';
import { describeAdapter } from '../shared/compute/models';
import { startWasmBackend } from '../shared/compute/wasm-backend';
import type { BackendInfo } from '../shared/compute/compute';

const ORDER: Backend[] = ['webgpu', 'webgl', 'wasm', 'cpu'];
/**
 * Where the page's server serves the WASM backend's binaries: the client build copies them
 * there (vite.config.ts). A program that serves its own pages serves them there too, or its
 * tabs without WebGPU and WebGL train on the CPU backend.
 */
export const WASM_BINARIES_PATH = '/tfjs-wasm/';

async function webgpuAdapterName(): Promise<string | undefined> {
  type AdapterWithInfo = { info?: Record<string, string> } | null;
  const gpu = (navigator as unknown as { gpu?: { requestAdapter(): Promise<AdapterWithInfo> } }).gpu;
  const adapter = await gpu?.requestAdapter();
  return describeAdapter(adapter?.info);
}

function webglRendererName(): string | undefined {
  const gl = new OffscreenCanvas(1, 1).getContext('webgl2');
  const ext = gl?.getExtension('WEBGL_debug_renderer_info');
  return gl && ext ? String(gl.getParameter(ext.UNMASKED_RENDERER_WEBGL)) : undefined;
}

/** Makes `backend` tfjs's backend: its adapter's description, or null when it did not start. */
async function start(backend: Backend): Promise<{ adapter: string | undefined } | null> {
  if (backend === 'wasm') {
    const wasm = await startWasmBackend(WASM_BINARIES_PATH);
    if ('adapter' in wasm) return wasm;
    console.warn(`[webring] backend wasm failed: ${wasm.unavailable}`);
    return null;
  }
  if (!(await tf.setBackend(backend))) return null;
  await tf.ready();
  return { adapter: backend === 'webgpu' ? await webgpuAdapterName() : backend === 'webgl' ? webglRendererName() : undefined };
}

/** `preferred` (from ?backend=) is tried first; the others follow in order. */
export async function selectBackend(preferred: Backend | null): Promise<BackendInfo> {
  const order = preferred ? [preferred, ...ORDER.filter((b) => b !== preferred)] : ORDER;
  let webgpuUnavailable: string | null = null;
  if (!('gpu' in navigator)) {
    webgpuUnavailable = globalThis.isSecureContext
      ? 'this browser has no WebGPU'
      : 'WebGPU needs a secure context (https or localhost); this page was opened over plain http';
  }
  for (const backend of order) {
    if (backend === 'webgpu' && webgpuUnavailable) continue;
    try {
      const started = await start(backend);
      if (started) {
        if (backend !== 'webgpu' && !webgpuUnavailable) webgpuUnavailable = preferred === backend ? `${backend} was requested` : 'WebGPU failed to start';
        return { backend, adapter: started.adapter?.slice(0, 200), webgpuUnavailable };
      }
    } catch (err) {
      console.warn(`[webring] backend ${backend} failed:`, err);
    }
    if (backend === 'webgpu') webgpuUnavailable = 'no WebGPU adapter was found';
  }
  throw new Error('no TensorFlow.js backend could start');
}
