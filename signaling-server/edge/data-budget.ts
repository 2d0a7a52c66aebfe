/**
 * The data service's budgets (issue 25): one client cannot exhaust the server through it.
 *
 *  - Bytes per epoch. Each reader of a room (a member, by its token; a join-code reader, by
 *    its address) and the room as a whole may take so many bytes of examples per *window*:
 *    the room's run and the epoch the class is in, as its chief reports it after every turn
 *    (its data cursor's: the turn that ends an epoch opens the next window). A round of
 *    local steps ends with its epoch, so whatever its length it reads within its own
 *    epoch's window, and only the prefetch reaches past an epoch's end. The sizes follow from what an
 *    honest class fetches (shared/data/streamed-dataset.ts): each example of the epoch
 *    once, to the rank that trains it; each rank's test shard; one prefetch window reaching
 *    into the next epoch; and, after every change of the ring (a join, a leave, a reload, a
 *    drop), a prefetch window and a test shard again, because every shard boundary moved.
 *    The server counts those changes as generations, so a lesson in which students come and
 *    go gets the slack it needs, and a quiet class stays near 1.2× the training set.
 *  - Bytes waiting to be sent. A reply counts from the moment its body is built until the
 *    kernel has taken its last byte; one connection holds one such reply at a time, one
 *    address and the whole server a capped number of bytes, and a connection that takes no
 *    piece of its reply for STALLED_REPLY_MS (a client that does not read) is destroyed.
 *
 * Both are counted in this process: with several signaling nodes each counts what it served.
 */
import type { Socket } from 'node:net';
import type { Request, Response } from 'express';
import { MAX_ROOM_MEMBERS, RECIPE_DEFAULTS, type StartConfig } from '../../shared/protocol';
import { WebringError } from '../../shared/protocol/errors';
import { exampleBytes } from '../../shared/data/data-service';
import { datasetFacts } from '../../shared/tasks/registry';
import { PREFETCH_STEPS } from '../../shared/data/streamed-dataset';
import { globalBatchSize } from '../../shared/data/batch-plan';
import { maxShareOf } from '../../shared/data/batch-plan';
import type { Timers } from '../rooms/timers';

/** A window's budget is this many training sets for the class, plus the slack below. */
export const EPOCH_TRAIN_FACTOR = 1.2;
/**
 * Changes of the ring that add slack to one window, at most: a class of 32 that all join
 * and all leave within one epoch. More changes than that (a flood of joins) add nothing.
 */
export const MAX_COUNTED_CHANGES = 2 * MAX_ROOM_MEMBERS;
/** A refused reader tries again after this long: by then its class may have reached the next epoch. */
export const DATA_BUDGET_RETRY_AFTER_S = 10;

/** Bytes of examples waiting to be sent to one client address, at most; a class of 30 behind one NAT needs about 15 MB at once. */
export const MAX_UNSENT_BYTES_PER_ADDRESS = 64 * 1024 * 1024;
/** Bytes of examples waiting to be sent by this server, at most. */
export const MAX_UNSENT_BYTES = 256 * 1024 * 1024;
/**
 * A reply whose connection takes none of its bytes for this long is abandoned and its
 * connection destroyed. An honest tab on a congested Wi-Fi drains a little every few
 * milliseconds; one that stalls this long has a dead link or does not read. Shorter than
 * the worker's own 30 s request timeout, so the worker retries on a fresh connection.
 */
export const STALLED_REPLY_MS = 10_000;
/** How often replies in flight are checked for progress. */
export const STALL_CHECK_MS = 1_000;
/**
 * A reply is handed to its connection in pieces of this size, each once the last has left
 * for the kernel, so the server sees a slow reader's progress piece by piece (a single
 * write shows none until all of it has left) and holds at most a piece in the socket's buffer.
 */
export const WRITE_PIECE_BYTES = 64 * 1024;
/** A reader refused for bytes in flight tries again after this long (seconds). */
export const UNSENT_RETRY_AFTER_S = 1;

/** A dataset as a budget sees it: its splits' sizes, and the bytes of one example on the wire. */
export interface BudgetDataset {
  id: string;
  trainCount: number;
  testCount: number;
  exampleBytes: number;
}

/** What a budget is sized from: the run's dataset and shards (the defaults before any run). */
export interface BudgetPlan {
  dataset: BudgetDataset;
  /** Examples per rank per step (batchSizePerWorker). */
  perWorker: number;
  /** The most examples one rank trains in a step (more than perWorker when shares follow speed). */
  maxShare: number;
}

/** What a window saw of its room. */
export interface WindowSeen {
  /** The smallest and largest ring seen in the window, at least 1. */
  smallestRing: number;
  largestRing: number;
  /** Generations begun since the window opened, at most MAX_COUNTED_CHANGES. */
  changes: number;
}

/** Dataset `id` as a budget sees it (shared/tasks/ says what it is); ERR_BAD_REQUEST naming `dataset` for none. */
export function budgetDatasetOf(id: string): BudgetDataset {
  const facts = datasetFacts(id);
  if (!facts) throw new WebringError('ERR_BAD_REQUEST', `no dataset ${id.slice(0, 40)}`, 'dataset');
  return { id, trainCount: facts.trainCount, testCount: facts.testCount, exampleBytes: exampleBytes(facts.features) };
}

