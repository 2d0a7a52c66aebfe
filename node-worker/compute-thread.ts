/**
 * The Node worker's compute thread (worker_threads): tfjs, its backend and the replicas
 * live here, so the worker's event loop answers the server's pings and the data channels
 * while a step computes. Started by node-compute.ts.
 */
import { parentPort } from 'node:worker_threads';
import { serveCompute } from '../shared/compute/thread-host';
import { selectNodeBackend } from './node-backend';

const port = parentPort;
if (!port) throw new Error('node-worker/compute-thread.ts runs as a worker thread (node-compute.ts starts it)');
serveCompute({ post: (message, transfer) => port.postMessage(message, transfer), onMessage: (handler) => port.on('message', handler) }, selectNodeBackend);
