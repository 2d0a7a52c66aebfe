/** The teacher page (plain for now): start and stop a run, watch the members and the loss. */
import type { RoomStatus } from '../shared/protocol';
import type { ErrorBody } from '../shared/errors';
import type { CheckpointInfo } from '../shared/checkpoint';

const POLL_INTERVAL_MS = 1_000;
const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;
const params = new URLSearchParams(location.search);
const room = params.get('room') ?? 'class';
const token = params.get('token') ?? '';
$('room-name').textContent = room;

function showError(error: ErrorBody | null): void {
  const el = $('error');
  el.textContent = error ? `${error.message} (${error.code})` : '';
  el.classList.toggle('hidden', !error);
}

async function call(action: 'start' | 'stop', body: unknown): Promise<void> {
  const res = await fetch(`/api/rooms/${encodeURIComponent(room)}/${action}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify(body),
  });
  const json = (await res.json()) as { ok: boolean; error?: ErrorBody };
  showError(json.ok ? null : (json.error ?? { code: 'ERR_INTERNAL', message: `HTTP ${res.status}` }));
  await refresh();
}

function readConfig(form: HTMLFormElement): Record<string, unknown> {
  const data = new FormData(form);
  const config: Record<string, unknown> = {};
  for (const [key, value] of data.entries()) {
    if (value === '' || key === 'startFresh') continue;
    config[key] = key === 'model' || key === 'optimizer' ? value : Number(value);
  }
  if (data.get('startFresh')) config.resumeFrom = 'none';
  return config;
}

async function refreshCheckpoints(): Promise<void> {
  const base = `/api/rooms/${encodeURIComponent(room)}/checkpoints`;
  const res = await fetch(base);
  if (!res.ok) return;
  const list = (await res.json()) as CheckpointInfo[];
  $('no-checkpoints').classList.toggle('hidden', list.length > 0);
  $('download').classList.toggle('hidden', list.length === 0);
  if (list[0]) {
    $<HTMLAnchorElement>('download-model').href = `${base}/${list[0].id}/model.json`;
    $<HTMLAnchorElement>('download-weights').href = `${base}/${list[0].id}/model.weights.bin`;
  }
  $('checkpoints').replaceChildren(
    ...list.map((c) => {
      const tr = document.createElement('tr');
      tr.append(cell(String(c.step)), cell(String(c.epoch + 1)), cell(new Date(c.createdAt).toLocaleTimeString()), cell(`${(c.bytes / 1024).toFixed(0)} KiB`), cell(c.id));
      return tr;
    }),
  );
}

function cell(text: string): HTMLTableCellElement {
  const td = document.createElement('td');
  td.textContent = text;
  return td;
}

function render(s: RoomStatus): void {
  $('t-state').textContent = s.state;
  $('t-generation').textContent = String(s.generation);
  $('t-step').textContent = s.totalSteps ? `${s.step} / ${s.totalSteps} (epoch ${s.epoch + 1})` : String(s.step);
  $('t-loss').textContent = s.metrics.loss === null ? '–' : s.metrics.loss.toFixed(4);
  $('t-accuracy').textContent = s.metrics.accuracy === null ? '–' : `${(s.metrics.accuracy * 100).toFixed(1)} %`;
  const rows = [...s.members, ...s.waiting].map((m) => {
    const tr = document.createElement('tr');
    tr.dataset.memberId = m.id;
    tr.append(
      cell(m.rank === null ? 'waiting' : m.rank === 0 ? '0 (chief)' : String(m.rank)),
      cell(String(m.index)),
      cell(m.name),
      cell(m.kind),
      cell(m.backend + (m.adapter ? ` (${m.adapter})` : '')),
      cell(String(m.step)),
      cell(m.examplesPerSec.toFixed(0)),
      cell(m.computeMs.toFixed(0)),
      cell(m.weightsHash ?? '–'),
    );
    return tr;
  });
  $('members').replaceChildren(...rows);
  const c = s.consistency;
  $('t-consistency').textContent = `${c.checks} hash comparisons, ${c.mismatches} mismatch(es)` + (c.lastMismatchStep === null ? '' : `, last at step ${c.lastMismatchStep} (resynced from the chief)`);
  $('no-dropped').classList.toggle('hidden', s.dropped.length > 0);
  $('dropped').replaceChildren(
    ...s.dropped.map((d) => {
      const tr = document.createElement('tr');
      tr.append(cell(d.name), cell(String(d.step)), cell(`${d.computeMs.toFixed(0)} ms`), cell(`${d.deadlineMs.toFixed(0)} ms`));
      return tr;
    }),
  );
  $('events').replaceChildren(
    ...s.events
      .slice()
      .reverse()
      .map((e) => {
        const li = document.createElement('li');
        const who = e.members.length > 0 ? ` ${e.members.join(', ')}` : '';
        li.textContent = `${new Date(e.at).toLocaleTimeString()} · step ${e.step} · ${e.kind}${who}${e.detail ? ` (${e.detail})` : ''}`;
        return li;
      }),
  );
  if (s.lastError) showError(s.lastError);
}

async function refresh(): Promise<void> {
  const res = await fetch(`/api/rooms/${encodeURIComponent(room)}`);
  if (res.ok) render((await res.json()) as RoomStatus);
  await refreshCheckpoints();
}

const form = $<HTMLFormElement>('config');
form.addEventListener('submit', (e) => {
  e.preventDefault();
  void call('start', readConfig(form));
});
$('stop').addEventListener('click', () => void call('stop', {}));
setInterval(() => void refresh(), POLL_INTERVAL_MS);
void refresh();
