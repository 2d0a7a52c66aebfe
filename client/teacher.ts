/**
 * The teacher dashboard, /teacher?room=NAME&token=TOKEN (the token then leaves the address
 * bar: teacher/token.ts): how students join (room code and
 * QR code), the run's controls and progress, the ring, the live curves, the members, the
 * config form, the checkpoints and the ring's history. It polls the HTTP API once a second,
 * one request at a time; the panels live in ./teacher/.
 */
import './zod-jitless';
import { type CollectSetting, type MetricPoint, type RoomMetrics, type RoomState, type RoomStatus, type ServerInfo } from '../shared/protocol';
import type { CheckpointInfo } from '../shared/checkpoints/checkpoint';
import type { ErrorBody } from '../shared/protocol/errors';
import { createLiveChart } from './charts';
import { collectTaskOf, sameCollection } from '../shared/tasks/collect';
import { RoomApi, type Result, type RoomAction, type StartOptions } from './teacher/api';
import { ConfigForm, type StartConfigInput } from './teacher/config-form';
import { renderCheckpoints } from './teacher/checkpoints';
import { byId, h } from './teacher/dom';
import { renderMembers } from './teacher/members-table';
import { renderProgress } from './teacher/progress';
import { renderJoinCard } from './teacher/qr';
import { mountSecondDevice } from './teacher/second-device';
import { mountOtherRooms } from './teacher/other-rooms';
import { NetworkCheckPanel } from './teacher/network-check';
import { renderHub, renderRing } from './teacher/ring-view';
import { mountSeatsSetting, mountVouchSetting } from './teacher/seats-setting';
import { renderStepSplit } from './teacher/step-split';
import { renderRoomLog } from './teacher/room-log';
import { renderPrivacy } from './teacher/privacy-state';
import { renderSync } from './teacher/sync-state';
import { takeTeacherToken } from './teacher/token';
import { PROGRAM_WORKLOAD } from '../shared/protocol/start-config';

const POLL_INTERVAL_MS = 1_000;
/** While a run is on, new checkpoints may appear at any step; otherwise the list rarely changes. */
const CHECKPOINTS_POLL_TRAINING_MS = 3_000;
const CHECKPOINTS_POLL_IDLE_MS = 10_000;
const BIG_SCREEN_KEY = 'webring:teacher:big';

const params = new URLSearchParams(location.search);
const room = params.get('room') ?? 'class';
const teacherToken = takeTeacherToken();
const api = new RoomApi(room, teacherToken);
const configForm = new ConfigForm(byId<HTMLFormElement>('config'));
const networkCheck = new NetworkCheckPanel({ panel: byId('network-check'), estimate: byId('run-estimate'), comparison: byId('run-comparison') }, api, () => configForm.current());
for (const event of ['input', 'change']) configForm.form.addEventListener(event, () => networkCheck.formChanged());
// The server's TASK= picks the task the form opens with, until a run's own config shows instead.
const serverInfo: Promise<ServerInfo | null> = fetch('/api/info')
  .then(async (res) => (res.ok ? ((await res.json()) as ServerInfo) : null))
  .catch((err: unknown) => {
    console.warn(`[webring] no server info (the form's task, the certificate): ${(err as Error).message}`);
    return null;
  });
void serverInfo.then((info) => {
  if (info && !status?.config) configForm.showDefaults(info.defaultTask);
});
const buttons: Record<RoomAction, HTMLButtonElement> = {
  start: byId<HTMLButtonElement>('start'),
  pause: byId<HTMLButtonElement>('pause'),
  resume: byId<HTMLButtonElement>('resume'),
  stop: byId<HTMLButtonElement>('stop'),
};

let status: RoomStatus | null = null;
let clockOffsetMs = 0;
let history: MetricPoint[] = [];
let checkpoints: CheckpointInfo[] = [];
let checkpointsFetchedAt = 0;
let checkpointsKey = '';
let metricsKey = '';
/** An action request is in flight: every control waits for its answer. */
let busy = false;
/** On the first status, a run in progress fills the form with its config; after that the form is the teacher's. */
let formFilled = false;