/** The plan of a run with `config` (its dataset wins over the one asked for); before a run, the default shards of the dataset asked for. */
export function budgetPlan(config: Pick<StartConfig, 'dataset' | 'batchSizePerWorker' | 'balanceShares'> | null, asked: string): BudgetPlan {
  const shards = config ?? { batchSizePerWorker: RECIPE_DEFAULTS.batchSizePerWorker, balanceShares: RECIPE_DEFAULTS.balanceShares };
  return { dataset: budgetDatasetOf(config?.dataset ?? asked), perWorker: shards.batchSizePerWorker, maxShare: maxShareOf(shards) };
}

/** What one rank fetches again when its shard moves: its prefetch window and the step it is on. */
const refetchExamples = (examplesPerStep: number): number => (PREFETCH_STEPS + 1) * examplesPerStep;

/**
 * Bytes a room may take in one window: 1.2× its training set, its test split twice (each
 * rank's shard early in the run, the moved shards at the evaluation), and for the window
 * itself and each change of the ring, one prefetch window of the whole class and one test
 * shard of the smallest ring.
 */
export function roomWindowBudget(plan: BudgetPlan, seen: WindowSeen): number {
  const { trainCount, testCount, exampleBytes } = plan.dataset;
  const perChange = refetchExamples(globalBatchSize(plan.perWorker, seen.largestRing)) + Math.ceil(testCount / seen.smallestRing);
  return Math.ceil((EPOCH_TRAIN_FACTOR * trainCount + 2 * testCount + (seen.changes + 1) * perChange) * exampleBytes);
}

/**
 * Bytes one reader may take in one window: 1.2× the largest share of the training set it
 * can train (its largest shard against the smallest ring's global batch), the test split
 * once (a worker keeps what it fetched for the rest of the run), and its own prefetch
 * window for the window itself and each change of the ring.
 */
export function readerWindowBudget(plan: BudgetPlan, seen: WindowSeen): number {
  const { trainCount, testCount, exampleBytes } = plan.dataset;
  const share = Math.min(1, plan.maxShare / globalBatchSize(plan.perWorker, seen.smallestRing));
  return Math.ceil((EPOCH_TRAIN_FACTOR * trainCount * share + testCount + (seen.changes + 1) * refetchExamples(plan.maxShare)) * exampleBytes);
}

/** Where a room is, as the data service sees it at a request (Room.dataWindow). */
export interface RoomWindow {
  run: number;
  epoch: number;
  generation: number;
  ringSize: number;
}

interface WindowState {
  run: number;
  epoch: number;
  firstGeneration: number;
  seen: WindowSeen;
  roomBytes: number;
  byReader: Map<string, number>;
}

/** Bytes of examples each room and each of its readers took in the room's current window. */
export class DataBudgets {
  private readonly byRoom = new Map<string, WindowState>();

  /**
   * Charges `bytes` to `reader` of `room` in the window `at` describes, or refuses them
   * (ERR_DATA_BUDGET) when the reader would pass its budget, or the room its budget while
   * the reader has had more than its part of the room's (shared by the largest ring, or by
   * all the window's readers when there are more);
   * a refusal charges nothing. `reader` null: the teacher, trusted, only counted for the room.
   */
  charge(room: string, at: RoomWindow, plan: BudgetPlan, reader: string | null, bytes: number): void {
    const state = this.windowOf(room, at);
    const roomBudget = roomWindowBudget(plan, state.seen);
    const readerBytes = reader === null ? 0 : (state.byReader.get(reader) ?? 0);
    if (reader !== null) {
      const readerBudget = readerWindowBudget(plan, state.seen);
      if (readerBytes + bytes > readerBudget) {
        throw new WebringError('ERR_DATA_BUDGET', `this reader took ${mib(readerBytes)} of its ${mib(readerBudget)} of examples for epoch ${at.epoch}; more comes with the next epoch`);
      }
    }
    // A room past its budget refuses only the readers past their part of it (shared by the
    // largest ring, or by every reader of the window when more read): those who spent it cannot starve the rest.
    const readers = state.byReader.size + (reader !== null && !state.byReader.has(reader) ? 1 : 0);
    if (reader !== null && state.roomBytes + bytes > roomBudget && readerBytes + bytes > roomBudget / Math.max(state.seen.largestRing, readers)) {
      throw new WebringError('ERR_DATA_BUDGET', `room ${room} took ${mib(state.roomBytes)} of its ${mib(roomBudget)} of examples for epoch ${at.epoch}; more comes with the next epoch`);
    }
    state.roomBytes += bytes;
    if (reader !== null) state.byReader.set(reader, readerBytes + bytes);
  }

