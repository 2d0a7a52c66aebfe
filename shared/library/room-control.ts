/**
 * The teacher's controls, over the server's HTTP API (docs/http-api.md) with the teacher
 * token: start, pause, resume and stop a room's run, read its status, metrics and
 * checkpoints, and set what the room collects, its seats and its hub. The classroom's
 * teacher page drives a room through this class; a Node script or a test does the same.
 * Every refusal is a WebringError with the server's code (ERR_BAD_REQUEST names the field);
 * a server that does not answer is ERR_UNREACHABLE.
 */
import { z } from 'zod';
import { ERROR_CODES, WebringError } from '../protocol/errors';
import type { CollectSetting, NetworkCheckRequest, RoomJoinInfo, RoomMetrics, RoomStatus, startConfigFieldsSchema } from '../protocol';
import { CHECKPOINT_FILE_NAMES, type CheckpointFiles, type CheckpointInfo, type CheckpointMetadata } from '../checkpoints/checkpoint';

/** A run's recipe as sent: every field may be left out and takes its default (docs/recipe.md). */
export type StartOptions = z.input<typeof startConfigFieldsSchema>;

export interface RoomControlOptions {
  /** The signaling server's http(s) origin. */
  url: string | URL;
  /** The teacher token the server printed (or was given as TEACHER_TOKEN). */
  teacherToken: string;
}

/** A room's status, and the server's clock when it answered. */
export interface StatusSnapshot {
  status: RoomStatus;
  /** The server's clock minus this machine's (ms), from the answer's Date header; 0 if it has none. */
  clockOffsetMs: number;
}

type Method = 'GET' | 'POST' | 'PUT' | 'DELETE';
export type { CheckpointFiles };

const errorReplySchema = z.object({ error: z.object({ code: z.enum(ERROR_CODES), message: z.string(), field: z.string().optional() }) });

export class RoomControl {
  private readonly origin: string;

  constructor(private readonly options: RoomControlOptions) {
    this.origin = new URL(options.url).origin;
  }