// ---------------------------------------------------------------------------
// Joining card and page chrome
// ---------------------------------------------------------------------------
byId('room-name').textContent = room;
// The pad and TensorFlow.js load after the dashboard has painted.
const tryTheModel = import('./teacher-try').then(({ mountTeacherTry }) => mountTeacherTry(byId('teacher-try'), room, api.readHeaders));
document.title = `webring teacher: ${room}`;
/** The joining card; resolved once the join code is known (download links carry it). */
const joinCard = (async () => {
  const join = await api.joinInfo();
  if (!join.ok) {
    // Without the teacher token the page cannot show the code; it says so instead of a wrong card.
    byId('join-body').replaceChildren(h('p', { class: 'error', role: 'alert' }, `No join code: ${join.error.message} (${join.error.code}). Open this page with the link npm start opened, or the one it saved in teacher-link.txt in its data directory: it carries the teacher token.`));
    return;
  }
  const classLink = join.value.studentUrls[0] ?? join.value.localUrl;
  const certificate = (await serverInfo)?.certificateFingerprint ?? null;
  mountSecondDevice(byId('second-device-body'), room, teacherToken, new URL(classLink).origin, certificate);
  mountOtherRooms(byId('other-rooms-body'), room, teacherToken, certificate);
  await renderJoinCard(byId('join-body'), room, join.value.code, join.value.studentUrls[0] ?? join.value.localUrl, certificate);
})();

const bigToggle = byId<HTMLButtonElement>('big-toggle');
function setBig(big: boolean): void {
  document.documentElement.classList.toggle('big', big);
  bigToggle.setAttribute('aria-pressed', String(big));
  try {
    localStorage.setItem(BIG_SCREEN_KEY, big ? '1' : '0');
  } catch (err) {
    // Storage may be off (private mode); the toggle still works for this visit.
    console.warn(`[webring] big-screen mode not remembered: ${(err as Error).message}`);
  }
  lossChart.resize();
  accuracyChart.resize();
}
bigToggle.addEventListener('click', () => setBig(bigToggle.getAttribute('aria-pressed') !== 'true'));

// ---------------------------------------------------------------------------
// Charts
// ---------------------------------------------------------------------------
const chartHeight = () => (document.documentElement.classList.contains('big') ? 320 : 220);
const pct = (v: number) => `${v.toFixed(1)} %`;
const lossChart = createLiveChart(
  byId('loss-chart'),
  'Loss (whole class, nats per example: per character for text)',
  [
    { label: 'loss', stroke: '#2f6fed', format: (v) => v.toFixed(4) },
    // In local-steps mode every point is a round's: a dot marks each outer step.
    { label: 'outer step', stroke: '#c2410c', format: (v) => v.toFixed(4), points: true },
    { label: 'held out (per epoch)', stroke: '#7c3aed', format: (v) => v.toFixed(4), points: true },
  ],
  'step',
  { height: chartHeight },
);
const accuracyChart = createLiveChart(
  byId('accuracy-chart'),
  'Accuracy',
  [
    { label: 'train (batch)', stroke: '#2f9e6f', format: pct },
    { label: 'test (per epoch)', stroke: '#c2410c', format: pct, points: true },
  ],
  'step',
  { height: chartHeight },
);
let storedBig = false;
try {
  storedBig = localStorage.getItem(BIG_SCREEN_KEY) === '1';
} catch (err) {
  console.warn(`[webring] no remembered big-screen mode: ${(err as Error).message}`);
}
setBig(storedBig);

function renderCharts(m: RoomMetrics): void {
  const rounds = status?.config?.sync === 'local-steps';
  const loss = new Map(m.history.map((p) => [p.step, p.loss]));
  const heldOut = new Map(m.evaluations.map((e) => [e.step, e.testLoss]));
  const steps = [...new Set([...loss.keys(), ...heldOut.keys()])].sort((a, b) => a - b);
  lossChart.setData(steps, [steps.map((x) => loss.get(x) ?? null), steps.map((x) => (rounds ? (loss.get(x) ?? null) : null)), steps.map((x) => heldOut.get(x) ?? null)]);
  // One x axis for both series: every reported step, plus evaluation steps not reported (after a resume).
  // A program's model has a loss, not classes: its accuracy chart stays empty.
  const program = status?.config?.task === PROGRAM_WORKLOAD;
  const test = new Map(program ? [] : m.evaluations.filter((e) => e.accuracy !== null).map((e) => [e.step, e.accuracy! * 100]));
  const train = new Map(program ? [] : m.history.map((p) => [p.step, p.trainAccuracy * 100]));
  const xs = [...new Set([...train.keys(), ...test.keys()])].sort((a, b) => a - b);
  accuracyChart.setData(xs, [xs.map((x) => train.get(x) ?? null), xs.map((x) => test.get(x) ?? null)]);
  byId('charts-empty').hidden = m.history.length > 0;
}

// ---------------------------------------------------------------------------
// Controls
// ---------------------------------------------------------------------------
const ENABLED_IN: Record<RoomAction, readonly RoomState[]> = {
  start: ['idle', 'done'],
  pause: ['training'],
  resume: ['paused'],
  stop: ['training', 'paused'],
};

