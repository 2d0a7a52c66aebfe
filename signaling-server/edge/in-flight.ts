/**
 * Request bodies on their way in to /api (issue 57, defect 3). Before it, nothing bounded how
 * many bodies one address kept arriving, nor how long one could take: 60 held uploads sat
 * for Node's 300 s. Now:
 * - each address (addressGroup: a public IPv6 address by its /64) has at most
 *   MAX_BODIES_IN_FLIGHT_PER_ADDRESS bodies still arriving; past it a request is refused
 *   with 429 ERR_RATE_LIMITED before a byte of its body is read;
 * - a body that brings no byte for BODY_IDLE_TIMEOUT_MS is cut, and any body but a
 *   checkpoint upload (long, and only the chief's or the teacher's: `untimed`) must be in
 *   within BODY_DEADLINE_MS. A cut body's request hears 408 ERR_TIMEOUT if nothing was
 *   answered yet, and its connection is closed.
 * Whether a body is wanted at all is each route's business, decided from the headers before
 * its parser runs (requireTeacher, requireChief, the probe's check); http-api.ts closes the
 * connection of any refusal whose body was not read.
 */
import type { Socket } from 'node:net';
import type { NextFunction, Request, Response } from 'express';
import { WebringError } from '../../shared/protocol/errors';
import { addressGroup } from '../rooms/seats';
import type { Timers } from '../rooms/timers';

/** Bodies one address may have arriving at once: a school's class (32) behind one NAT sending its network probes together, twice over. */
export const MAX_BODIES_IN_FLIGHT_PER_ADDRESS = 64;
/** A body that brings no byte for this long is cut: a link stalled that long has failed, and TCP retransmits within seconds. */
export const BODY_IDLE_TIMEOUT_MS = 10_000;
/**
 * Any body but a checkpoint upload is in within this: JSON bodies are at most 16 KiB, and the
 * 2 MiB network probe takes 28 s at 0.6 Mbit/s, a 20 Mbit/s school link shared by 32 devices.
 */
export const BODY_DEADLINE_MS = 30_000;
/** How often bodies in flight are checked against both limits: a cut comes within this after its limit. */
const SWEEP_INTERVAL_MS = 1_000;
/** What a refused address is told to wait: bodies in flight finish or are cut within seconds. */
const RETRY_AFTER_S = 1;

interface InFlight {
  req: Request;
  res: Response;
  socket: Socket;
  address: string;
  /** The connection's bytes read when last looked at, and when that last changed. */
  bytesRead: number;
  lastProgressAt: number;
  /** When the body must be in; null for an untimed one. */
  deadlineAt: number | null;
  /** Whether it was answered with ERR_TIMEOUT already: the next sweep destroys its connection. */
  cut: boolean;
}

export class BodiesInFlight {
  private readonly entries = new Map<Request, InFlight>();
  private readonly byAddress = new Map<string, number>();

  constructor(
    private readonly timers: Timers,
    private readonly now: () => number = Date.now,
  ) {}

  /** Express middleware: counts a request whose body is still arriving against its address, or refuses it before the body is read. */
  readonly admit = (req: Request, res: Response, next: NextFunction): void => {
    // Complete: no body, or all of it arrived with the headers; nothing is in flight.
    if (req.complete) return next();
    const address = addressGroup(req.ip ?? req.socket.remoteAddress ?? 'unknown');
    const arriving = this.byAddress.get(address) ?? 0;
    if (arriving >= MAX_BODIES_IN_FLIGHT_PER_ADDRESS) {
      res.set('Retry-After', String(RETRY_AFTER_S));
      return next(new WebringError('ERR_RATE_LIMITED', `this address has ${arriving} request bodies arriving already, as many as one may; try again in ${RETRY_AFTER_S} s`));
    }
    const now = this.now();
    const entry: InFlight = { req, res, socket: req.socket, address, bytesRead: req.socket.bytesRead, lastProgressAt: now, deadlineAt: now + BODY_DEADLINE_MS, cut: false };
    this.entries.set(req, entry);
    this.byAddress.set(address, arriving + 1);
    // 'end': the body was read; 'close': the reply went out or the connection died, read or not.
    const release = () => this.release(entry);
    req.once('end', release);
    res.once('close', release);
    this.watch();
    next();
  };

  /** Express middleware: lifts the deadline of this request's body (a checkpoint upload, once its sender is known); the idle timeout stays. */
  readonly untimed = (req: Request, _res: Response, next: NextFunction): void => {
    const entry = this.entries.get(req);
    if (entry) entry.deadlineAt = null;
    next();
  };

  private release(entry: InFlight): void {
    if (this.entries.get(entry.req) !== entry) return;
    this.entries.delete(entry.req);
    const left = (this.byAddress.get(entry.address) ?? 1) - 1;
    if (left > 0) this.byAddress.set(entry.address, left);
    else this.byAddress.delete(entry.address);
  }

  private watch(): void {
    this.timers.once('http-bodies-in-flight', SWEEP_INTERVAL_MS, () => {
      this.sweep();
      if (this.entries.size > 0) this.watch();
    });
  }

  private sweep(): void {
    const now = this.now();
    for (const entry of this.entries.values()) {
      if (entry.req.complete) {
        this.release(entry);
        continue;
      }
      // bytesRead counts what the connection took from the network, whether or not a parser read it yet.
      const read = entry.socket.bytesRead;
      if (read !== entry.bytesRead) {
        entry.bytesRead = read;
        entry.lastProgressAt = now;
      }
      const idle = now - entry.lastProgressAt >= BODY_IDLE_TIMEOUT_MS;
      const late = entry.deadlineAt !== null && now >= entry.deadlineAt;
      if (idle) this.cut(entry, `no byte of the request body came for ${BODY_IDLE_TIMEOUT_MS / 1000} s`);
      else if (late) this.cut(entry, `a request body must arrive within ${BODY_DEADLINE_MS / 1000} s`);
    }
  }

  /** Answers ERR_TIMEOUT and closes the connection; a connection already answered, or that never took the answer, is destroyed. */
  private cut(entry: InFlight, why: string): void {
    if (entry.cut || entry.res.headersSent) {
      // Its 'close' releases the entry.
      entry.socket.destroy();
      this.release(entry);
      return;
    }
    entry.cut = true;
    // Connection: close makes Node end the connection once the answer is out, without reading the rest.
    entry.res.status(408).set('Connection', 'close').json({ ok: false, error: new WebringError('ERR_TIMEOUT', why).toBody() });
  }
}
