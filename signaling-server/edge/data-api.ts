/**
 * The data service's HTTP side (the wire format is shared/data/data-service.ts): a room's
 * readers fetch the examples they are about to train, by index, and the server counts the
 * bytes it sent for each room's current run, so the teacher sees whether the class pulled
 * the training set about once per epoch or once per tab.
 *
 *   GET /api/rooms/:room/data/:dataset/:split?ranges=…
 *
 * Read like any room read (join code, member token or teacher token) and rate-limited
 * with the rest of /api. The examples of a dataset never change, so a reply may be cached
 * privately for a day: a tab that reloads mid-run reads its test shard from its own cache.
 */
import type { Express, RequestHandler } from 'express';
import { WebringError } from '../../shared/protocol/errors';
import { parseOrThrow, roomNameSchema } from '../../shared/protocol';
import { EXAMPLE_BYTES, decodeRanges, isDataSplit, isDatasetKind, splitCount } from '../../shared/data/data-service';
import { MNIST_PIXELS } from '../../shared/data/mnist-format';
import type { DatasetLibrary } from '../datasets';
import type { ServerContext } from '../context';

/** The examples of a dataset are fixed, so a reply holds for as long as a browser cares to keep it. */
const EXAMPLES_CACHE_CONTROL = 'private, max-age=86400, immutable';

/**
 * Bytes of examples this process sent, per room, for the room's current run. With several
 * signaling nodes over Redis each counts what it served itself.
 */
export class ServedBytes {
  private readonly byRoom = new Map<string, { run: number; bytes: number }>();

  add(room: string, run: number, bytes: number): void {
    const entry = this.byRoom.get(room);
    if (!entry || entry.run !== run) this.byRoom.set(room, { run, bytes });
    else entry.bytes += bytes;
  }

  /** What run `run` of `room` was sent so far; 0 for a run this process served nothing of. */
  of(room: string, run: number): number {
    const entry = this.byRoom.get(room);
    return entry && entry.run === run ? entry.bytes : 0;
  }
}

export function registerDataApi(app: Express, ctx: ServerContext, library: DatasetLibrary, served: ServedBytes, requireRoomReader: RequestHandler): void {
  app.get('/api/rooms/:room/data/:dataset/:split', requireRoomReader, async (req, res) => {
    const name = parseOrThrow(roomNameSchema, req.params.room);
    const { dataset, split } = req.params as { dataset: string; split: string };
    if (!isDatasetKind(dataset)) throw new WebringError('ERR_BAD_REQUEST', `no dataset ${dataset.slice(0, 40)}; there are mnist-60k and mnist-10k`, 'dataset');
    if (!isDataSplit(split)) throw new WebringError('ERR_BAD_REQUEST', `no split ${split.slice(0, 40)}; there are train and test`, 'split');
    const ranges = req.query.ranges;
    if (typeof ranges !== 'string') throw new WebringError('ERR_BAD_REQUEST', 'name the examples once: ?ranges=0-31,40,45-50', 'ranges');
    const indices = decodeRanges(ranges, splitCount(dataset, split));
    const room = await ctx.rooms.read(name);
    if (!room) throw new WebringError('ERR_UNKNOWN_ROOM', `room ${name} does not exist`);
    const { labels, pixels } = (await library.get(dataset))[split];
    const count = indices.length;
    const body = Buffer.allocUnsafe(count * EXAMPLE_BYTES);
    for (let i = 0; i < count; i++) {
      const at = indices[i]!;
      body[i] = labels[at]!;
      body.set(pixels.subarray(at * MNIST_PIXELS, (at + 1) * MNIST_PIXELS), count + i * MNIST_PIXELS);
    }
    served.add(name, room.runNumber, body.byteLength);
    res.set('Content-Type', 'application/octet-stream');
    res.set('Cache-Control', EXAMPLES_CACHE_CONTROL);
    res.send(body);
  });
}
