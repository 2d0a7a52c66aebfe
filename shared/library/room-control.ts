/**
 * The teacher's controls, for a program: start, pause, resume and stop a room's run and read
 * its status, over the server's HTTP API (docs/http-api.md) with the teacher token. What the
 * teacher page does with buttons, a Node script or a test does with this.
 */
import { z } from 'zod';
import { ERROR_CODES, WebringError } from '../protocol/errors';
import type { RoomJoinInfo, RoomStatus, startConfigFieldsSchema } from '../protocol';

/** A run's recipe as sent: every field may be left out and takes its default (docs/recipe.md). */
export type StartOptions = z.input<typeof startConfigFieldsSchema>;

export interface RoomControlOptions {
  /** The signaling server's http(s) origin. */
  url: string | URL;
  /** The teacher token the server printed (or was given as TEACHER_TOKEN). */
  teacherToken: string;
}

const errorReplySchema = z.object({ error: z.object({ code: z.enum(ERROR_CODES), message: z.string(), field: z.string().optional() }) });

export class RoomControl {
  private readonly origin: string;

  constructor(private readonly options: RoomControlOptions) {
    this.origin = new URL(options.url).origin;
  }

  /** Starts a run in `room` with `config`; resolves with the room's status, rejects with the server's coded refusal (ERR_BAD_REQUEST names the field). */
  async start(room: string, config: StartOptions = {}): Promise<RoomStatus> {
    return (await this.call<{ status: RoomStatus }>('POST', room, '/start', config)).status;
  }
  async stop(room: string): Promise<RoomStatus> {
    return (await this.call<{ status: RoomStatus }>('POST', room, '/stop')).status;
  }
  async pause(room: string): Promise<RoomStatus> {
    return (await this.call<{ status: RoomStatus }>('POST', room, '/pause')).status;
  }
  async resume(room: string): Promise<RoomStatus> {
    return (await this.call<{ status: RoomStatus }>('POST', room, '/resume')).status;
  }
  /** The room's members, run, step and consistency (what the teacher page shows). */
  status(room: string): Promise<RoomStatus> {
    return this.call<RoomStatus>('GET', room, '');
  }
  /** The room's join code and class links. */
  joinInfo(room: string): Promise<RoomJoinInfo> {
    return this.call<RoomJoinInfo>('GET', room, '/join');
  }

  private async call<T>(method: 'GET' | 'POST', room: string, path: string, body?: unknown): Promise<T> {
    const url = `${this.origin}/api/rooms/${encodeURIComponent(room)}${path}`;
    const response = await fetch(url, {
      method,
      headers: { authorization: `Bearer ${this.options.teacherToken}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const reply: unknown = await response.json().catch(() => null);
    if (response.ok) return reply as T;
    const refused = errorReplySchema.safeParse(reply);
    if (refused.success) throw new WebringError(refused.data.error.code, refused.data.error.message, refused.data.error.field);
    throw new WebringError('ERR_INTERNAL', `${method} ${url}: HTTP ${response.status} without a coded error`);
  }
}