function renderControls(): void {
  const state = status?.state;
  const empty = (status?.members.length ?? 0) === 0;
  for (const [action, button] of Object.entries(buttons) as Array<[RoomAction, HTMLButtonElement]>) {
    button.disabled = busy || !state || !ENABLED_IN[action].includes(state) || (action === 'start' && empty);
  }
  byId('start-hint').hidden = !(status && empty && ENABLED_IN.start.includes(status.state));
  const badge = byId('t-state');
  badge.textContent = state ?? '–';
  badge.className = `state-badge state-${state ?? 'unknown'}`;
  renderCheckpointList();
}

function showActionError(error: ErrorBody | null): void {
  const el = byId('action-error');
  el.textContent = error ? `${error.message} (${error.code})` : '';
  el.hidden = !error;
}

async function act(action: RoomAction, body: StartOptions = {}): Promise<boolean> {
  busy = true;
  showActionError(null);
  renderControls();
  const result = await api.act(action, body);
  busy = false;
  if (result.ok) {
    applyStatus(result.value);
    checkpointsFetchedAt = 0;
  } else if (result.error.code !== 'ERR_BAD_REQUEST' || !configForm.showServerError(result.error)) {
    showActionError(result.error);
  }
  renderControls();
  void poll();
  return result.ok;
}

async function start(config: StartConfigInput): Promise<void> {
  configForm.clear();
  await act('start', config);
}

configForm.form.addEventListener('submit', (e) => {
  e.preventDefault();
  const config = configForm.read();
  if (config) void start(config);
});
// Students collect their own examples for the typed classes (or a text task's items) before
// Start; pressed again for the same it stops collecting.
byId<HTMLButtonElement>('collect-open').addEventListener('click', () => {
  const collect = configForm.readCollect();
  if (!collect) return;
  void api.collect(collectingNow(collect) ? null : collect).then((result) => {
    if (result.ok) applyStatus(result.value);
    else showActionError(result.error);
  });
});
/** The teacher's say over the hub: its removal sticks until a hub is let in again. */
const hubActions = {
  remove: () => void api.removeHub().then(afterHubChange),
  allow: () => void api.allowHub().then(afterHubChange),
};
function afterHubChange(result: Result<RoomStatus>): void {
  if (result.ok) applyStatus(result.value);
  else showActionError(result.error);
}
const seatsSetting = mountSeatsSetting(byId<HTMLSelectElement>('seats-per-address'), byId('seats-error'), (n) => api.seats(n), applyStatus);
const vouchSetting = mountVouchSetting(byId<HTMLInputElement>('seats-vouched'), byId('seats-error'), (v) => api.vouch(v), applyStatus);
buttons.pause.addEventListener('click', () => void act('pause'));
buttons.resume.addEventListener('click', () => void act('resume'));
buttons.stop.addEventListener('click', () => void act('stop'));

// ---------------------------------------------------------------------------
// Checkpoints
// ---------------------------------------------------------------------------
let renderedCheckpoints = '';

function renderCheckpointList(): void {
  const canRestore = !!status && ENABLED_IN.start.includes(status.state) && status.members.length > 0;
  // Rebuilt only on change, so a Restore button keeps keyboard focus across polls.
  const key = JSON.stringify([checkpoints.map((c) => [c.id, c.trust.state]), canRestore, busy, status?.members.map((m) => m.id)]);
  if (key === renderedCheckpoints) return;
  renderedCheckpoints = key;
  renderCheckpoints(byId('checkpoints'), byId('no-checkpoints'), {
    list: checkpoints,
    members: status?.members ?? [],
    fileUrl: (id, file) => api.fileUrl(id, file),
    canRestore,
    busy,
  });
}

byId('checkpoints').addEventListener('click', (e) => {
  const target = e.target as HTMLElement;
  const id = target.closest<HTMLButtonElement>('button[data-restore]')?.dataset.restore;
  if (id) void restore(id);
  const doomed = target.closest<HTMLButtonElement>('button[data-delete]')?.dataset.delete;
  if (doomed) void deleteCheckpoint(doomed);
});

/** Deletes a checkpoint the teacher does not trust (its writer is in the list); a Start then resumes from the next. */
async function deleteCheckpoint(id: string): Promise<void> {
  const c = checkpoints.find((x) => x.id === id);
  if (!confirm(`Delete the checkpoint of step ${c?.step ?? '?'}${c?.writerName ? `, written by ${c.writerName}` : ''}?`)) return;
  busy = true;
  showActionError(null);
  renderCheckpointList();
  const result = await api.deleteCheckpoint(id);
  busy = false;
  if (result.ok) checkpoints = result.value;
  else showActionError(result.error);
  renderCheckpointList();
}

