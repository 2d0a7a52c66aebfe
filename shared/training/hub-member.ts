/**
 * The hub as a room member: joins with kind 'hub' (never in the ring, never chief, trains
 * nothing), keeps a link to every ring member through the same RingNetwork the workers
 * use, and sums their gradients with a HubReducer whenever they pick the hub collective.
 * It rejoins after a lost connection with its credentials, and names a rank that sends
 * what no honest rank sends to the server (ring:evict), which checks the accusation.
 *
 * node-worker/hub.ts runs it beside the server (`npm start -- --hub`); the lab runs it in
 * the server's network namespace.
 */
import type { Socket } from 'socket.io-client';
import type { ClientToServerEvents, Generation, JoinAccepted, Misbehaviour, ServerToClientEvents } from '../protocol';
import { WebringError, toWebringError } from '../protocol/errors';
import { SignalingSession } from './signaling-session';
import { RingNetwork } from '../network/ring-network';
import type { PeerFactory } from '../network/peer';
import type { HubReducer } from '../collectives/hub-reducer';
import { systemClock, type Clock } from '../util/clock';

export interface HubMemberOptions {
  socket: Socket<ServerToClientEvents, ClientToServerEvents>;
  factory: PeerFactory;
  log(message: string): void;
  /** Hears the ICE config of every join and rejoin (TURN credentials), before any link is dialled. */
  onIceConfig?(ice: unknown): void;
  clock?: Clock;
}

export class HubMember {
  private readonly session: SignalingSession;
  private readonly socket: HubMemberOptions['socket'];
  private readonly log: HubMemberOptions['log'];
  private network: RingNetwork | null = null;
  private generation: Generation | null = null;
  private left = false;

  constructor(private readonly options: HubMemberOptions) {
    const clock = options.clock ?? systemClock;
    this.socket = options.socket;
    this.log = options.log;
    this.session = new SignalingSession(options.socket, clock, options.onIceConfig);
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
    socket.on('member:dropped', (d) => this.log(`dropped from the room (${d.reason}): ${'detail' in d ? d.detail : ''}`));
    socket.on('disconnect', (reason) => this.log(`signaling connection lost (${reason})`));
    socket.on('connect', () => {
      if (this.session.identity && !this.left) void this.rejoin();
    });
  }

  /** The reducer of the generation applied now, or null before the first ring forms. */
  get reducer(): HubReducer | null {
    return this.network?.hubReducer ?? null;
  }

  /** Joins `room` as its hub; fails with the server's code (ERR_HUB_TAKEN when it already has one). */
  async join(room: string, name: string, code: string): Promise<JoinAccepted> {
    const result = await this.session.requestJoin({ room, name, kind: 'hub', backend: 'cpu' }, code);
    if (!result.ok) throw new WebringError(result.error.code, result.error.message);
    this.session.identity = { room, name, code, memberId: result.memberId, memberToken: result.memberToken };
    this.network = new RingNetwork({
      selfId: result.memberId,
      factory: this.options.factory,
      sendSignal: (to, linkId, data) => this.session.relaySignal(to, linkId, data),
      log: this.log,
      onHubMisbehaviour: (rank, misbehaviour, detail, run, step) => this.accuse(rank, misbehaviour, detail, run, step),
    });
    if (this.generation) this.network.applyGeneration(this.generation);
    return result;
  }

  /** Says goodbye, so the class falls back to the ring at once. */
  leave(): void {
    this.left = true;
    this.session.leave();
    this.network?.close();
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
