/**
 * HTTP: the room API (the contract the dashboard, Node workers and tests use), the MNIST
 * file, health, and the built client.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import path from 'node:path';
import express, { type NextFunction, type Request, type Response } from 'express';
import { WebringError, toWebringError, type ErrorCode } from '../shared/errors';
import { MAX_HTTP_JSON_BYTES, parseOrThrow, roomNameSchema, startConfigSchema } from '../shared/protocol';
import { Room } from './room';
import { channelOf, type ServerContext } from './context';

const HTTP_STATUS: Partial<Record<ErrorCode, number>> = {
  ERR_BAD_REQUEST: 400,
  ERR_UNAUTHORIZED: 401,
  ERR_UNKNOWN_ROOM: 404,
  ERR_BAD_STATE: 409,
  ERR_NO_WORKERS: 409,
  ERR_PAYLOAD_TOO_LARGE: 413,
};

export interface HttpOptions {
  teacherToken: string;
  clientDir: string;
  mnist: () => Promise<Uint8Array>;
  startedAt: number;
}

function digest(s: string): Buffer {
  return createHash('sha256').update(s).digest();
}

export function createHttpApp(ctx: ServerContext, options: HttpOptions): express.Express {
  const app = express();
  app.disable('x-powered-by');
  const tokenDigest = digest(options.teacherToken);

  /** Constant-time comparison of digests, so timing leaks nothing about the token. */
  const requireTeacher = (req: Request, _res: Response, next: NextFunction) => {
    const header = req.get('authorization') ?? '';
    const match = /^Bearer (.+)$/.exec(header);
    if (!match || !timingSafeEqual(digest(match[1]!), tokenDigest)) {
      next(new WebringError('ERR_UNAUTHORIZED', 'teacher token required: Authorization: Bearer <token>'));
      return;
    }
    next();
  };

  const roomName = (req: Request): string => parseOrThrow(roomNameSchema, req.params.room);

  app.get('/healthz', (_req, res) => {
    res.json({ ok: true, uptimeS: Math.round((Date.now() - options.startedAt) / 1000), rooms: ctx.rooms.count });
  });

  // A room nobody joined yet reads as empty and idle, without being created.
  app.get('/api/rooms/:room', (req, res) => {
    const name = roomName(req);
    res.json((ctx.rooms.get(name) ?? new Room(name)).status());
  });

  app.get('/api/rooms/:room/metrics', (req, res) => {
    const name = roomName(req);
    res.json((ctx.rooms.get(name) ?? new Room(name)).metrics());
  });

  const json = express.json({ limit: MAX_HTTP_JSON_BYTES, strict: true });

  app.post('/api/rooms/:room/start', requireTeacher, json, (req, res) => {
    const name = roomName(req);
    const config = parseOrThrow(startConfigSchema, req.body ?? {});
    const room = ctx.rooms.get(name);
    if (!room) throw new WebringError('ERR_NO_WORKERS', `no workers have joined room ${name}`);
    const start = room.start(config);
    ctx.log.info(`room ${name}: training started, generation ${start.generation}, ${JSON.stringify(config)}`);
    ctx.io.to(channelOf(name)).emit('train:start', start);
    res.json({ ok: true, status: room.status() });
  });

  app.post('/api/rooms/:room/stop', requireTeacher, (req, res) => {
    const name = roomName(req);
    const room = ctx.rooms.get(name);
    if (!room) throw new WebringError('ERR_UNKNOWN_ROOM', `room ${name} does not exist`);
    room.requestStop();
    ctx.io.to(channelOf(name)).emit('train:stop', { reason: 'teacher' });
    res.json({ ok: true, status: room.status() });
  });

  app.get('/data/mnist.bin', async (_req, res, next) => {
    try {
      const bytes = await options.mnist();
      res.set('Content-Type', 'application/octet-stream');
      res.set('Cache-Control', 'public, max-age=3600');
      res.send(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
    } catch (err) {
      next(err);
    }
  });

  app.use('/api', (_req, _res, next) => next(new WebringError('ERR_BAD_REQUEST', 'no such API endpoint')));

  // `/teacher` serves teacher.html; the built client is hashed, so it may be cached.
  app.use(express.static(options.clientDir, { extensions: ['html'], index: 'index.html' }));
  app.get('/', (_req, res) => res.sendFile(path.join(options.clientDir, 'index.html')));

  app.use((err: unknown, _req: Request, res: Response, _next: NextFunction) => {
    const bodyParserType = (err as { type?: string }).type;
    let coded: WebringError;
    if (bodyParserType === 'entity.too.large') coded = new WebringError('ERR_PAYLOAD_TOO_LARGE', `JSON bodies are limited to ${MAX_HTTP_JSON_BYTES} bytes`);
    else if (bodyParserType === 'entity.parse.failed') coded = new WebringError('ERR_BAD_REQUEST', 'body is not valid JSON');
    else coded = toWebringError(err);
    const status = HTTP_STATUS[coded.code] ?? 500;
    if (status === 500) ctx.log.error(`http: ${coded.message}`);
    res.status(status).json({ ok: false, error: coded.toBody() });
  });

  return app;
}
