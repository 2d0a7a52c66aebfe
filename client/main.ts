/**
 * The student page. What the first paint needs (the form and the status panel) is in this
 * module; TensorFlow.js and the training worker load in the background after
 * it (student-session.ts), the chart and the drawing pad once the student has joined.
 */
import './zod-jitless';
import type { WorkerStatus } from '../shared/training/worker-status';
import type { MemberInfo, RoomMetrics, ServerInfo } from '../shared/protocol';
import { BACKEND_LABELS } from '../shared/protocol/vocabulary';
import { toWebringError, type ErrorCode } from '../shared/protocol/errors';
import { explainShare } from '../shared/training/share-balancer';
import { showSecureContextNotice } from './secure-context';
import { detectAbilities, showAbilities } from './device-abilities';
import { normalizeJoinCode } from '../shared/protocol/join-code';
import { describeRefusal } from './plain-errors';
import { faultsFromFlags, type FaultInjector } from '../shared/training/faults';
import { CollectPanel } from './collect-panel';
import type { TryPanel } from '../shared/tasks/pages';
import { DEFAULT_TASK, findTask } from '../shared/tasks/registry';

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;
const params = new URLSearchParams(location.search);
const roomInput = $<HTMLInputElement>('room');
const nameInput = $<HTMLInputElement>('name');
const codeInput = $<HTMLInputElement>('code');
const joinButton = $<HTMLButtonElement>('join');
const statusEl = $('worker-status');
const banner = $('state-banner');
roomInput.value = params.get('room') ?? '';
if (!params.has('room')) void fillDefaultRoom();
nameInput.value = params.get('name') ?? '';
// The class link carries the join code; a student who typed the address types it.
codeInput.value = params.get('code') ?? '';

/**
 * The fault flags (a slow laptop, backend drift, a hostile tab) exist only in the test build
 * (`vite build --mode test`): in any other build the constant is false and the bundler drops
 * this code, so no page a student opens can be told to misbehave.
 */
function faultsFromQuery(): FaultInjector | undefined {
  if (!__WEBRING_FAULT_FLAGS__) return undefined;
  const intParam = (name: string): number | undefined => {
    const v = params.get(name);
    return v !== null && /^\d+$/.test(v) ? Number(v) : undefined;
  };
  return faultsFromFlags({ slowMs: intParam('debugSlowMs'), slowPerExampleMs: intParam('debugSlowPerExampleMs'), driftAtStep: intParam('debugDriftAtStep'), poisonAtStep: intParam('debugPoisonAtStep') });
}

/** The shared loss curve is refreshed from the room's metrics this often. */
const METRICS_POLL_MS = 2_000;

void showSecureContextNotice($('secure-notice'));
// Before Join: what this browser lacks is said here, never found by a failed join.
void detectAbilities().then(({ abilities, secureKeysWhy }) => {
  if (secureKeysWhy) console.warn(`[webring] no secure runs on this device: ${secureKeysWhy}`);
  showAbilities($<HTMLDetailsElement>('abilities'), abilities);
});

/** A student who typed only the address gets the room the teacher's laptop printed. */
async function fillDefaultRoom(): Promise<void> {
  try {
    const res = await fetch('/api/info');
    if (!res.ok) return;
    const info = (await res.json()) as ServerInfo;
    if (!roomInput.value) roomInput.value = info.defaultRoom;
  } catch (err) {
    console.warn(`[webring] no default room: ${toWebringError(err).message}`);
  }
}
// Start fetching the heavy half at once; the page is already painted.
const session = import('./student-session');

const fmt = (v: number | null, digits: number) => (v === null ? '–' : v.toFixed(digits));
const percent = (v: number) => `${(v * 100).toFixed(v < 0.1 ? 1 : 0)} %`;

function showError(message: string): void {
  const el = $('error');
  el.textContent = message;
  el.classList.remove('hidden');
}

