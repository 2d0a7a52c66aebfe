/**
 * The heavy half of the student page, loaded after the first paint: the compute thread
 * (TensorFlow.js and its backends, in a Web Worker), and the training worker, which streams its examples from the data service. The page itself (form, status, chart)
 * paints without any of it.
 */
import { deviceClassOf } from './device-class';
import { io, type Socket } from 'socket.io-client';
import { BACKENDS, type Backend, type ClientToServerEvents, type CollectSetting, type MemberInfo, type ServerToClientEvents } from '../shared/protocol';
import type { OwnExamples } from '../shared/data/own-examples';
import type { OwnRun } from '../shared/data/run-data';
import type { ErrorBody } from '../shared/protocol/errors';
import { TrainingWorker } from '../shared/training/worker';
import { RECONNECT_OPTIONS } from '../shared/training/signaling-session';
import type { WorkerStatus } from '../shared/training/worker-status';
import type { FaultInjector } from '../shared/training/faults';
import { openCompute } from './open-compute';
import type { ComputePlace } from '../shared/compute/compute';
import { createBrowserPeerFactory } from './browser-peer';
import { IceConfigHolder, ICE_REQUEST_TIMEOUT_MS } from '../shared/network/ice-config';
import { indexedDbCheckpoints } from './indexeddb-checkpoints';

export interface SessionOptions {
  /** The page's `?backend=` value, if any: that backend is tried first. */
  preferredBackend: string | null;
  /** Where the maths runs: the tab's compute thread (the default), or the page (`?compute=main`). */
  compute: ComputePlace;
  /** Faults to play (test builds only). */
  faults?: FaultInjector;
  onStatus(status: WorkerStatus): void;
  onServerError(error: ErrorBody): void;
  /** Why WebGPU is not in use, when it is not. */
  onFallback(reason: string, backend: Backend): void;
  /** What the room collects examples for (the join reply, then each change). */
  onCollect(collect: CollectSetting | null): void;
  /** This tab's own examples for a run's classes, or null. */
  ownExamples(run: OwnRun): OwnExamples | null;
  /** The class's hub in each generation this tab hears, or null: whether a hub sums the gradients. */
  onHub(hub: MemberInfo | null): void;
}

export async function startSession(options: SessionOptions): Promise<TrainingWorker> {
  const requested = options.preferredBackend;
  const preferred = requested !== null && (BACKENDS as readonly string[]).includes(requested) ? (requested as Backend) : null;
  const log = (m: string) => console.info(`[webring] ${m}`);
  const compute = await openCompute(preferred, options.compute, log);
  const choice = compute.info;
  if (choice.webgpuUnavailable) options.onFallback(choice.webgpuUnavailable, choice.backend);
  // It connects when the student joins: the handshake carries the room and its join code.
  const socket: Socket<ServerToClientEvents, ClientToServerEvents> = io({ transports: ['websocket'], autoConnect: false, ...RECONNECT_OPTIONS });
  const ice = new IceConfigHolder({ request: () => socket.timeout(ICE_REQUEST_TIMEOUT_MS).emitWithAck('ice:config'), log });
  socket.on('ring:generation', (g) => options.onHub(g.hub ?? null));
  return new TrainingWorker({
    socket,
    peerFactory: createBrowserPeerFactory(() => ice.rtcConfiguration()),
    onIceConfig: (raw) => ice.update(raw),
    compute,
    kind: 'browser',
    device: deviceClassOf(navigator as Navigator & { userAgentData?: { mobile: boolean } }),
    serverUrl: location.origin,
    localCheckpoints: indexedDbCheckpoints,
    onStatus: options.onStatus,
    onServerError: options.onServerError,
    onCollect: options.onCollect,
    ownExamples: options.ownExamples,
    log,
    faults: options.faults,
  });
}