  /** The room's window at `at`: a new one when the run or the epoch moved on, else the current one, updated with what it sees now. */
  private windowOf(room: string, at: RoomWindow): WindowState {
    const ring = Math.max(1, at.ringSize);
    let state = this.byRoom.get(room);
    if (!state || state.run !== at.run || state.epoch !== at.epoch) {
      state = { run: at.run, epoch: at.epoch, firstGeneration: at.generation, seen: { smallestRing: ring, largestRing: ring, changes: 0 }, roomBytes: 0, byReader: new Map() };
      this.byRoom.set(room, state);
    }
    const seen = state.seen;
    seen.smallestRing = Math.min(seen.smallestRing, ring);
    seen.largestRing = Math.max(seen.largestRing, ring);
    seen.changes = Math.min(MAX_COUNTED_CHANGES, Math.max(seen.changes, at.generation - state.firstGeneration));
    return state;
  }
}

interface Unsent {
  socket: Socket;
  address: string;
  bytes: number;
  /** When the kernel last took a piece of the reply (or when it was admitted). */
  lastProgressAt: number;
}

/**
 * Replies of examples not yet taken by the kernel: at most one per connection, capped bytes
 * per address and per server, and a connection whose reply stalls is destroyed.
 */
export class UnsentReplies {
  private readonly replies = new Set<Unsent>();
  private readonly busy = new WeakSet<Socket>();
  private readonly byAddress = new Map<string, number>();
  private total = 0;

  constructor(
    private readonly timers: Timers,
    private readonly now: () => number = Date.now,
    private readonly limits = { perAddress: MAX_UNSENT_BYTES_PER_ADDRESS, total: MAX_UNSENT_BYTES, stalledMs: STALLED_REPLY_MS },
  ) {}

  /**
   * Claims `res`'s connection for one reply of examples, before anything is read or built;
   * released when the response ends. A second data request on a connection whose reply is
   * still unsent (HTTP pipelining, which no browser and no Node fetch does) is refused.
   */
  claimConnection(req: Request, res: Response): void {
    // req.socket, not res.socket: Node assigns a pipelined request's response its socket only when the replies before it are sent.
    const socket = req.socket;
    if (this.busy.has(socket)) {
      res.set('Retry-After', String(UNSENT_RETRY_AFTER_S));
      throw new WebringError('ERR_RATE_LIMITED', 'one request for examples at a time per connection; read the last reply first');
    }
    this.busy.add(socket);
    res.once('close', () => this.busy.delete(socket));
  }

  /**
   * Counts a reply of `bytes` to `address` until its connection has taken it, or refuses it
   * (ERR_RATE_LIMITED) past a cap. Returns what sends the body, piece by piece, and ends the response.
   */
  admit(req: Request, res: Response, address: string, bytes: number): (body: Buffer) => void {
    const ofAddress = this.byAddress.get(address) ?? 0;
    if (ofAddress + bytes > this.limits.perAddress || this.total + bytes > this.limits.total) {
      res.set('Retry-After', String(UNSENT_RETRY_AFTER_S));
      const [cap, to] = ofAddress + bytes > this.limits.perAddress ? [this.limits.perAddress, 'this address'] : [this.limits.total, 'all readers'];
      throw new WebringError('ERR_RATE_LIMITED', `up to ${mib(cap)} of examples may wait to be sent to ${to}, and that much waits; try again in ${UNSENT_RETRY_AFTER_S} s`);
    }
    const entry: Unsent = { socket: req.socket, address, bytes, lastProgressAt: this.now() };
    this.replies.add(entry);
    this.byAddress.set(address, ofAddress + bytes);
    this.total += bytes;
    // 'close' follows 'finish' (the kernel took the last byte) and also comes alone when the connection dies first.
    res.once('close', () => this.release(entry));
    this.watch();
    const progressed = () => (entry.lastProgressAt = this.now());
    return (body) => {
      // The stall clock starts with the first piece, not while the dataset was being read from disk.
      progressed();
      const writeFrom = (at: number): void => {
        while (at < body.length) {
          const piece = body.subarray(at, at + WRITE_PIECE_BYTES);
          at += piece.length;
          if (!res.write(piece, progressed)) {
            // A destroyed connection never drains; its 'close' releases the reply instead.
            res.once('drain', () => writeFrom(at));
            return;
          }
        }
        res.end();
      };
      writeFrom(0);
    };
  }

  private release(entry: Unsent): void {
    if (!this.replies.delete(entry)) return;
    this.total -= entry.bytes;
    const left = (this.byAddress.get(entry.address) ?? 0) - entry.bytes;
    if (left > 0) this.byAddress.set(entry.address, left);
    else this.byAddress.delete(entry.address);
  }

  private watch(): void {
    this.timers.once('data-service-stalled-replies', STALL_CHECK_MS, () => {
      this.cutStalled();
      if (this.replies.size > 0) this.watch();
    });
  }

  /** Destroys the connections that took no piece of their reply for the stall limit. */
  private cutStalled(): void {
    const now = this.now();
    for (const entry of this.replies) {
      if (now - entry.lastProgressAt >= this.limits.stalledMs) {
        // Its 'close' releases the entry; the bytes Node held for it are freed with the socket.
        entry.socket.destroy();
        this.release(entry);
      }
    }
  }
}

const mib = (bytes: number): string => `${(bytes / (1024 * 1024)).toFixed(1)} MiB`;
