/**
 * The hub as a room member: joins with kind 'hub' (never in the ring, never chief, trains
 * nothing), keeps a link to every ring member through the same RingNetwork the workers
 * use, and sums their gradients with a HubReducer whenever they pick the hub collective.
 * Its join carries the room's hub key, which only the teacher's server hands out.
 * It rejoins after a lost connection with its credentials; when the room no longer knows it
 * (the server dropped it, or removed it) it joins afresh with a back-off, and waits out
 * refusals that end by themselves (ERR_HUB_REMOVED until the teacher allows a hub again,
 * ERR_HUB_TAKEN until the other hub leaves). It names a rank that sends what no honest rank
 * sends to the server (ring:evict), which checks the accusation.
 *
 * node-worker/hub.ts runs it beside the server (`npm start -- --hub`); the lab runs it in
 * the server's network namespace.
 */
import type { Socket } from 'socket.io-client';
import type { AckResult, ClientToServerEvents, Generation, JoinAccepted, Misbehaviour, ServerToClientEvents } from '../protocol';
import { WebringError, toWebringError, type ErrorBody, type ErrorCode } from '../protocol/errors';
import { SignalingSession } from './signaling-session';
import { RingNetwork } from '../network/ring-network';
import { SocketRelay, withRelay } from '../network/relay-link';
import type { PeerFactory } from '../network/peer';
import type { HubReducer } from '../collectives/hub-reducer';
import { systemClock, type Clock } from '../util/clock';

/** The first fresh join after losing the membership waits this long; each further try twice as long. */
export const HUB_REJOIN_FIRST_DELAY_MS = 1_000;
/** Tries never wait longer than this: a hub the teacher allows again is back within it. */
export const HUB_REJOIN_MAX_DELAY_MS = 15_000;
/**
 * Refusals that end by themselves, so the hub keeps trying: the teacher allows a hub again
 * or the run ends, another hub leaves, a limit resets, the server comes back. Any other (a
 * wrong key or join code) ends the hub's tries: waiting would not change it.
 */
export const HUB_WAIT_OUT_CODES: ReadonlySet<ErrorCode> = new Set<ErrorCode>(['ERR_HUB_REMOVED', 'ERR_HUB_TAKEN', 'ERR_RATE_LIMITED', 'ERR_ROOM_FULL', 'ERR_TIMEOUT', 'ERR_INTERNAL']);

export interface HubMemberOptions {
  socket: Socket<ServerToClientEvents, ClientToServerEvents>;
  /** WebRTC links; null: the hub reaches every student through the server (relay-link.ts). */
  factory: PeerFactory | null;
  log(message: string): void;
  /** Hears the ICE config of every join and rejoin (TURN credentials), before any link is dialled. */
  onIceConfig?(ice: unknown): void;
  /** Hears a refusal that waiting cannot end (HUB_WAIT_OUT_CODES has the others): the hub stops trying. */
  onGaveUp?(error: ErrorBody): void;
  clock?: Clock;
}

/** Where and as whom the hub joins. */
interface HubTarget {
  room: string;
  name: string;
  code: string;
  hubKey: string;
}

export class HubMember {
  private readonly session: SignalingSession;
  private readonly socket: HubMemberOptions['socket'];
  private readonly log: HubMemberOptions['log'];
  private network: RingNetwork | null = null;
  private generation: Generation | null = null;
  private left = false;
  private readonly clock: Clock;
  private readonly relay: SocketRelay;
  private target: HubTarget | null = null;
  /** The pending fresh join, if any, and whether one is on the wire: never two at once. */
  private retryTimer: unknown = null;
  private joining = false;
  private retries = 0;
  /** The code of the last refusal logged, so a long wait logs once, not every try. */
  private lastRefusal: ErrorCode | null = null;

  constructor(private readonly options: HubMemberOptions) {
    this.clock = options.clock ?? systemClock;
    this.socket = options.socket;
    this.log = options.log;
    this.session = new SignalingSession(options.socket, this.clock, options.onIceConfig);
    this.relay = new SocketRelay(options.socket, this.log);
    const { socket } = options;
    socket.on('ring:generation', (g) => {
      try {
        this.apply(g);
      } catch (err) {
        // A generation this hub cannot apply leaves it out of that ring; the class goes on without it.
        const e = toWebringError(err);
        this.log(`generation ${g.generation} not applied: ${e.code} ${e.message}`);
      }
    });
    socket.on('signal:relay', ({ from, linkId, data }) => this.network?.handleSignal(from, linkId, data));
    socket.on('member:dropped', (d) => {
      this.log(`dropped from the room (${d.reason}): ${'detail' in d ? d.detail : ''}`);
      this.lostMembership();
    });
    socket.on('disconnect', (reason) => {
      this.log(`signaling connection lost (${reason})`);
      // socket.io reconnects by itself except after the server closed the connection; a fresh join connects again.
      if (reason === 'io server disconnect' && !this.left) this.lostMembership();
    });
    socket.on('connect', () => {
      if (this.session.identity && !this.left) void this.rejoin();
    });
  }

  /** The reducer of the generation applied now, or null before the first ring forms. */
  get reducer(): HubReducer | null {
    return this.network?.hubReducer ?? null;
  }

  /** Whether the hub holds a membership now (false while it waits to be let in again). */
  get joined(): boolean {
    return this.session.identity !== null;
  }

  /**
   * Joins `room` as its hub with the room's `hubKey`; fails with the server's code
   * (ERR_HUB_NOT_AUTHORIZED without the right key, ERR_HUB_TAKEN when the room has a hub,
   * ERR_HUB_REMOVED while the teacher refuses one). After a refusal in HUB_WAIT_OUT_CODES,
   * waitToJoin() keeps trying.
   */
  async join(room: string, name: string, code: string, hubKey: string): Promise<JoinAccepted> {
    this.target = { room, name, code, hubKey };
    const result = await this.requestFreshJoin(this.target);
    if (!result.ok) throw new WebringError(result.error.code, result.error.message);
    return result;
  }

