/**
 * The folder signaling-server/edge/ owns what faces the network before a handler runs:
 * the HTTP API (this file), the socket handshake's join code (socket-auth.ts, join-codes.ts),
 * tokens (tokens.ts), rate limits (rate-limits.ts), the client's address behind a load
 * balancer (client-address.ts), the HTTPS certificate (tls.ts) and the TURN credentials
 * workers relay through (turn.ts). It may import shared/, data/ (the datasets it serves) and
 * rooms/ (the rooms' context, and what the API reads and starts); never handlers/ (socket
 * events are theirs) or the top-level wiring, and rooms/ never imports edge/.
 *
 * This file: HTTP, the room API (the contract the dashboard, Node workers and tests use),
 * health, and the built client; data-api.ts adds the data service's examples.
 */
import { startConfigSchema } from '../../shared/tasks/start-config';
import { collectSettingFor, collectTaskOf } from '../../shared/tasks/collect';
import { DEFAULT_TASK } from '../../shared/tasks/registry';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import type { TrustProxy } from './client-address';
import type { RateLimits } from './rate-limits';
import { hubKeyFor, joinCodeMatches } from './join-codes';
import { normalizeJoinCode } from '../../shared/protocol/join-code';
import type { RelayLedger } from '../rooms/relay-ledger';
import type { NetworkChecks } from '../rooms/network-checks';
import { registerNetworkCheckApi } from './network-check-api';
import express, { type NextFunction, type Request, type Response } from 'express';
import multer from 'multer';
import { UploadGate } from './upload-gate';
import { WebringError, toWebringError, type ErrorCode } from '../../shared/protocol/errors';
import { MAX_HTTP_JSON_BYTES, collectRequestSchema, seatsRequestSchema, parseOrThrow, roomNameSchema, type HubKeyInfo, type RoomJoinInfo, type RoomStatus, type ServerInfo } from '../../shared/protocol';
import { CHECKPOINT_FILES, CHECKPOINT_FILE_NAMES, LATEST_CHECKPOINT, type CheckpointFile } from '../../shared/checkpoints/checkpoint';
import { startRun } from '../rooms/runs';
import { allowHubAgain, removeHubAsTeacher } from '../rooms/hub-access';
import { setSeats } from '../rooms/seat-settings';
import { Room } from '../rooms/room';
import { channelOf, type RoomContext } from '../rooms/room-context';
import { bearerToken, tokenHash, tokensEqual } from './tokens';
import { TEACHER_READER, registerDataApi, type ServedBytes } from './data-api';
import { ADDRESS_READER, MEMBER_READER, type DataRefusals } from './data-refusals';
import type { CheckpointAdmission, CheckpointUpload } from '../rooms/checkpoint-store';
import type { DatasetLibrary } from '../data/datasets';
import { pageHeaders } from './page-headers';
import { BodiesInFlight } from './in-flight';
import { countRequests } from './http-budget';

/** Per file of a checkpoint upload; a 100k-parameter model's weights and Adam state are ~1.2 MB. */
const MAX_CHECKPOINT_FILE_BYTES = 32 * 1024 * 1024;
/** A multipart body's boundaries and part headers, on top of its files. */
const MULTIPART_OVERHEAD_BYTES = 64 * 1024;
/** Who wrote an imported checkpoint, as its listing shows it. */
const IMPORTED_WRITER = 'imported by the teacher';

const HTTP_STATUS: Partial<Record<ErrorCode, number>> = {
  ERR_BAD_REQUEST: 400,
  ERR_UNAUTHORIZED: 401,
  ERR_BAD_JOIN_CODE: 403,
  ERR_NOT_CHIEF: 403,
  ERR_UNKNOWN_ROOM: 404,
  ERR_UNKNOWN_CHECKPOINT: 404,
  ERR_BAD_STATE: 409,
  ERR_NO_WORKERS: 409,
  ERR_STALE_RUN: 409,
  ERR_STEP_OUT_OF_RANGE: 409,
  ERR_OTHER_TASK: 409,
  ERR_UNKNOWN_TASK: 400,
  ERR_PAYLOAD_TOO_LARGE: 413,
  ERR_RATE_LIMITED: 429,
  ERR_DATA_BUDGET: 429,
};