  /** Starts a run in `room` with `config`; resolves with the room's status, rejects with the server's coded refusal (ERR_BAD_REQUEST names the field). */
  async start(room: string, config: StartOptions = {}): Promise<RoomStatus> {
    return (await this.call<{ status: RoomStatus }>('POST', room, '/start', config)).body.status;
  }
  async stop(room: string): Promise<RoomStatus> {
    return (await this.call<{ status: RoomStatus }>('POST', room, '/stop', {})).body.status;
  }
  async pause(room: string): Promise<RoomStatus> {
    return (await this.call<{ status: RoomStatus }>('POST', room, '/pause', {})).body.status;
  }
  async resume(room: string): Promise<RoomStatus> {
    return (await this.call<{ status: RoomStatus }>('POST', room, '/resume', {})).body.status;
  }
  /** The room's members, run, step and consistency (what the teacher page shows). */
  async status(room: string): Promise<RoomStatus> {
    return (await this.statusSnapshot(room)).status;
  }
  /** The status, with the server's clock offset: the teacher page counts a paused run's time on the server's clock. */
  async statusSnapshot(room: string): Promise<StatusSnapshot> {
    const { body, date } = await this.call<RoomStatus>('GET', room, '');
    return { status: body, clockOffsetMs: date === null ? 0 : date - Date.now() };
  }
  /** The room's join code and class links. */
  async joinInfo(room: string): Promise<RoomJoinInfo> {
    return (await this.call<RoomJoinInfo>('GET', room, '/join')).body;
  }
  /** The run's loss and accuracy, step by step. */
  async metrics(room: string): Promise<RoomMetrics> {
    return (await this.call<RoomMetrics>('GET', room, '/metrics')).body;
  }
  /** The checkpoints the server keeps for the room, newest first. */
  async checkpoints(room: string): Promise<CheckpointInfo[]> {
    return (await this.call<CheckpointInfo[]>('GET', room, '/checkpoints')).body;
  }
  /** What checkpoint `id` holds: its run's config, step and hash. */
  async checkpointMetadata(room: string, id: string): Promise<CheckpointMetadata> {
    return (await this.call<CheckpointMetadata>('GET', room, `/checkpoints/${encodeURIComponent(id)}/metadata.json`)).body;
  }
  /** Deletes checkpoint `id`; resolves with the room's checkpoints without it. */
  async deleteCheckpoint(room: string, id: string): Promise<CheckpointInfo[]> {
    return (await this.call<{ checkpoints: CheckpointInfo[] }>('DELETE', room, `/checkpoints/${encodeURIComponent(id)}`)).body.checkpoints;
  }
  /**
   * Files a checkpoint from elsewhere (a program's own backup) under `room`: checked as the
   * chief's are, and named by `resumeFrom` like any other. Resolves with its listing.
   */
  async importCheckpoint(room: string, files: CheckpointFiles): Promise<CheckpointInfo> {
    const form = new FormData();
    for (const name of CHECKPOINT_FILE_NAMES) form.append(name, files[name], name);
    return (await this.call<{ checkpoint: CheckpointInfo }>('POST', room, '/checkpoints/import', form)).body.checkpoint;
  }
  /** Opens collecting for the class's own examples (a task's items and its classes), or closes it (null). */
  async collect(room: string, setting: CollectSetting | null): Promise<RoomStatus> {
    return (await this.call<{ status: RoomStatus }>('PUT', room, '/collect', setting ?? { classes: null })).body.status;
  }
  /** Sets the seats one client address may hold (1 to the room's size), or the defaults (null). */
  async seats(room: string, perAddress: number | null): Promise<RoomStatus> {
    return (await this.call<{ status: RoomStatus }>('PUT', room, '/seats', { perAddress })).body.status;
  }
  /** Vouches (or stops) that members sharing an address are distinct devices, each its own client for secure aggregation. */
  async vouch(room: string, vouched: boolean): Promise<RoomStatus> {
    return (await this.call<{ status: RoomStatus }>('PUT', room, '/seats', { vouched })).body.status;
  }
  /**
   * Asks every device of the room to measure its network now (its round trip and bandwidth to
   * the server, and how each of its links carries messages); their answers come in the
   * room's status (`network`) within a few seconds. With `workload`, each device also times
   * that model (its admission probe timed the task's default), for the run's estimate.
   * Resolves with the check's number.
   */
  async networkCheck(room: string, request: NetworkCheckRequest = {}): Promise<number> {
    return (await this.call<{ check: number }>('POST', room, '/network-check', request)).body.check;
  }
  /** The room's hub key: a hub process (node-worker/hub.ts) joins with it in HUB_KEY. */
  async hubKey(room: string): Promise<string> {
    return (await this.call<{ hubKey: string }>('GET', room, '/hub-key')).body.hubKey;
  }
  /** Removes the room's hub; no hub joins until allowHub. */
  async removeHub(room: string): Promise<RoomStatus> {
    return (await this.call<{ status: RoomStatus }>('DELETE', room, '/hub', {})).body.status;
  }
  /** Lets a hub join again after removeHub. */
  async allowHub(room: string): Promise<RoomStatus> {
    return (await this.call<{ status: RoomStatus }>('POST', room, '/hub/allow', {})).body.status;
  }
  /** The Authorization header a read of the room's files needs (tf.loadLayersModel's requests of a checkpoint). */
  get readHeaders(): Record<string, string> {
    return { authorization: `Bearer ${this.options.teacherToken}` };
  }

  private async call<T>(method: Method, room: string, path: string, body?: unknown): Promise<{ body: T; date: number | null }> {
    const url = `${this.origin}/api/rooms/${encodeURIComponent(room)}${path}`;
    let response: Response;
    try {
      response = await fetch(url, {
        method,
        cache: 'no-store',
        // A form sets its own content type (multipart, with its boundary).
        headers: { ...this.readHeaders, ...(body === undefined || body instanceof FormData ? {} : { 'content-type': 'application/json' }) },
        ...(body === undefined ? {} : { body: body instanceof FormData ? body : JSON.stringify(body) }),
      });
    } catch (err) {
      throw new WebringError('ERR_UNREACHABLE', `the server did not answer (${err instanceof Error ? err.message : String(err)})`);
    }
    const reply: unknown = await response.json().catch(() => null);
    if (response.ok) {
      const date = Date.parse(response.headers.get('date') ?? '');
      return { body: reply as T, date: Number.isFinite(date) ? date : null };
    }
    const refused = errorReplySchema.safeParse(reply);
    if (refused.success) throw new WebringError(refused.data.error.code, refused.data.error.message, refused.data.error.field);
    throw new WebringError('ERR_INTERNAL', `${method} ${url}: HTTP ${response.status} without a coded error`);
  }
}