/** What leaves this tab when it trains, in the mode of the current run (secure aggregation or not). */
function privacyText(s: WorkerStatus): string {
  if (s.secureAggregation === null) return 'Nothing yet. When training starts, this says what the run sends.';
  // In local-steps mode what leaves is a round's change in weights, once per round: still an update that can give examples away.
  const update = s.localSteps === null ? 'update' : `update (the change from ${s.localSteps} steps on this device, once per round)`;
  if (s.secureAggregation) {
    return `Only the class's sum of updates leaves this device, masked: your classmates, the hub and the server each get random-looking numbers that cancel in the sum, and cannot read your ${update} or your examples from them. Public to the class: the sum, and how many examples, the loss and the time this device's steps took.`;
  }
  return `Your ${update} to the model leaves this device unmasked: your ring neighbour (and the hub, when it sums) receives it, and could reconstruct the examples you trained on from it. The examples themselves never leave this device.`;
}

/** One sentence a student understands, for each state the tab can be in. */
function bannerText(s: WorkerStatus): { key: string; text: string } {
  if (s.memberId && !s.connected && s.state !== 'dropped') {
    return { key: 'reconnecting', text: 'Reconnecting to the classroom server… the ring keeps training meanwhile.' };
  }
  switch (s.state) {
    case 'idle':
      return { key: 'idle', text: 'Type your name and press Join.' };
    case 'joining':
      return { key: 'joining', text: 'Joining the class…' };
    case 'waiting':
      return { key: 'waiting', text: 'Joined. Waiting to enter the ring: the class is mid-step and lets you in at the next step.' };
    case 'ready':
      return { key: 'waiting', text: `In the ring as rank ${s.rank} of ${s.worldSize}. Waiting for the teacher to press Start.` };
    case 'training':
      if (s.dataWait) return { key: 'data-wait', text: `Training is waiting for its examples: ${s.dataWait}.` };
      if (s.secureWait) return { key: 'secure-wait', text: 'Waiting for a third classmate: this run masks every update, and with only two, each would learn the other\'s from the sum.' };
      return { key: 'training', text: `Training: step ${s.step}${s.totalSteps ? ` of ${s.totalSteps}` : ''}${s.localSteps === null ? '' : `, round ${s.round}`}, together with ${Math.max(0, s.worldSize - 1)} other tab(s).` };
    case 'paused':
      return { key: 'paused', text: `Paused by the teacher after step ${s.step}. Training goes on when the teacher resumes.` };
    case 'done':
      return { key: 'done', text: `Done at step ${s.step}. Draw a digit below and see what the class's network thinks.` };
    case 'dropped':
      // Too slow: the worker's own words say whether it comes back by itself, and when (drops.ts).
      if (s.error?.code === 'ERR_DROPPED') return { key: 'dropped', text: `This device was too slow for the ring, so the class went on without it: ${s.error.message}` };
      return { key: 'dropped', text: DROPPED_TEXT[s.error?.code ?? 'ERR_DROPPED'] ?? DROPPED_TEXT.ERR_DROPPED! };
    case 'error':
      return { key: 'error', text: describeRefusal(s.error ?? { code: 'ERR_INTERNAL', message: 'unknown error' }, roomInput.value.trim()) };
  }
}

/** What the page says when the class let this device go, by the code it was told (shared/training/worker.ts). */
const DROPPED_TEXT: Partial<Record<ErrorCode, string>> = {
  ERR_DROPPED: 'This device was too slow for the ring, so the class went on without it. Press "Join again" to rejoin.',
  ERR_RING_UNREACHABLE: 'This device could not connect to its classmates (the network let no direct connection through), so the class went on without it. It tries again by itself.',
  ERR_TRAINING_FAILED: 'Training failed on this device, so the class went on without it. It joins again by itself.',
  ERR_PEER_MISBEHAVED: 'This device sent the ring data no honest device sends, so the class removed it. Press "Join again" to rejoin.',
};

/** The round, in a local-steps run: this tab trains `localSteps` steps alone, then the class averages once. */
function roundText(s: WorkerStatus): string {
  if (s.localSteps === null) return '';
  return ` · round ${s.round} (${s.localSteps} steps alone on this device, then the class averages)`;
}