/**
 * Express and its parsers mark the client's own mistakes with a 4xx `status` (a URL
 * parameter that is not valid percent-encoding, a multipart body busboy cannot read), so
 * they are a coded 400, not a 500.
 */
function clientErrorStatus(err: unknown): boolean {
  const status = (err as { status?: unknown; statusCode?: unknown } | null)?.status ?? (err as { statusCode?: unknown } | null)?.statusCode;
  return typeof status === 'number' && status >= 400 && status < 500;
}

export interface HttpOptions {
  teacherToken: string;
  clientDir: string;
  /** The examples the data service hands out (data-api.ts), and what it sent per room. */
  datasets: DatasetLibrary;
  served: ServedBytes;
  /** Who it turned away lately (data-refusals.ts). */
  refusals: DataRefusals;
  /** What members relayed through this server (handlers/link-relay.ts). */
  relay: RelayLedger;
  /** The teacher's network checks and the devices' answers (rooms/network-checks.ts). */
  networkChecks: NetworkChecks;
  startedAt: number;
  /** Ports and URLs, known once the servers listen. */
  info: () => ServerInfo;
  joinInfo: (room: string) => RoomJoinInfo;
  /** Which load balancers' X-Forwarded-For req.ip believes. */
  trustProxy: TrustProxy;
  /** Derives the join codes that also let a reader see a room. */
  joinSecret: Buffer;
  /** The same limits as the sockets' (edge/rate-limits.ts): requests per address, and wrong join codes. */
  limits: RateLimits;
}

