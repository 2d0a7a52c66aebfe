/**
 * The teacher's network check, over HTTP (docs/http-api.md):
 *   POST /api/rooms/:room/network-check   teacher: asks every device of the room to measure
 *                                          its network now (room:network-check), and to time
 *                                          `workload`'s model if the body names one; → {check}
 *   GET  /api/rooms/:room/network-probe?check=N   a reader of the room: NETWORK_PROBE_BYTES
 *                                          of random bytes, to time the download
 *   POST /api/rooms/:room/network-probe?check=N   a reader of the room: a body of up to
 *                                          NETWORK_PROBE_BYTES, to time the upload; → 204
 * A probe only while check N is open (NETWORK_CHECK_WINDOW_MS), one download and one upload
 * per reader (rooms/network-checks.ts): the probe is no way to make the server send or
 * take bytes at will. An upload is decided from its headers alone, before a byte of its body
 * is read (issue 57: the body was buffered whole first, and 60 held uploads for no check
 * held 109 MB): its reader, its check and this reader's one upload, and its Content-Length.
 * Its body is then only counted and dropped: it is timed, never used.
 */
import { randomBytes } from 'node:crypto';
import type { Express, Request, RequestHandler } from 'express';
import { z } from 'zod';
import { WebringError } from '../../shared/protocol/errors';
import { NETWORK_PROBE_BYTES, networkCheckRequestSchema, parseOrThrow, roomNameSchema } from '../../shared/protocol';
import { findTask } from '../../shared/tasks/registry';
import { channelOf, type RoomContext } from '../rooms/room-context';
import type { NetworkChecks } from '../rooms/network-checks';

const checkQuerySchema = z.object({ check: z.coerce.number().int().min(1) });

export function registerNetworkCheckApi(app: Express, ctx: RoomContext, checks: NetworkChecks, guards: { requireTeacher: RequestHandler; requireRoomReader: RequestHandler; json: RequestHandler }): void {
  // One buffer for every download: random, so no link compresses it.
  const probeBody = randomBytes(NETWORK_PROBE_BYTES);
  const readerOf = (locals: Record<string, unknown>): string => String(locals.roomReader);

  app.post('/api/rooms/:room/network-check', guards.requireTeacher, guards.json, async (req, res) => {
    const name = parseOrThrow(roomNameSchema, req.params.room);
    if (!(await ctx.rooms.read(name))) throw new WebringError('ERR_UNKNOWN_ROOM', `room ${name} does not exist: a member joins it first`);
    const { workload } = parseOrThrow(networkCheckRequestSchema, req.body ?? {});
    if (workload && !findTask(workload.task)?.models.some((m) => m.id === workload.model)) {
      throw new WebringError('ERR_BAD_REQUEST', `workload: no model ${workload.model} of task ${workload.task}`, 'workload');
    }
    const check = checks.start(name, ctx.clock.now());
    ctx.io.to(channelOf(name)).emit('room:network-check', { check, ...(workload ? { workload } : {}) });
    res.json({ ok: true, check });
  });

  app.get('/api/rooms/:room/network-probe', guards.requireRoomReader, (req, res) => {
    const { check } = parseOrThrow(checkQuerySchema, req.query);
    checks.probe(parseOrThrow(roomNameSchema, req.params.room), check, readerOf(res.locals), 'down', ctx.clock.now());
    res.set('cache-control', 'no-store').type('application/octet-stream').send(probeBody);
  });

  app.post('/api/rooms/:room/network-probe', guards.requireRoomReader, async (req, res) => {
    const { check } = parseOrThrow(checkQuerySchema, req.query);
    const declared = Number(req.get('content-length') ?? 0);
    if (declared > NETWORK_PROBE_BYTES) {
      throw new WebringError('ERR_PAYLOAD_TOO_LARGE', `a network probe upload is at most ${NETWORK_PROBE_BYTES} bytes; this one says ${declared}`);
    }
    // Claimed before the body is read: a second upload of this reader, even one sent alongside, is refused from its headers.
    checks.probe(parseOrThrow(roomNameSchema, req.params.room), check, readerOf(res.locals), 'up', ctx.clock.now());
    // A connection that died mid-body has nobody to answer; its upload is spent, like one that arrived.
    if (await discardBody(req, NETWORK_PROBE_BYTES)) res.status(204).end();
  });
}

/**
 * Reads `req`'s body to its end, keeping none of it: true once it ended, false when the
 * connection died first. Throws ERR_PAYLOAD_TOO_LARGE past `maxBytes` (a chunked body says
 * no length up front); the rest is then left unread, and the refusal closes the connection.
 */
function discardBody(req: Request, maxBytes: number): Promise<boolean> {
  return new Promise((resolve, reject) => {
    let bytes = 0;
    const onData = (chunk: Buffer) => {
      bytes += chunk.length;
      if (bytes <= maxBytes) return;
      req.off('data', onData);
      req.pause();
      reject(new WebringError('ERR_PAYLOAD_TOO_LARGE', `a network probe upload is at most ${maxBytes} bytes`));
    };
    req.on('data', onData);
    req.once('end', () => resolve(true));
    // 'close' without 'end': the client went, or in-flight.ts cut the body for its time.
    req.once('close', () => resolve(req.complete));
  });
}