/** The last epoch's held-out score: accuracy where the task tells classes apart, and the loss in nats. */
function heldOutText(s: WorkerStatus): string {
  if (s.testLoss === null) return '–';
  const target = findTask(s.task ?? '')?.target;
  const loss = `${s.testLoss.toFixed(3)} nats ${target === 'next-symbol' ? 'per character' : 'per example'}`;
  return target === 'class' && s.testAccuracy !== null ? `${percent(s.testAccuracy)} right · ${loss}` : loss;
}

function render(s: WorkerStatus): void {
  Object.assign(statusEl.dataset, {
    state: s.state,
    rank: s.rank === null ? '' : String(s.rank),
    index: s.index === null ? '' : String(s.index),
    chief: String(s.chief),
    step: String(s.step),
    round: String(s.round),
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
    lockStepMs: s.lockStepMs === null ? '' : s.lockStepMs.toFixed(0),
    switchPauseMs: s.switchPauseMs === null ? '' : s.switchPauseMs.toFixed(0),
    probeMsPerExample: s.probe ? String(s.probe.msPerExample) : '',
    resyncs: String(s.resyncs),
    errorCode: s.error?.code ?? '',
    dataWait: s.dataWait ?? '',
    secure: s.secureAggregation === null ? '' : String(s.secureAggregation),
    task: s.task ?? '',
  });
  showClasses(s.task, s.classes);
  const b = bannerText(s);
  banner.dataset.state = b.key;
  banner.textContent = b.text;
  if (s.state === 'dropped') {
    // The ring let this tab go for being too slow; it may try again.
    joinButton.disabled = false;
    joinButton.textContent = 'Join again';
  }
  $('s-state').textContent = s.state + (s.error ? ` (${s.error.code}: ${s.error.message})` : '') + (s.connected ? '' : ' (server connection lost)');
  $('s-backend').textContent = s.backend.toUpperCase() + (s.probe ? ` · ${s.probe.device}, ${s.probe.msPerExample.toFixed(2)} ms per example (measured before joining)` : '');
  $('s-rank').textContent = s.rank === null ? '–' : `${s.rank} of ${s.worldSize}${s.chief ? ' (chief: saves the checkpoints)' : ''}`;
  $('s-privacy').textContent = privacyText(s);
  $('s-neighbours').textContent = s.neighbours ? `receives from ${s.neighbours.left}, sends to ${s.neighbours.right}` : '–';
  $('s-step').textContent = (s.totalSteps ? `${s.step} / ${s.totalSteps} (epoch ${s.epoch + 1})` : String(s.step)) + roundText(s);
  $('s-examples').textContent = s.examplesProcessed.toLocaleString();
  const why = explainShare(s.speedVsMedian, s.batchShare * s.worldSize);
  $('s-share').textContent = s.batchShare > 0 ? `${percent(s.batchShare)}${why ? ` (your device is ${why})` : ''}` : '–';
  $('s-sps').textContent = s.stepsPerSec > 0 ? s.stepsPerSec.toFixed(2) : '–';
  $('s-eps').textContent = fmt(s.examplesPerSec, 0);
  $('s-loss').textContent = fmt(s.loss, 4);
  $('s-task').textContent = s.task === null ? '–' : (findTask(s.task)?.title ?? s.task);
  $('s-accuracy').textContent = heldOutText(s);
  $('s-hash').textContent = s.weightsHash ?? '–';
  $('s-sync').textContent =
    s.lastSyncMs === null ? '–' : `${s.lastSyncMs.toFixed(0)} ms (resynced ${s.resyncs}×)${s.lockStepMs === null ? '' : `; in lock-step ${(s.lockStepMs / 1000).toFixed(1)} s after joining`}`;
}

/**
 * The class's loss curve, from the room's metrics (every replica computes the same loss),
 * read with the tab's member token: a lockout of the school's address for wrong join codes
 * never stops a member's chart. Not polled while the tab is not a member.
 */
