/** The student page: join a room, become a ring worker, show what this tab contributes. */
import { io, type Socket } from 'socket.io-client';
import { BACKENDS, type Backend, type ClientToServerEvents, type ServerToClientEvents } from '../shared/protocol';
import { TrainingWorker, type WorkerStatus } from '../shared/worker';
import { toWebringError } from '../shared/errors';
import { selectBackend } from './backend';
import { browserPeerFactory } from './browser-peer';
import { fetchMnist } from './dataset';
import { indexedDbCheckpoints } from './indexeddb-checkpoints';

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;
const params = new URLSearchParams(location.search);
const roomInput = $<HTMLInputElement>('room');
const nameInput = $<HTMLInputElement>('name');
const joinButton = $<HTMLButtonElement>('join');
const statusEl = $('worker-status');
roomInput.value = params.get('room') ?? 'class';
nameInput.value = params.get('name') ?? '';

/** Test-only query flags: play a slow laptop, or backend drift. Never set by the UI. */
const intParam = (name: string): number | undefined => {
  const v = params.get(name);
  return v !== null && /^\d+$/.test(v) ? Number(v) : undefined;
};
const debug = { slowStepMs: intParam('debugSlowMs'), driftAtStep: intParam('debugDriftAtStep') };

const requested = params.get('backend');
const preferredBackend: Backend | null = (BACKENDS as readonly string[]).includes(requested ?? '') ? (requested as Backend) : null;

const fmt = (v: number | null, digits: number) => (v === null ? '–' : v.toFixed(digits));

function showError(message: string): void {
  const el = $('error');
  el.textContent = message;
  el.classList.remove('hidden');
}

function render(s: WorkerStatus): void {
  Object.assign(statusEl.dataset, {
    state: s.state,
    rank: s.rank === null ? '' : String(s.rank),
    index: s.index === null ? '' : String(s.index),
    chief: String(s.chief),
    step: String(s.step),
    backend: s.backend,
    weightsHash: s.weightsHash ?? '',
    loss: s.loss === null ? '' : String(s.loss),
    gradNorm: s.gradNorm === null ? '' : String(s.gradNorm),
    numTensors: String(s.numTensors),
    generation: String(s.generation),
    memberId: s.memberId ?? '',
    connected: String(s.connected),
    resumedFrom: s.resumedFrom ?? '',
    resumedHash: s.resumedHash ?? '',
    lastLocalCheckpoint: s.lastLocalCheckpointStep === null ? '' : String(s.lastLocalCheckpointStep),
    lastServerCheckpoint: s.lastServerCheckpointStep === null ? '' : String(s.lastServerCheckpointStep),
    worldSize: String(s.worldSize),
    computeMs: s.computeMs.toFixed(1),
    lastSyncMs: s.lastSyncMs === null ? '' : s.lastSyncMs.toFixed(0),
    joinMs: s.joinMs === null ? '' : s.joinMs.toFixed(0),
    resyncs: String(s.resyncs),
  });
  if (s.state === 'dropped') {
    // The ring let this tab go for being too slow; it may try again.
    joinButton.disabled = false;
    joinButton.textContent = 'Join again';
  }
  $('s-state').textContent =
    s.state + (s.error ? ` (${s.error.code}: ${s.error.message})` : '') + (s.connected ? '' : ' (server connection lost)');
  $('s-backend').textContent = s.backend;
  $('s-rank').textContent = s.rank === null ? '–' : `${s.rank} of ${s.worldSize}${s.chief ? ' (chief)' : ''}`;
  $('s-step').textContent = s.totalSteps ? `${s.step} / ${s.totalSteps} (epoch ${s.epoch + 1})` : String(s.step);
  $('s-loss').textContent = fmt(s.loss, 4);
  $('s-accuracy').textContent = s.testAccuracy === null ? '–' : `${(s.testAccuracy * 100).toFixed(1)} %`;
  $('s-eps').textContent = fmt(s.examplesPerSec, 0);
  $('s-hash').textContent = s.weightsHash ?? '–';
  $('s-sync').textContent = s.lastSyncMs === null ? '–' : `${s.lastSyncMs.toFixed(0)} ms (resynced ${s.resyncs}×)`;
}

let worker: TrainingWorker | null = null;

async function join(event: Event): Promise<void> {
  event.preventDefault();
  joinButton.disabled = true;
  if (worker) {
    // Joining again after being dropped: same connection, a new membership.
    try {
      await worker.join(roomInput.value.trim(), nameInput.value.trim());
      $('error').classList.add('hidden');
    } catch (err) {
      const e = toWebringError(err);
      showError(`Could not join: ${e.message} (${e.code})`);
      joinButton.disabled = false;
    }
    return;
  }
  try {
    const [choice, dataset] = await Promise.all([selectBackend(preferredBackend), fetchMnist()]);
    if (choice.webgpuUnavailable) {
      const notice = $('webgpu-notice');
      notice.textContent = `WebGPU is unavailable (${choice.webgpuUnavailable}). This tab trains with ${choice.backend.toUpperCase()} instead.`;
      notice.classList.remove('hidden');
    }
    const socket: Socket<ServerToClientEvents, ClientToServerEvents> = io({ transports: ['websocket'] });
    worker = new TrainingWorker({
      socket,
      peerFactory: browserPeerFactory,
      dataset,
      backend: choice.backend,
      kind: 'browser',
      adapter: choice.adapter,
      serverUrl: location.origin,
      localCheckpoints: indexedDbCheckpoints,
      onStatus: render,
      log: (m) => console.info(`[webring] ${m}`),
      debug,
    });
    const self = worker;
    // Closing or navigating away says goodbye, so the ring re-forms at once instead of
    // waiting for the server to miss this tab's heartbeats.
    addEventListener('pagehide', () => self.leave());
    await worker.join(roomInput.value.trim(), nameInput.value.trim());
    roomInput.disabled = true;
    nameInput.disabled = true;
  } catch (err) {
    const e = toWebringError(err);
    showError(`Could not join: ${e.message} (${e.code})`);
    joinButton.disabled = false;
  }
}

$('join-form').addEventListener('submit', (e) => void join(e));