/** Starts a run from checkpoint `id` with the form's config, in the checkpoint's own model and optimizer. */
async function restore(id: string): Promise<void> {
  const meta = await api.checkpointMetadata(id);
  if (meta.ok) configForm.useArchitecture(meta.value.config.task, meta.value.config.model, meta.value.config.optimizer);
  const config = configForm.read();
  if (!config) {
    showActionError({ code: 'ERR_BAD_REQUEST', message: 'Fix the training config first: the restored run uses it' });
    return;
  }
  configForm.clear();
  await act('start', { ...config, resumeFrom: id });
}

// ---------------------------------------------------------------------------
// Polling
// ---------------------------------------------------------------------------
function applyStatus(s: RoomStatus): void {
  status = s;
  if (!formFilled) {
    formFilled = true;
    if (s.config && (s.state === 'training' || s.state === 'paused')) configForm.fill(s.config);
  }
  renderControls();
  renderProgress(s, history);
  renderMembers(byId('members'), byId('members-gone'), byId('members-summary'), s, Date.now() + clockOffsetMs);
  renderRing(byId('ring-view'), s);
  renderHub(byId('hub-member'), s, hubActions);
  renderStepSplit(byId('step-split'), s);
  renderRoomLog(s);
  renderCollecting(s);
  renderPrivacy(byId('privacy-state'), s);
  renderSync(byId('sync-state'), byId('sync-advice'), s);
  networkCheck.render(s);
  seatsSetting.render(s);
  vouchSetting.render(s);
  const roomError = byId('room-error');
  roomError.hidden = !s.lastError;
  roomError.textContent = s.lastError ? `The last run stopped: ${s.lastError.message} (${s.lastError.code})` : '';
}

/** What the students collect for, and what the button would do next. */
function renderCollecting(s: RoomStatus): void {
  byId('collect-state').textContent = s.collect ? collectingText(s.collect) : '';
  const typed = configForm.readCollect(false);
  const own = configForm.ownData;
  byId('collect-open').textContent = typed && collectingNow(typed) ? 'Stop collecting' : own?.collects === 'text' ? `Let students add ${own.label}` : 'Let students collect these classes';
}

/** What the students are collecting, in the teacher's words. */
function collectingText(collect: CollectSetting): string {
  const task = collectTaskOf(collect);
  if (task.own?.collects === 'text') return `Students are adding ${task.own.label} (${task.title}). Theirs stay on their devices; the members table shows how many each has.`;
  return `Students are collecting: ${(collect.classes ?? []).join(', ')}. Their drawings stay on their devices; the members table shows how many each has.`;
}

/** True while the students collect exactly `collect`: the button then stops collecting. */
function collectingNow(collect: CollectSetting): boolean {
  return !!status?.collect && sameCollection(status.collect, collect);
}

function showConnection(error: ErrorBody | null): void {
  const el = byId('conn');
  el.textContent = error ? `Server not answering; retrying… (${error.code})` : '';
  el.hidden = !error;
}

let polling = false;
let pollAgain = false;
let timer: ReturnType<typeof setTimeout> | undefined;

/** One poll at a time; a poll asked for meanwhile runs right after the current one. */
async function poll(): Promise<void> {
  if (polling) {
    pollAgain = true;
    return;
  }
  polling = true;
  clearTimeout(timer);
  try {
    await pollOnce();
  } finally {
    polling = false;
    timer = setTimeout(() => void poll(), pollAgain ? 0 : POLL_INTERVAL_MS);
    pollAgain = false;
  }
}

async function pollOnce(): Promise<void> {
  const snap = await api.status();
  showConnection(snap.ok ? null : snap.error);
  if (!snap.ok) return;
  clockOffsetMs = snap.value.clockOffsetMs;
  const s = snap.value.status;

  const mKey = `${s.run}|${s.step}|${s.metrics.accuracy}|${s.state}`;
  if (mKey !== metricsKey) {
    const m = await api.metrics();
    if (m.ok) {
      metricsKey = mKey;
      history = m.value.history;
      renderCharts(m.value);
    }
  }
  applyStatus(s);

  const cKey = `${s.run}|${s.state}`;
  const every = s.state === 'training' ? CHECKPOINTS_POLL_TRAINING_MS : CHECKPOINTS_POLL_IDLE_MS;
  if (cKey !== checkpointsKey || Date.now() - checkpointsFetchedAt >= every) {
    const list = await api.checkpoints();
    if (list.ok) {
      checkpoints = list.value;
      void tryTheModel.then((t) => t.update(list.value));
      checkpointsKey = cKey;
      checkpointsFetchedAt = Date.now();
      renderCheckpointList();
    }
  }
}

// The first poll waits for the join code, so the checkpoint download links carry it.
void joinCard.catch((err: unknown) => console.error(`[webring] the joining card failed: ${String(err)}`)).then(() => poll());
