/**
 * What checkpoint uploads may hold of the server's memory. An upload is parsed into memory
 * (multer's memoryStorage) and checked whole before it is written (the files must agree
 * with each other and with the metadata's hashes: rooms/checkpoint-store.ts). Issue 38
 * found nothing bounded how many run at once: a room's chief, or the teacher's imports,
 * could hold 160 MB per request, as many requests as it liked. Now, before a byte of the
 * body is read:
 * - one upload per room at a time (a chief uploads one checkpoint after another anyway);
 * - the bytes of all uploads in flight stay within a budget per process: an upload counts
 *   the length it declares (Content-Length), or the most an upload may be when it declares
 *   none (chunked); the parser stops at each file's limit whatever a client claims.
 * A refusal is ERR_RATE_LIMITED (429): the chief's writer keeps the checkpoint and the next
 * save goes out. Streaming the files to disk as they arrive would bound memory further; the
 * checks read each file whole, so the budget bounds it instead (docs/security.md).
 */
import type { NextFunction, Request, Response } from 'express';
import { WebringError } from '../../shared/protocol/errors';

/** All checkpoint uploads in flight together hold at most this many bytes: four of the largest models'. */
export const UPLOAD_BUDGET_BYTES = 512 * 1024 * 1024;

export class UploadGate {
  private readonly rooms = new Set<string>();
  private bytes = 0;

  /** `maxUploadBytes`: the most one upload may declare (the files' limits together). */
  constructor(
    private readonly maxUploadBytes: number,
    private readonly budgetBytes = UPLOAD_BUDGET_BYTES,
  ) {}

  /** Bytes held by uploads in flight now. */
  get inFlightBytes(): number {
    return this.bytes;
  }

  /** Express middleware for room `roomOf(req)`'s upload: admits it, or refuses before the body is read. */
  admit(roomOf: (req: Request) => string) {
    return (req: Request, res: Response, next: NextFunction): void => {
      const room = roomOf(req);
      const length = req.get('content-length');
      const declared = length === undefined ? this.maxUploadBytes : Number(length);
      if (!Number.isSafeInteger(declared) || declared < 0) {
        next(new WebringError('ERR_BAD_REQUEST', `a checkpoint upload's Content-Length of ${length} is no length`));
        return;
      }
      if (declared > this.maxUploadBytes) {
        next(new WebringError('ERR_PAYLOAD_TOO_LARGE', `a checkpoint upload is at most ${this.maxUploadBytes} bytes; this one says ${declared}`));
        return;
      }
      if (this.rooms.has(room)) {
        next(new WebringError('ERR_RATE_LIMITED', `a checkpoint of room ${room} is being uploaded; one at a time per room`));
        return;
      }
      if (this.bytes + declared > this.budgetBytes) {
        next(new WebringError('ERR_RATE_LIMITED', `the server holds ${this.bytes} bytes of checkpoint uploads already; try again shortly`));
        return;
      }
      this.rooms.add(room);
      this.bytes += declared;
      // 'close' comes once the response is sent or the client went away, whichever it was.
      res.once('close', () => {
        this.rooms.delete(room);
        this.bytes -= declared;
      });
      next();
    };
  }
}
