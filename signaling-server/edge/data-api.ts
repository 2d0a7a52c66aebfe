/**
 * The data service's HTTP side (the wire format is shared/data/data-service.ts): a room's
 * readers fetch the examples they are about to train, by index, and the server counts the
 * bytes it sent for each room's current run, so the teacher sees whether the class pulled
 * the training set about once per epoch or once per tab.
 *
 *   GET /api/rooms/:room/data/:dataset/:split?ranges=…
 *
 * Read like any room read (join code, member token or teacher token; workers use their
 * member token, so a lockout for wrong codes never stalls them) and rate-limited with the
 * rest of /api. Each reply is bounded to what a worker of the room's run asks for at once,
 * and paid for out of the reader's and the room's budgets for the epoch; at most one reply
 * per connection waits to be sent, and a connection that stops reading is cut
 * (data-budget.ts). The examples of a dataset never change, so a reply may be cached
 * privately for a day: a tab that reloads mid-run reads its test shard from its own cache.
 */
import type { Express, RequestHandler, Response } from 'express';
import { WebringError } from '../../shared/protocol/errors';
import { parseOrThrow, roomNameSchema } from '../../shared/protocol';
import { decodeRanges, exampleBytes, isDataSplit, splitCount, type DataSplit } from '../../shared/data/data-service';
import { examplesPerRequest } from '../../shared/data/streamed-dataset';
import { DATASET_IDS, findDataset } from '../../shared/tasks/registry';
import { featureCount } from '../../shared/tasks/task';
import { DATA_BUDGET_RETRY_AFTER_S, DataBudgets, UnsentReplies, budgetPlan } from './data-budget';
import type { DatasetLibrary } from '../data/datasets';
import type { DataRefusals } from './data-refusals';
import type { RoomContext } from '../rooms/room-context';

/** The examples of a dataset are fixed, so a reply holds for as long as a browser cares to keep it. */
const EXAMPLES_CACHE_CONTROL = 'private, max-age=86400, immutable';

/**
 * Bytes of examples this process sent, per room, for the room's current run. With several
 * signaling nodes over Redis each counts what it served itself.
 */
export class ServedBytes {
  private readonly byRoom = new Map<string, { run: number; bytes: number; trainBytes: number }>();

  add(room: string, run: number, bytes: number, split: DataSplit): void {
    let entry = this.byRoom.get(room);
    if (!entry || entry.run !== run) this.byRoom.set(room, (entry = { run, bytes: 0, trainBytes: 0 }));
    entry.bytes += bytes;
    if (split === 'train') entry.trainBytes += bytes;
  }

  /** What run `run` of `room` was sent so far, of both splits and of the training split; 0 for a run this process served nothing of. */
  of(room: string, run: number): { bytes: number; trainBytes: number } {
    const entry = this.byRoom.get(room);
    return entry && entry.run === run ? { bytes: entry.bytes, trainBytes: entry.trainBytes } : { bytes: 0, trainBytes: 0 };
  }
}

/** `res.locals.roomReader` of the teacher, whose reads count for the room but against no budget of its own. */
export const TEACHER_READER = 'teacher';

/** Who read, as requireRoomReader (http-api.ts) left it: a budget key, or null for the teacher. */
function budgetReader(res: Response): string | null {
  const reader = res.locals.roomReader as string | undefined;
  if (reader === undefined) throw new WebringError('ERR_INTERNAL', 'a data request passed no reader check');
  return reader === TEACHER_READER ? null : reader;
}

/** What the data service reads from and writes to: the datasets, the bytes it sent, and whom it refused. */
export interface DataApiParts {
  library: DatasetLibrary;
  served: ServedBytes;
  refusals: DataRefusals;
}

export function registerDataApi(app: Express, ctx: RoomContext, { library, served, refusals }: DataApiParts, requireRoomReader: RequestHandler): void {
  const budgets = new DataBudgets();
  const unsent = new UnsentReplies(ctx.timers);
  app.get('/api/rooms/:room/data/:dataset/:split', requireRoomReader, async (req, res) => {
    // Before anything is read or awaited: a pipelined request behind an unread reply costs nothing more.
    unsent.claimConnection(req, res);
    const name = parseOrThrow(roomNameSchema, req.params.room);
    const { dataset, split } = req.params as { dataset: string; split: string };
    const found = findDataset(dataset);
    if (!found) throw new WebringError('ERR_BAD_REQUEST', `no dataset ${dataset.slice(0, 40)}; there are ${DATASET_IDS.join(', ')}`, 'dataset');
    const features = featureCount(found.task.example);
    if (!isDataSplit(split)) throw new WebringError('ERR_BAD_REQUEST', `no split ${split.slice(0, 40)}; there are train and test`, 'split');
    const ranges = req.query.ranges;
    if (typeof ranges !== 'string') throw new WebringError('ERR_BAD_REQUEST', 'name the examples once: ?ranges=0-31,40,45-50', 'ranges');
    const room = await ctx.rooms.read(name);
    if (!room) throw new WebringError('ERR_UNKNOWN_ROOM', `room ${name} does not exist`);
    const plan = budgetPlan(room.runConfig, dataset);
    const indices = decodeRanges(ranges, splitCount(found.dataset, split), examplesPerRequest(plan.maxShare));
    const count = indices.length;
    const bytes = count * exampleBytes(features);
    const send = unsent.admit(req, res, req.ip ?? req.socket.remoteAddress ?? 'unknown', bytes);
    const reader = budgetReader(res);
    try {
      budgets.charge(name, room.dataWindow, plan, reader, bytes);
    } catch (refusal) {
      res.set('Retry-After', String(DATA_BUDGET_RETRY_AFTER_S));
      // Never silent: the teacher's page names the reader until it is served again.
      if (refusal instanceof WebringError && reader !== null) refusals.refused(name, room.runNumber, reader, { at: ctx.clock.now(), error: refusal.toBody(), retryAfterS: DATA_BUDGET_RETRY_AFTER_S });
      throw refusal;
    }
    if (reader !== null) refusals.served(name, reader);
    const { labels, features: bytesOf } = (await library.get(found.dataset))[split];
    const body = Buffer.allocUnsafe(bytes);
    for (let i = 0; i < count; i++) {
      const at = indices[i]!;
      body[i] = labels[at]!;
      body.set(bytesOf.subarray(at * features, (at + 1) * features), count + i * features);
    }
    served.add(name, room.runNumber, body.byteLength, split);
    res.set('Content-Type', 'application/octet-stream');
    res.set('Cache-Control', EXAMPLES_CACHE_CONTROL);
    res.set('Content-Length', String(bytes));
    send(body);
  });
}