  /** Keeps trying to join (after join() was refused with a code that ends by itself), with the back-off. */
  waitToJoin(): void {
    this.scheduleFreshJoin();
  }

  private async requestFreshJoin(t: HubTarget): Promise<AckResult<JoinAccepted>> {
    const result = await this.session.requestJoin({ room: t.room, name: t.name, kind: 'hub', backend: 'cpu', hubKey: t.hubKey }, t.code);
    if (result.ok) this.adopt(t, result);
    return result;
  }

  /** A fresh membership: a new member id, so a new network under it. */
  private adopt(t: HubTarget, result: JoinAccepted): void {
    this.session.identity = { room: t.room, name: t.name, code: t.code, memberId: result.memberId, memberToken: result.memberToken };
    this.retries = 0;
    this.lastRefusal = null;
    // A room forgotten while this hub was out starts again at generation 1; the generation
    // naming this membership arrives right after the ack, on the same connection.
    this.generation = null;
    this.network?.close();
    this.network = new RingNetwork({
      selfId: result.memberId,
      // A student who can open no WebRTC link to the hub reaches it through the server.
      factory: withRelay(this.options.factory, { relay: this.relay, clock: this.clock, log: this.log }),
      sendSignal: (to, linkId, data) => this.session.relaySignal(to, linkId, data),
      log: this.log,
      onHubMisbehaviour: (rank, misbehaviour, detail, run, step) => this.accuse(rank, misbehaviour, detail, run, step),
    });
    if (this.generation) this.network.applyGeneration(this.generation);
  }

  /** Says goodbye, so the class falls back to the ring at once. */
  leave(): void {
    this.left = true;
    if (this.retryTimer !== null) this.clock.clearTimeout(this.retryTimer);
    this.retryTimer = null;
    this.session.leave();
    this.network?.close();
  }

  /** The room no longer knows this hub (dropped, removed, or gone while disconnected): join afresh, with the back-off. */
  private lostMembership(): void {
    this.session.identity = null;
    this.network?.close();
    this.network = null;
    this.scheduleFreshJoin();
  }

  private scheduleFreshJoin(): void {
    if (this.left || !this.target || this.retryTimer !== null || this.joining) return;
    const delayMs = Math.min(HUB_REJOIN_MAX_DELAY_MS, HUB_REJOIN_FIRST_DELAY_MS * 2 ** this.retries);
    this.retries++;
    this.retryTimer = this.clock.setTimeout(() => {
      this.retryTimer = null;
      void this.freshJoin();
    }, delayMs);
  }

  private async freshJoin(): Promise<void> {
    const t = this.target;
    if (this.left || !t || this.session.identity) return;
    let refusal: ErrorBody;
    this.joining = true;
    try {
      const r = await this.requestFreshJoin(t);
      if (r.ok) {
        this.log(`joined ${t.room} again as its hub (${r.memberId})`);
        return;
      }
      refusal = r.error;
    } catch (err) {
      refusal = toWebringError(err).toBody();
    } finally {
      this.joining = false;
    }
    if (!HUB_WAIT_OUT_CODES.has(refusal.code)) {
      this.log(`hub join refused: ${refusal.code} ${refusal.message}; not trying again`);
      this.options.onGaveUp?.(refusal);
      return;
    }
    if (refusal.code !== this.lastRefusal) this.log(`hub join refused: ${refusal.code} ${refusal.message}; trying again every ${HUB_REJOIN_MAX_DELAY_MS / 1000} s at most`);
    this.lastRefusal = refusal.code;
    this.scheduleFreshJoin();
  }

  private apply(g: Generation): void {
    if (this.generation && g.generation < this.generation.generation) return;
    this.generation = g;
    if (!this.network) return;
    if (g.hub?.id !== this.session.identity?.memberId) {
      this.log(`generation ${g.generation} has ${g.hub ? `another hub (${g.hub.name})` : 'no hub'}; holding no links`);
    } else {
      this.log(`generation ${g.generation}: summing for ${g.members.length} worker(s)`);
    }
    this.network.applyGeneration(g);
  }

  private async rejoin(): Promise<void> {
    const id = this.session.identity!;
    try {
      const r = await this.session.requestJoin({ room: id.room, name: id.name, kind: 'hub', backend: 'cpu', rejoin: { memberId: id.memberId, memberToken: id.memberToken } }, id.code);
      if (!r.ok) {
        this.log(`rejoin refused: ${r.error.code} ${r.error.message}`);
        // The server let this hub go while it was away (a closed connection ends a hub's membership at once): join afresh.
        if (r.error.code === 'ERR_NOT_IN_ROOM') this.lostMembership();
        return;
      }
      this.log(`rejoined ${id.room} as ${id.memberId}`);
    } catch (err) {
      const e = toWebringError(err);
      this.log(`rejoin failed: ${e.code} ${e.message}`);
    }
  }

  private accuse(rank: number, misbehaviour: Misbehaviour, detail: string, run: number, step: number): void {
    const g = this.generation;
    const member = g?.members[rank];
    if (!g || !member) return;
    this.log(`rank ${rank} (${member.name}) sent bad data to the hub (${misbehaviour}); asking the server to evict it`);
    this.socket.emit('ring:evict', { run, generation: g.generation, member: member.id, step, reason: misbehaviour, detail: detail.slice(0, 200) }, (r) => {
      if (!r.ok) this.log(`eviction of ${member.name} refused: ${r.error.code} ${r.error.message}`);
    });
  }
}
