/**
 * The Node worker's compute: by default a worker thread of its own (compute-thread.ts), so
 * that a step which computes for seconds never stops the worker answering the server's
 * pings; `--compute main` keeps tfjs in the worker's own thread, as before, for comparison.
 */
import { Worker } from 'node:worker_threads';
import type { Backend } from '../shared/protocol';
import { LocalCompute, type Compute, type ComputePlace } from '../shared/compute/compute';
import { ThreadCompute } from '../shared/compute/thread-compute';
import { selectNodeBackend } from './node-backend';

export async function openNodeCompute(preferred: Backend | null, place: ComputePlace = 'thread'): Promise<Compute> {
  if (place === 'main') return new LocalCompute(await selectNodeBackend(preferred));
  // A plain module first: it registers tsx in the thread, then loads compute-thread.ts.
  const thread = new Worker(new URL('./compute-thread-boot.mjs', import.meta.url));
  // The worker's own life is its socket's; the compute thread alone keeps no process alive.
  thread.unref();
  return ThreadCompute.open(
    {
      post: (message, transfer) => thread.postMessage(message, transfer),
      onMessage: (handler) => thread.on('message', handler),
      onExit: (handler) => {
        thread.on('error', (err) => handler(err.message));
        thread.on('exit', (code) => handler(`exit code ${code}`));
      },
      terminate: () => void thread.terminate(),
    },
    preferred,
  );
}
