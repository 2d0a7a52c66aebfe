/**
 * A benchmark peer: joins a room like a student and forms the same ring and partner links
 * over the same data channels (RingNetwork), but runs bare collectives and link transfers
 * instead of training. The browser bench page (client/bench.ts) and the headless Node
 * peers (test/bench/node-peers.ts) both drive this; test/bench/bench.ts drives them.
 */
import type { Socket } from 'socket.io-client';
import type { AckResult, Algorithm, WireFormat, ClientToServerEvents, Generation, JoinAccepted, ServerToClientEvents, WorkerKind } from '../protocol';
import { RingNetwork } from './ring-network';
import { DEFAULT_HIGH_WATER_BYTES } from '../collectives/ring-allreduce';
import { COLLECTIVE_TAG } from '../collectives/collective';
import { MAX_MESSAGE_BYTES } from '../collectives/wire';
import { createProbeBuffers, measureLinkModels, type LinkModels } from '../collectives/choice';
import type { PeerFactory } from './peer';
import { WebringError } from '../protocol/errors';
import { sleep, systemClock, type Clock } from '../util/clock';
import { withDeadline } from '../util/deadline';

/** Wall-clock milliseconds, comparable between tabs and processes on one machine. */
export const wallNow = (): number => performance.timeOrigin + performance.now();

/** How often a joining peer looks whether the ring is whole and every link open. */
const POLL_MS = 20;
/** Joining gives up after this long: the room's acceptance, the whole ring, and every link open. */
export const BENCH_JOIN_TIMEOUT_MS = 120_000;

export interface BenchPeerOptions {
  /** Paces the join's polling and times its deadline; the system clock by default. */
  clock?: Clock;
  /** Overrides BENCH_JOIN_TIMEOUT_MS. */
  joinTimeoutMs?: number;
}

export interface BenchJoinOptions {
  /** Also wait until the room's hub is linked (for the hub collective). */
  hub?: boolean;
}

export class BenchPeer {
  private network: RingNetwork | null = null;
  private generation: Generation | null = null;
  private memberId: string | null = null;
  /** Every collective needs a fresh (step, tag) key; the bench never reuses one. */
  private step = 1;
  private readonly barrierBuf = new Float32Array(1);
  private readonly clock: Clock;
  private readonly joinTimeoutMs: number;
  /** Set by close(): a join still polling gives up. */
  private closed = false;

  constructor(
    private readonly socket: Socket<ServerToClientEvents, ClientToServerEvents>,
    private readonly factory: PeerFactory,
    private readonly log: (m: string) => void,
    options: BenchPeerOptions = {},
  ) {
    this.clock = options.clock ?? systemClock;
    this.joinTimeoutMs = options.joinTimeoutMs ?? BENCH_JOIN_TIMEOUT_MS;
    socket.on('ring:generation', (g) => {
      this.generation = g;
      this.network?.applyGeneration(g);
    });
    socket.on('signal:relay', ({ from, linkId, data }) => this.network?.handleSignal(from, linkId, data));
  }

  /**
   * Joins `room` and waits until the ring of `worldSize` is whole and every link, the
   * halving-doubling partners' included, is open. Returns this peer's rank. Fails with
   * ERR_TIMEOUT after BENCH_JOIN_TIMEOUT_MS, ERR_ABORTED when closed meanwhile.
   */
  join(room: string, name: string, kind: WorkerKind, worldSize: number, options: BenchJoinOptions = {}): Promise<number> {
    const ms = this.joinTimeoutMs;
    const expired = () => new WebringError('ERR_TIMEOUT', `joining ${room} as a bench peer timed out after ${ms} ms`);
    return withDeadline(ms, expired, (signal) => this.joinUntil(signal, room, name, kind, worldSize, options.hub ?? false), this.clock);
  }

  private async joinUntil(signal: AbortSignal, room: string, name: string, kind: WorkerKind, worldSize: number, hub: boolean): Promise<number> {
    const joined = await new Promise<AckResult<JoinAccepted>>((resolve) =>
      this.socket.emit('room:join', { room, name, kind, backend: 'cpu' }, resolve),
    );
    if (!joined.ok) throw new WebringError(joined.error.code, joined.error.message);
    this.memberId = joined.memberId;
    this.network = new RingNetwork({
      selfId: joined.memberId,
      factory: this.factory,
      sendSignal: (to, linkId, data) => this.socket.emit('signal:relay', { to, linkId, data }),
      log: this.log,
    });
    if (this.generation) this.network.applyGeneration(this.generation);
    while (!this.generation || this.generation.members.length < worldSize || !this.network.meshReady || (hub && !this.network.hubReady)) {
      // The deadline passed (the caller has its error) or the peer closed: stop polling.
      if (signal.aborted) throw signal.reason;
      if (this.closed) throw new WebringError('ERR_ABORTED', 'the bench peer closed while joining');
      await sleep(this.clock, POLL_MS);
    }
    await this.barrier();
    return this.rank;
  }

  get rank(): number {
    return this.generation!.members.findIndex((m) => m.id === this.memberId);
  }

  /** A one-float ring all-reduce: returns once every rank has reached it. */
  async barrier(): Promise<void> {
    await this.network!.collective!.allReduce(this.barrierBuf, this.step++, COLLECTIVE_TAG.gradients);
  }

  /** `reps` all-reduces of `bytes` with `algorithm`, each after a barrier; milliseconds of each. */
  async allReduce(bytes: number, reps: number, algorithm: Algorithm, wire: WireFormat = 'fp32'): Promise<number[]> {
    const collective = this.network!.collective!;
    const buf = new Float32Array(bytes / 4);
    for (let i = 0; i < buf.length; i++) buf[i] = i % 7;
    const times: number[] = [];
    for (let r = 0; r < reps; r++) {
      await this.barrier();
      const t0 = wallNow();
      await collective.allReduce(buf, this.step++, COLLECTIVE_TAG.gradients, { algorithm, wire });
      times.push(wallNow() - t0);
    }
    return times;
  }

  /** Each algorithm's α and β, probed at `bytes` as the trainer probes at its gradient size (the hub's where the room has one). */
  async measure(bytes: number, wire: WireFormat = 'fp32'): Promise<LinkModels> {
    await this.barrier();
    return measureLinkModels(this.network!.collective!, this.step++, createProbeBuffers(bytes / 4), { mesh: true, hub: this.network!.hubReady }, wire);
  }

  /** Sends `bytes` to the right neighbour in 64 KiB messages with the ring's backpressure; returns the start time. */
  async sendToRight(bytes: number): Promise<number> {
    const link = this.network!.rightLink!;
    const msg = new Uint8Array(MAX_MESSAGE_BYTES);
    const t0 = wallNow();
    for (let sent = 0; sent < bytes; sent += msg.byteLength) {
      if (link.bufferedAmount() > DEFAULT_HIGH_WATER_BYTES) await link.whenWritable();
      link.send(msg);
    }
    return t0;
  }

  /** Counts bytes from the left neighbour until `bytes` arrived; resolves with the arrival time of the last. */
  receiveFromLeft(bytes: number): Promise<number> {
    return new Promise((resolve) => {
      let got = 0;
      this.network!.setTap((data) => {
        got += data.byteLength;
        if (got >= bytes) {
          this.network!.setTap(null);
          resolve(wallNow());
        }
      });
    });
  }

  close(): void {
    this.closed = true;
    this.network?.close();
    this.socket.close();
  }
}