async function followLoss(room: string, memberToken: () => string | null): Promise<void> {
  const { createLiveChart } = await import('./charts');
  $('loss-section').classList.remove('hidden');
  const chart = createLiveChart($('loss-chart'), 'Loss (whole class)', [{ label: 'loss', stroke: '#2f6fed' }]);
  let busy = false;
  const poll = async () => {
    const token = memberToken();
    if (busy || token === null) return;
    busy = true;
    try {
      const res = await fetch(`/api/rooms/${encodeURIComponent(room)}/metrics`, { headers: { authorization: `Bearer ${token}` } });
      if (!res.ok) return;
      const m = (await res.json()) as RoomMetrics;
      chart.setData(m.history.map((p) => p.step), [m.history.map((p) => p.loss)]);
    } catch (err) {
      console.warn(`[webring] loss chart not refreshed: ${toWebringError(err).message}`);
    } finally {
      busy = false;
    }
  };
  void poll();
  setInterval(() => void poll(), METRICS_POLL_MS);
}

type Worker = Awaited<ReturnType<Awaited<typeof session>['startSession']>>;
let worker: Worker | null = null;
let tryPanel: { task: string; panel: TryPanel } | null = null;

/** The lesson's own examples: drawn on the pad or typed, kept on this device (collect-panel.ts). */
const collect = new CollectPanel(
  {
    section: $('collect-panel'),
    form: $<HTMLFormElement>('collect-form'),
    hint: $('collect-hint'),
    classPicker: $<HTMLSelectElement>('collect-class'),
    classLabel: $('collect-class-label'),
    text: $<HTMLInputElement>('collect-text'),
    textLabel: $('collect-text-label'),
    add: $<HTMLButtonElement>('collect-add'),
    status: $('collect-status'),
    counts: $('collect-counts'),
  },
  {
    drawing: () => {
      const panel = tryPanel?.panel;
      return panel?.input && panel.clear ? { input: panel.input(), clear: () => panel.clear!() } : null;
    },
    report: (counts) => worker?.reportOwnExamples(counts),
  },
);

/** The try panel follows the run: its task's panel, answering among the run's classes (the task's, or the lesson's own). */
function showClasses(task: string | null, classes: readonly string[] | null): void {
  if (!worker || !task || !classes) return;
  if (tryPanel?.task !== task) {
    // Statuses arrive while the task's panel still loads: mount it once.
    if (mountingTask !== task) void mountTryTheModel(worker, task, classes);
    return;
  }
  tryPanel.panel.setClasses(classes);
  $('try-hint').textContent = tryPanel.panel.hint;
}

/**
 * Whether a hub sums the class's gradients, in plain words: it sees each tab's gradient
 * (never the examples), so a student should know it is there. Only the teacher's server
 * makes a hub (its key), so a hub is the teacher's.
 */
function showHub(hub: MemberInfo | null): void {
  const note = $('hub-note');
  note.hidden = false;
  note.dataset.hub = hub ? 'yes' : 'no';
  note.textContent = hub
    ? `A hub on the teacher's computer (${hub.name}) sums the class's gradients when the hub collective runs: it sees each tab's gradient, never your examples.`
    : 'No hub: the class\'s gradients are summed around the ring, tab to tab.';
}

async function join(event: Event): Promise<void> {
  event.preventDefault();
  joinButton.disabled = true;
  const room = roomInput.value.trim();
  const name = nameInput.value.trim();
  const code = normalizeJoinCode(codeInput.value);
  if (code === null) {
    showError('A join code is 6 letters and digits, like K7M-Q2P. Copy it from the teacher’s screen.');
    joinButton.disabled = false;
    return;
  }
  try {
    if (!worker) {
      banner.textContent = 'Loading TensorFlow.js…';
      worker = await prepareMember();
    }
    // A first join, or joining again after being dropped (same connection, new membership).
    const member = worker;
    if (!joinedOnce) {
      joinedOnce = true;
      void followLoss(room, () => member.memberToken);
      // Before any run, the panel of the default task; a run of another task swaps it.
      void mountTryTheModel(member, DEFAULT_TASK.id, DEFAULT_TASK.outputs);
    }
    await member.join({ room, name, code });
    $('error').classList.add('hidden');
    // Said before Join; once training, the status below it is what the student watches.
    $<HTMLDetailsElement>('abilities').open = false;
    roomInput.disabled = true;
    nameInput.disabled = true;
    codeInput.disabled = true;
  } catch (err) {
    const e = toWebringError(err);
    showError(`Could not join. ${describeRefusal(e.toBody(), room)}`);
    joinButton.disabled = false;
  }
}

