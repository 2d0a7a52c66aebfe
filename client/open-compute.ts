/**
 * The tab's compute: a dedicated Web Worker (compute-thread.ts) by default. `?compute=main`
 * keeps tfjs on the page, as before the compute thread, for the benchmarks' comparison; a
 * browser that cannot start the worker also computes on the page, and says so.
 */
import type { Backend } from '../shared/protocol';
import { LocalCompute, type Compute, type ComputePlace } from '../shared/compute/compute';
import { ThreadCompute } from '../shared/compute/thread-compute';

export async function openCompute(preferred: Backend | null, place: ComputePlace, log: (message: string) => void): Promise<Compute> {
  if (place === 'thread') {
    try {
      const worker = new Worker(new URL('./compute-thread.ts', import.meta.url), { type: 'module', name: 'webring compute' });
      return await ThreadCompute.open(
        {
          post: (message, transfer) => worker.postMessage(message, transfer),
          onMessage: (handler) => worker.addEventListener('message', (event) => handler(event.data)),
          onExit: (handler) => worker.addEventListener('error', (event) => handler(event.message || 'the worker failed to load')),
          terminate: () => worker.terminate(),
        },
        preferred,
      );
    } catch (err) {
      log(`the compute thread did not start (${(err as Error).message}); computing on the page`);
    }
  }
  // Loaded only here: the backends' module registers WebGPU with tfjs, which would then be
  // the page's own default before it is ready (a page of the library's user builds its model
  // on the page, synchronously, while the maths runs in the thread).
  const { selectBackend } = await import('./backend');
  return new LocalCompute(await selectBackend(preferred));
}
