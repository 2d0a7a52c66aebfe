/**
 * The tab's compute thread: a dedicated Web Worker that owns TensorFlow.js, its backend
 * (WebGPU, or WebGL on an OffscreenCanvas, or the CPU) and the replicas. The page keeps
 * socket.io, the data channels, the collectives and the UI, so a step that computes for
 * seconds freezes neither the pad nor the class's pings. Started by open-compute.ts.
 */
import './zod-jitless';
import { serveCompute } from '../shared/compute/thread-host';
import { selectBackend } from './backend';

/** The dedicated worker's global scope, as far as this file uses it (the project's lib is the DOM's). */
const scope = globalThis as unknown as {
  postMessage(message: unknown, transfer: Transferable[]): void;
  addEventListener(type: 'message', listener: (event: MessageEvent) => void): void;
};

serveCompute(
  {
    post: (message, transfer) => scope.postMessage(message, transfer),
    onMessage: (handler) => scope.addEventListener('message', (event) => handler(event.data)),
  },
  selectBackend,
);