/**
 * The member this tab trains as: tfjs, its compute thread, the backend and the device's
 * speed probe, made once. Started as the page loads, while the student types a name, so
 * pressing Join costs only the handshake with the server (a late joiner is in lock-step
 * sooner). Nothing connects to the server before Join. A failure is shown at Join, and the
 * next Join tries again.
 */
let preparing: Promise<Worker> | null = null;
/** The loss chart and the try panel come with the first Join. */
let joinedOnce = false;
/** The room typed (fixed once joined). */
const typedRoom = () => roomInput.value.trim();
function prepareMember(): Promise<Worker> {
  preparing ??= createMember().then(
    (member) => {
      // What a test or a benchmark waits for: the tab can join with one handshake.
      joinButton.dataset.prepared = 'true';
      return member;
    },
    (err: unknown) => {
      preparing = null;
      throw err;
    },
  );
  return preparing;
}

async function createMember(): Promise<Worker> {
  const { startSession } = await session;
  const member = await startSession({
    preferredBackend: params.get('backend'),
    // ?compute=main keeps the maths on the page (the benchmarks' before); a thread of its own otherwise.
    compute: params.get('compute') === 'main' ? 'main' : 'thread',
    faults: faultsFromQuery(),
    ownExamples: (run) => collect.examplesFor(run),
  });
  worker = member;
  member.on('status', render);
  // A refused event (a rate limit); the member's own failure is its status's, in the banner.
  // After a drop, a report that crossed it is refused as not in the room: the drop's own
  // explanation (and when this tab comes back) stays on the page.
  member.on('error', (e) => {
    const state = member.status?.state;
    if (state === 'error' || (state === 'dropped' && e.code === 'ERR_NOT_IN_ROOM')) return;
    showError(describeRefusal(e, typedRoom()));
  });
  member.on('collect', (setting) => void collect.setCollect(typedRoom(), setting));
  member.on('hub', showHub);
  const { webgpuUnavailable, backend } = member.compute;
  if (webgpuUnavailable) {
    const notice = $('webgpu-notice');
    notice.textContent = `WebGPU is unavailable (${webgpuUnavailable}). This tab trains with ${BACKEND_LABELS[backend]} instead.`;
    notice.classList.remove('hidden');
  }
  // Closing or navigating away says goodbye, so the ring re-forms at once instead of
  // waiting for the server to miss this tab's heartbeats.
  addEventListener('pagehide', () => member.leaveRoom());
  await member.prepare();
  return member;
}

/** The try panel re-asks the live weights at most this often while the class trains. */
const TRY_REFRESH_MS = 1_000;
let tryRefresh: ReturnType<typeof setInterval> | null = null;
let mountingTask: string | null = null;

/** The task's try panel (the digit pad, a name's completions), asking this tab's live weights. */
async function mountTryTheModel(w: Worker, task: string, classes: readonly string[]): Promise<void> {
  mountingTask = task;
  const { loadPages } = await import('../shared/tasks/pages');
  const pages = await loadPages(task);
  if (mountingTask !== task) return; // a run of another task came meanwhile: its panel wins
  tryPanel?.panel.destroy();
  const host = $('task-try');
  host.replaceChildren();
  host.dataset.task = task;
  const panel = pages.mountTry(host, { ask: (features, n) => w.predict(features, n), source: 'live', classes });
  tryPanel = { task, panel };
  mountingTask = null;
  $('try-hint').textContent = panel.hint;
  $('try-model').classList.remove('hidden');
  // As the weights change, the same question gets a fresher answer.
  if (tryRefresh === null) {
    tryRefresh = setInterval(() => {
      if (statusEl.dataset.state === 'training') tryPanel?.panel.refresh();
    }, TRY_REFRESH_MS);
  }
}

$('join-form').addEventListener('submit', (e) => void join(e));
// While the student types a name; a failure here is shown when Join is pressed.
prepareMember().catch((err: unknown) => console.warn(`[webring] preparing to join: ${toWebringError(err).message}`));