export function createHttpApp(ctx: RoomContext, options: HttpOptions): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', options.trustProxy);
  const store = ctx.checkpoints;

  const requireTeacher = (req: Request, _res: Response, next: NextFunction) => {
    const token = bearerToken(req.get('authorization'));
    if (!token || !tokensEqual(token, options.teacherToken)) {
      next(new WebringError('ERR_UNAUTHORIZED', 'teacher token required: Authorization: Bearer <token>'));
      return;
    }
    next();
  };

  const roomName = (req: Request): string => parseOrThrow(roomNameSchema, req.params.room);

  /** A room's status with what the data service sent for its current run. */
  const statusOf = (room: Room): RoomStatus => {
    const status = room.status();
    const served = options.served.of(room.name, status.run);
    status.data.bytesServed = served.bytes;
    status.data.trainBytesServed = served.trainBytes;
    status.data.refused = options.refusals.of(room.name, status.run, [...status.members, ...status.waiting]);
    status.relay = options.relay.of(room.name, ctx.clock.now());
    status.network = options.networkChecks.of(room.name);
    return status;
  };

  /**
   * Reading a room (its roster, curves and checkpoints) needs what joining needs: the
   * room's join code (`X-Join-Code`, or `?code=` for download links), a member's token, or
   * the teacher token. A wrong code counts against the address's wrong-code budget, as a
   * handshake's does, so the API is no side door for guessing. Who read is left in
   * `res.locals.roomReader` (the data service's budgets count per reader).
   */
  const requireRoomReader = async (req: Request, res: Response, next: NextFunction) => {
    const name = roomName(req);
    const ip = req.ip ?? req.socket.remoteAddress ?? 'unknown';
    const token = bearerToken(req.get('authorization'));
    // Tokens first: a member or the teacher reads even from an address locked out for wrong codes (a school's NAT).
    if (token && tokensEqual(token, options.teacherToken)) {
      res.locals.roomReader = TEACHER_READER;
      return next();
    }
    const member = token ? (await ctx.rooms.read(name))?.memberByTokenHash(tokenHash(token)) : null;
    if (member) {
      res.locals.roomReader = `${MEMBER_READER}${member.id}`;
      return next();
    }
    const typed = req.get('x-join-code') ?? (typeof req.query.code === 'string' ? req.query.code : undefined);
    if (typed !== undefined) {
      const blocked = await options.limits.joinCodeGuessesBlocked(ip);
      if (blocked) {
        res.set('Retry-After', String(Math.ceil(blocked.retryAfterMs / 1000)));
        return next(new WebringError('ERR_RATE_LIMITED', `too many wrong join codes from this address; try again in ${Math.ceil(blocked.retryAfterMs / 1000)} s`));
      }
      const code = normalizeJoinCode(typed);
      if (code !== null && joinCodeMatches(options.joinSecret, name, code)) {
        res.locals.roomReader = `${ADDRESS_READER}${ip}`;
        return next();
      }
      await options.limits.wrongJoinCode(ip);
      return next(new WebringError('ERR_BAD_JOIN_CODE', `that join code does not open room ${name}`, 'code'));
    }
    next(new WebringError('ERR_UNAUTHORIZED', `reading room ${name} needs its join code (X-Join-Code), a member token or the teacher token (Authorization: Bearer)`));
  };

  // Bodies arriving per address, and their timeouts (in-flight.ts); then every /api request
  // counts against its member's, the teacher's or its address's budget (http-budget.ts).
  const bodies = new BodiesInFlight(ctx.timers);
  app.use('/api', bodies.admit, countRequests(ctx, options.limits, options.teacherToken));

  app.get('/healthz', async (_req, res) => {
    res.json({ ok: true, uptimeS: Math.round((Date.now() - options.startedAt) / 1000), rooms: (await ctx.rooms.names()).length });
  });

  app.get('/api/info', (_req, res) => {
    res.json(options.info());
  });

  // A room nobody joined yet reads as empty and idle, without being created.
  app.get('/api/rooms/:room', requireRoomReader, async (req, res) => {
    const name = roomName(req);
    res.json(statusOf((await ctx.rooms.read(name)) ?? new Room(name, ctx.clock)));
  });

  // The join code and class links: only the teacher may hand them out.
  app.get('/api/rooms/:room/join', requireTeacher, (req, res) => {
    res.json(options.joinInfo(roomName(req)));
  });

  // The hub key makes a hub, which sees every student's gradient: only the teacher may have it.
  app.get('/api/rooms/:room/hub-key', requireTeacher, (req, res) => {
    const room = roomName(req);
    res.set('Cache-Control', 'no-store');
    res.json({ room, hubKey: hubKeyFor(options.joinSecret, room) } satisfies HubKeyInfo);
  });

  // The teacher removes the hub, and no hub joins until the teacher allows one again.
  app.delete('/api/rooms/:room/hub', requireTeacher, async (req, res) => {
    const room = await removeHubAsTeacher(ctx, roomName(req));
    res.json({ ok: true, status: statusOf(room) });
  });

  app.post('/api/rooms/:room/hub/allow', requireTeacher, async (req, res) => {
    const name = roomName(req);
    const room = await allowHubAgain(ctx, name);
    res.json({ ok: true, status: statusOf(room ?? new Room(name, ctx.clock)) });
  });

  app.get('/api/rooms/:room/metrics', requireRoomReader, async (req, res) => {
    res.json(await ctx.rooms.metrics(roomName(req)));
  });

  const json = express.json({ limit: MAX_HTTP_JSON_BYTES, strict: true });

  /** A start on the class's own data that names no classes trains the classes the room collects for, when it collects for the run's task. */
  const withCollectedClasses = async (name: string, body: unknown): Promise<unknown> => {
    if (typeof body !== 'object' || body === null || Array.isArray(body)) return body;
    const raw = body as Record<string, unknown>;
    if (raw.data !== 'own' || raw.classes !== undefined) return body;
    const collect = (await ctx.rooms.read(name))?.collect;
    if (!collect?.classes || collectTaskOf(collect).id !== (raw.task ?? DEFAULT_TASK.id)) return body;
    return { ...raw, classes: collect.classes };
  };

  /**
   * What the students collect before a run on the class's own data: a task's items (the
   * classes of a task whose class names them, none for a text task), or classes null to
   * stop. The room stays while it collects, even with nobody in it.
   */
  app.put('/api/rooms/:room/collect', requireTeacher, json, async (req, res) => {
    const name = roomName(req);
    const collect = collectSettingFor(parseOrThrow(collectRequestSchema, req.body ?? {}));
    const { room } = (await ctx.rooms.update(name, (r) => r.setCollect(collect), { create: true }))!;
    await ctx.rooms.releaseIfIdle(name);
    ctx.io.to(channelOf(name)).emit('room:collect', collect);
    res.json({ ok: true, status: statusOf(room) });
  });

  /**
   * How many seats one client address may hold in the room (rooms/seats.ts), and whether the
   * teacher vouches that members sharing an address are distinct devices (rooms/secure-count.ts).
   * Members already in keep their seats; the room stays while it has a setting.
   */
  app.put('/api/rooms/:room/seats', requireTeacher, json, async (req, res) => {
    const room = await setSeats(ctx, roomName(req), parseOrThrow(seatsRequestSchema, req.body ?? {}));
    res.json({ ok: true, perAddress: room.seatsPerAddress, vouched: room.sharedAddressVouched, status: statusOf(room) });
  });

  app.post('/api/rooms/:room/start', requireTeacher, json, async (req, res) => {
    const name = roomName(req);
    const config = parseOrThrow(startConfigSchema, await withCollectedClasses(name, req.body ?? {}));
    const { room } = await startRun(ctx, name, config);
    res.json({ ok: true, status: statusOf(room) });
  });

  const parseUpload = multer({
    storage: multer.memoryStorage(),
    limits: { fileSize: MAX_CHECKPOINT_FILE_BYTES, files: CHECKPOINT_FILE_NAMES.length, fields: 0, parts: CHECKPOINT_FILE_NAMES.length },
  }).fields(CHECKPOINT_FILE_NAMES.map((name) => ({ name, maxCount: 1 })));
  // One upload per room, and a byte budget for them all, before the body is read (upload-gate.ts).
  const gate = new UploadGate(MAX_CHECKPOINT_FILE_BYTES * CHECKPOINT_FILE_NAMES.length + MULTIPART_OVERHEAD_BYTES).admit(roomName);
  // busboy's own errors (a truncated body, a missing boundary) are not MulterErrors, and
  // would otherwise be a 500 for what is the client's malformed request.
  const upload = (req: Request, res: Response, next: NextFunction) =>
    gate(req, res, (refused?: unknown) => (refused ? next(refused) : parseUpload(req, res, (err?: unknown) => {
      if (err && !(err instanceof multer.MulterError)) next(new WebringError('ERR_BAD_REQUEST', `bad checkpoint upload: ${(err as Error).message}`));
      else next(err);
    })));

  /** Only the room's current chief writes checkpoints; it proves who it is with its member token. */
  const requireChief = async (req: Request, res: Response, next: NextFunction) => {
    const room = await ctx.rooms.read(roomName(req));
    const token = bearerToken(req.get('authorization'));
    const member = room && token ? room.memberByTokenHash(tokenHash(token)) : null;
    if (!member?.chief) {
      next(new WebringError('ERR_NOT_CHIEF', member ? 'only the current chief writes checkpoints' : 'not a member of this room'));
      return;
    }
    // Refused before the body is read: no run, no checkpoint (checked again when it is stored).
    if (!room!.isTraining) {
      next(new WebringError('ERR_BAD_STATE', `room ${room!.name} has no run in progress: checkpoints are stored only during a run`));
      return;
    }
    res.locals.writer = member.id;
    res.locals.maxToKeep = room!.maxToKeep;
    next();
  };
  /** The five files of a checkpoint upload; ERR_BAD_REQUEST names a missing one. */
  const uploadedFiles = (req: Request): CheckpointUpload => {
    const files = (req.files ?? {}) as Record<string, Express.Multer.File[]>;
    const part = (file: CheckpointFile): Buffer => {
      const found = files[file]?.[0];
      if (!found) throw new WebringError('ERR_BAD_REQUEST', `the upload has no ${file}`, file);
      return found.buffer;
    };
    return {
      modelJson: part(CHECKPOINT_FILES.model),
      weights: part(CHECKPOINT_FILES.weights),
      optimizerSpecs: part(CHECKPOINT_FILES.optimizerSpecs),
      optimizerData: part(CHECKPOINT_FILES.optimizerData),
      metadata: part(CHECKPOINT_FILES.metadata),
    };
  };

  /**
   * The teacher brings a checkpoint from elsewhere: a program's own backup (fitDataset's
   * `backup`) after this server lost its own, say. It is checked as the chief's are (its
   * files agree with each other and with the metadata's hashes), filed under this room
   * whichever room wrote it, unvouched (nobody in this class reported its hash), and a
   * start's `resumeFrom` can name it.
   */
  app.post('/api/rooms/:room/checkpoints/import', requireTeacher, bodies.untimed, upload, async (req, res) => {
    const name = roomName(req);
    const room = await ctx.rooms.read(name);
    if (!room) throw new WebringError('ERR_UNKNOWN_ROOM', `room ${name} does not exist: a member joins it first`);
    const files = uploadedFiles(req);
    let metadata: unknown;
    try {
      metadata = JSON.parse(files.metadata.toString('utf8'));
    } catch {
      throw new WebringError('ERR_BAD_REQUEST', 'metadata.json is not JSON', CHECKPOINT_FILES.metadata);
    }
    if (typeof metadata !== 'object' || metadata === null || Array.isArray(metadata)) throw new WebringError('ERR_BAD_REQUEST', 'metadata.json is not an object', CHECKPOINT_FILES.metadata);
    const refiled = { ...files, metadata: Buffer.from(JSON.stringify({ ...metadata, room: name })) };
    const info = await store.write(name, refiled, IMPORTED_WRITER, room.maxToKeep, async () => ({ writerName: IMPORTED_WRITER, trust: { state: 'unvouched', by: null } }));
    ctx.log.info(`room ${name}: the teacher imported checkpoint ${info.id} at step ${info.step} (${info.bytes} B)`);
    res.status(201).json({ ok: true, checkpoint: info });
  });

  app.post('/api/rooms/:room/checkpoints', requireChief, bodies.untimed, upload, async (req, res) => {
    const name = roomName(req);
    const writer = res.locals.writer as string;
    // The room decides, atomically with its run, whether this step may be stored and
    // whether another rank's reported hash already vouches for it (rooms/checkpoint-guard.ts).
    const admit: CheckpointAdmission = async (meta, id) => {
      try {
        const updated = await ctx.rooms.update(name, (room) => ({
          writerName: room.admitCheckpoint(writer, meta.run, meta.step),
          trust: room.noteCheckpoint(id, writer, meta.step, meta.weightsHash),
        }));
        if (!updated) throw new WebringError('ERR_UNKNOWN_ROOM', `room ${name} does not exist`);
        return updated.result;
      } catch (err) {
        const e = toWebringError(err);
        ctx.log.warn(`room ${name}: refused a checkpoint of run ${meta.run}, step ${meta.step} from ${writer}: ${e.code} ${e.message}`);
        throw e;
      }
    };
    const info = await store.write(name, uploadedFiles(req), writer, res.locals.maxToKeep as number, admit);
    ctx.log.info(`room ${name}: checkpoint ${info.id} at step ${info.step} (${info.bytes} B) from ${info.writer}, ${info.trust.state}${info.trust.by ? ` by ${info.trust.by}` : ''}`);
    res.status(201).json({ ok: true, checkpoint: info });
  });

  /** The teacher deletes a checkpoint (a forged one, say); `latest` then names the best one left. */
  app.delete('/api/rooms/:room/checkpoints/:id', requireTeacher, async (req, res) => {
    const name = roomName(req);
    const id = String(req.params.id);
    if (!(await store.remove(name, id))) throw new WebringError('ERR_UNKNOWN_CHECKPOINT', `room ${name} has no checkpoint ${id}`);
    ctx.log.info(`room ${name}: the teacher deleted checkpoint ${id}`);
    res.json({ ok: true, checkpoints: await store.list(name) });
  });

  app.get('/api/rooms/:room/checkpoints', requireRoomReader, async (req, res) => {
    res.json(await store.list(roomName(req)));
  });

  app.get('/api/rooms/:room/checkpoints/:id/:file', requireRoomReader, async (req, res) => {
    const name = roomName(req);
    const file = req.params.file as CheckpointFile;
    if (!CHECKPOINT_FILE_NAMES.includes(file)) throw new WebringError('ERR_UNKNOWN_CHECKPOINT', `no checkpoint file ${file}`);
    const found = await store.resolve(name, String(req.params.id));
    if (!found) throw new WebringError('ERR_UNKNOWN_CHECKPOINT', `room ${name} has no checkpoint ${req.params.id}`);
    if (file === CHECKPOINT_FILES.model && req.params.id === LATEST_CHECKPOINT) {
      // Point 'latest' at the concrete folder, so a checkpoint landing between the model.json
      // and the weights request cannot pair one checkpoint's topology with another's weights.
      const model = JSON.parse(await fs.readFile(path.join(found.dir, file), 'utf8')) as { weightsManifest: Array<{ paths: string[] }> };
      for (const group of model.weightsManifest) group.paths = group.paths.map((p) => `../${found.id}/${path.basename(p)}`);
      res.json(model);
      return;
    }
    res.set('Cache-Control', req.params.id === LATEST_CHECKPOINT ? 'no-store' : 'public, max-age=31536000, immutable');
    res.sendFile(path.join(found.dir, file));
  });

  app.post('/api/rooms/:room/stop', requireTeacher, async (req, res) => {
    const name = roomName(req);
    const room = await ctx.rooms.read(name);
    if (!room) throw new WebringError('ERR_UNKNOWN_ROOM', `room ${name} does not exist`);
    room.requestStop();
    ctx.io.to(channelOf(name)).emit('train:stop', { reason: 'teacher' });
    res.json({ ok: true, status: statusOf(room) });
  });

  /** Pause and Resume: every replica pauses after the same step and waits for the resume. */
  for (const action of ['pause', 'resume'] as const) {
    app.post(`/api/rooms/:room/${action}`, requireTeacher, async (req, res) => {
      const name = roomName(req);
      const updated = await ctx.rooms.update(name, (room) => room[action]());
      if (!updated) throw new WebringError('ERR_UNKNOWN_ROOM', `room ${name} does not exist`);
      ctx.io.to(channelOf(name)).emit(action === 'pause' ? 'train:pause' : 'train:resume');
      res.json({ ok: true, status: statusOf(updated.room) });
    });
  }

  registerDataApi(app, ctx, { library: options.datasets, served: options.served, refusals: options.refusals }, requireRoomReader);
  registerNetworkCheckApi(app, ctx, options.networkChecks, { requireTeacher, requireRoomReader, json });

  app.use('/api', (_req, _res, next) => next(new WebringError('ERR_BAD_REQUEST', 'no such API endpoint')));

  // `/teacher` serves teacher.html; the built client is hashed, so it may be cached.
  app.use(pageHeaders);
  app.use(express.static(options.clientDir, { extensions: ['html'], index: 'index.html' }));
  app.get('/', (_req, res) => res.sendFile(path.join(options.clientDir, 'index.html')));

  app.use((err: unknown, req: Request, res: Response, _next: NextFunction) => {
    // Answered already: a body cut for its time (in-flight.ts), whose parser then failed.
    if (res.headersSent) return;
    // A refusal before the body was read closes the connection rather than read the rest (issue 57).
    if (!req.complete) res.set('Connection', 'close');
    const bodyParserType = (err as { type?: string }).type;
    let coded: WebringError;
    if (err instanceof multer.MulterError) {
      coded =
        err.code === 'LIMIT_FILE_SIZE'
          ? new WebringError('ERR_PAYLOAD_TOO_LARGE', `checkpoint files are limited to ${MAX_CHECKPOINT_FILE_BYTES} bytes each`)
          : new WebringError('ERR_BAD_REQUEST', `bad checkpoint upload: ${err.message}`, err.field);
    } else if (bodyParserType === 'entity.too.large') coded = new WebringError('ERR_PAYLOAD_TOO_LARGE', `JSON bodies are limited to ${MAX_HTTP_JSON_BYTES} bytes`);
    else if (bodyParserType === 'entity.parse.failed') coded = new WebringError('ERR_BAD_REQUEST', 'body is not valid JSON');
    else if (clientErrorStatus(err)) coded = new WebringError('ERR_BAD_REQUEST', (err as Error).message);
    else coded = toWebringError(err);
    const status = HTTP_STATUS[coded.code] ?? 500;
    if (status === 500) ctx.log.error(`http: ${coded.message}`);
    res.status(status).json({ ok: false, error: coded.toBody() });
  });

  return app;
}
