/**
 * The dashboard's view of the HTTP API (docs/http-api.md). Every request carries the
 * teacher token; download links, which cannot carry a header, carry the join code. Failures come back as coded ErrorBody values, never as
 * thrown exceptions, so each panel decides where to show them.
 */
import type { CollectSetting, RoomJoinInfo, RoomMetrics, RoomStatus } from '../../shared/protocol';
import type { CheckpointInfo, CheckpointMetadata } from '../../shared/checkpoints/checkpoint';
import { ERROR_CODES, type ErrorBody } from '../../shared/protocol/errors';

export type RoomAction = 'start' | 'stop' | 'pause' | 'resume';

export type Result<T> = { ok: true; value: T } | { ok: false; error: ErrorBody };

export interface StatusSnapshot {
  status: RoomStatus;
  /** Server clock minus this tab's clock (ms), from the response's Date header; 0 if absent. */
  clockOffsetMs: number;
}


export class RoomApi {
  readonly base: string;

  constructor(
    readonly room: string,
    private readonly token: string,
  ) {
    this.base = `/api/rooms/${encodeURIComponent(room)}`;
  }

  /** The join code, once joinInfo has read it: download links carry it (a link cannot carry a header). */
  private joinCode: string | null = null;

  async status(): Promise<Result<StatusSnapshot>> {
    const res = await get(this.base, this.token);
    if (!res.ok) return res;
    const date = Date.parse(res.value.headers.get('date') ?? '');
    const clockOffsetMs = Number.isFinite(date) ? date - Date.now() : 0;
    const json = await readJson(res.value);
    return json.ok ? { ok: true, value: { status: json.value as RoomStatus, clockOffsetMs } } : json;
  }

  /** The join code and class links (LAN https first), for the joining card. */
  async joinInfo(): Promise<Result<RoomJoinInfo>> {
    const res = await get(`${this.base}/join`, this.token);
    const info = res.ok ? ((await readJson(res.value)) as Result<RoomJoinInfo>) : res;
    if (info.ok) this.joinCode = info.value.code;
    return info;
  }

  async metrics(): Promise<Result<RoomMetrics>> {
    const res = await get(`${this.base}/metrics`, this.token);
    return res.ok ? ((await readJson(res.value)) as Result<RoomMetrics>) : res;
  }

  async checkpoints(): Promise<Result<CheckpointInfo[]>> {
    const res = await get(`${this.base}/checkpoints`, this.token);
    return res.ok ? ((await readJson(res.value)) as Result<CheckpointInfo[]>) : res;
  }

  /** Deletes checkpoint `id`; the answer is the room's checkpoints without it. */
  async deleteCheckpoint(id: string): Promise<Result<CheckpointInfo[]>> {
    let res: Response;
    try {
      res = await fetch(`${this.base}/checkpoints/${encodeURIComponent(id)}`, { method: 'DELETE', headers: { authorization: `Bearer ${this.token}` } });
    } catch (err) {
      return unreachable(err);
    }
    const json = await readJson(res, true);
    return json.ok ? { ok: true, value: (json.value as { checkpoints: CheckpointInfo[] }).checkpoints } : json;
  }

  async checkpointMetadata(id: string): Promise<Result<CheckpointMetadata>> {
    const res = await get(this.fileUrl(id, 'metadata.json'), this.token);
    return res.ok ? ((await readJson(res.value)) as Result<CheckpointMetadata>) : res;
  }

  fileUrl(id: string, file: string): string {
    const url = `${this.base}/checkpoints/${encodeURIComponent(id)}/${file}`;
    return this.joinCode ? `${url}?code=${this.joinCode}` : url;
  }

  /** What reading the room's files needs, for tf.loadLayersModel's requests. */
  get readHeaders(): Record<string, string> {
    return { authorization: `Bearer ${this.token}` };
  }

  /** Opens (a task's items, and its classes) or closes (null) collecting for the lesson's own examples. */
  collect(setting: CollectSetting | null): Promise<Result<RoomStatus>> {
    return this.send('PUT', 'collect', setting ?? { classes: null });
  }

  /** Sets (1 to MAX_ROOM_MEMBERS) or clears (null: the defaults) the seats one client address may hold. */
  seats(perAddress: number | null): Promise<Result<RoomStatus>> {
    return this.send('PUT', 'seats', { perAddress });
  }

  act(action: RoomAction, body: unknown = {}): Promise<Result<RoomStatus>> {
    return this.send('POST', action, body);
  }

  /** Removes the room's hub; no hub joins until allowHub(). */
  removeHub(): Promise<Result<RoomStatus>> {
    return this.send('DELETE', 'hub', {});
  }

  /** Lets a hub join again after removeHub(). */
  allowHub(): Promise<Result<RoomStatus>> {
    return this.send('POST', 'hub/allow', {});
  }

  /** A teacher's request that changes the room; the answer carries the room's new status. */
  private async send(method: 'POST' | 'PUT' | 'DELETE', path: string, body: unknown): Promise<Result<RoomStatus>> {
    let res: Response;
    try {
      res = await fetch(`${this.base}/${path}`, {
        method,
        headers: { 'content-type': 'application/json', authorization: `Bearer ${this.token}` },
        body: JSON.stringify(body),
      });
    } catch (err) {
      return unreachable(err);
    }
    const json = await readJson(res, true);
    return json.ok ? { ok: true, value: (json.value as { status: RoomStatus }).status } : json;
  }
}

async function get(url: string, token?: string): Promise<Result<Response>> {
  try {
    return { ok: true, value: await fetch(url, { cache: 'no-store', headers: token ? { authorization: `Bearer ${token}` } : {} }) };
  } catch (err) {
    return unreachable(err);
  }
}

function unreachable(err: unknown): { ok: false; error: ErrorBody } {
  return { ok: false, error: { code: 'ERR_UNREACHABLE', message: `the server did not answer (${err instanceof Error ? err.message : String(err)})` } };
}

/**
 * Parses a JSON answer. Error answers carry `{ok: false, error: {code, message, field?}}`;
 * with `wrapped`, success answers carry `{ok: true, ...}` too.
 */
async function readJson(res: Response, wrapped = false): Promise<Result<unknown>> {
  let json: unknown;
  try {
    json = await res.json();
  } catch {
    return { ok: false, error: { code: 'ERR_INTERNAL', message: `HTTP ${res.status}: the answer is not JSON` } };
  }
  if (!res.ok || (wrapped && (json as { ok?: unknown }).ok !== true)) return { ok: false, error: errorOf(json, res.status) };
  return { ok: true, value: json };
}

function errorOf(json: unknown, status: number): ErrorBody {
  const e = (json as { error?: Partial<ErrorBody> } | null)?.error;
  const code = ERROR_CODES.find((c) => c === e?.code) ?? 'ERR_INTERNAL';
  const message = typeof e?.message === 'string' ? e.message : `HTTP ${status}`;
  return typeof e?.field === 'string' ? { code, message, field: e.field } : { code, message };
}
