/**
 * The folder shared/network/ owns the links of each membership generation, the peers and
 * ICE. It may import protocol/, collectives/ and util/; never training/ or the DOM (the
 * browser and the Node worker pass their own peer factory).
 *
 * Keeps this worker's WebRTC links in step with the membership generation, and gives each
 * generation a fresh RingAllReduce over them: links to its two ring neighbours, and to its
 * halving-doubling partners (ranks r XOR 2^k, a partial mesh of log2 N links), so that
 * small buffers can take the latency-optimal path.
 *
 * When the generation has a hub (Generation.hub), every ring member also links to it, and
 * the hub's own network links to every ring member and runs a HubReducer instead of a
 * ring.
 *
 * Of every pair, the member with the lower index starts the connection, so a pair shares
 * one link in both directions. Links survive a generation change when the peer is still
 * needed. One link is a PeerLink (peer-link.ts); whom a generation links this worker to
 * comes from neighbours.ts.
 */
import { WebringError } from '../protocol/errors';
import type { PeerFactory } from './peer';
import { PeerLink, newLinkId } from './peer-link';
import { RELAY_SIGNAL } from './relay-link';
import { neighboursIn, type Neighbours } from './neighbours';
import { HUB_RANK, type Generation, type LinkPath, type MemberInfo } from '../protocol';
import { RingAllReduce, type RingAllReduceOptions } from '../collectives/ring-allreduce';
import { HubReducer, type HubReducerOptions } from '../collectives/hub-reducer';
import type { RingLink } from '../collectives/collective';
import { HEADER_BYTES, PHASE_PROBE } from '../collectives/wire';
import { LINK_PROBES_BUDGET_MS, LinkProbe, type LinkFigures } from './link-probe';
import { systemClock, type Clock } from '../util/clock';

/** Messages of a generation this worker has not applied yet are kept up to this much. */
export const MAX_FUTURE_STASH_BYTES = 16 * 1024 * 1024;
/**
 * A link that fails while the generation still needs it is dialled again after this long,
 * doubling each time, at most MAX_AUTO_REDIALS times per link and generation. While
 * generations change quickly (a class arriving), two members can apply them in different
 * orders and one can close a connection the other just opened, and ICE can fail on a
 * loaded machine; without the redial such a link stayed down until the ring re-formed.
 */
export const AUTO_REDIAL_DELAY_MS = 250;
export const MAX_AUTO_REDIALS = 5;
/** A signal asking the peer to dial this link; its linkId is the connection the asker holds. */
const DIAL_REQUEST = 'dial-request';
const NO_LINK = 'none';
/** How long a connection we are dialling may stay unanswered after the peer asked for one. */
export const DIAL_REQUEST_GRACE_MS = 5_000;
/**
 * A link the new generation no longer needs stays open this long before it is closed. Its
 * peer may still be finishing the step before the switch and waiting for this worker's
 * last messages of it, still in the channel's buffer or in flight: closing the connection
 * at once loses them, and that peer then waits out the collective's timeout (seen in the
 * lab: the last rank, switching to a generation that appended a joiner, dropped its link to
 * the chief with the chief's last chunk on it, and the whole class stood for 2 minutes).
 */
export const RETIRED_LINK_GRACE_MS = 10_000;
/** Offset of the generation field in a ring message header (collectives/wire.ts). */
const GENERATION_OFFSET = 4;

/** The header's little-endian u32 generation, read without allocating (this runs per message). */
function generationOf(bytes: Uint8Array): number | null {
  if (bytes.byteLength < HEADER_BYTES) return null;
  const g = GENERATION_OFFSET;
  return (bytes[g]! | (bytes[g + 1]! << 8) | (bytes[g + 2]! << 16) | (bytes[g + 3]! << 24)) >>> 0;
}

export interface RingNetworkOptions {
  selfId: string;
  factory: PeerFactory;
  sendSignal(to: string, linkId: string, data: Record<string, unknown>): void;
  log(message: string): void;
  collectiveTimeoutMs?: number;
  /** Fault injection for tests only: passed to every generation's RingAllReduce. */
  poison?: RingAllReduceOptions['poison'];
  /** Every timer the network and its collectives set (redials, dial grace, collective timeouts). Default: the system clock. */
  clock?: Clock;
  /** On the hub: a rank sent what no honest rank sends (the hub asks the server to evict it). */
  onHubMisbehaviour?: HubReducerOptions['onMisbehaviour'];
}

export class RingNetwork {
  readonly factory: PeerFactory;
  readonly sendSignal: RingNetworkOptions['sendSignal'];
  readonly log: RingNetworkOptions['log'];
  private readonly selfId: string;
  private readonly timeoutMs: number | undefined;
  private readonly poison: RingNetworkOptions['poison'];
  /** Timers of the network, its links and its collectives. */
  readonly clock: Clock;
  private readonly links = new Map<string, PeerLink>();
  private leftId: string | null = null;
  private rightId: string | null = null;
  /** Rank of each member of the applied generation, to tell the collective who sent what. */
  private rankOf = new Map<string, number>();
  /** This worker's place in the applied generation, worked out once per generation. */
  private appliedAt: Neighbours | null = null;
  /** Its place in the generation being prepared (joiners admitted, not switched to yet), or null. */
  private preparingAt: Neighbours | null = null;
  private current: RingAllReduce | null = null;
  /** The hub's sums of the applied generation, when this network is the hub's. */
  private reducer: HubReducer | null = null;
  private readonly onHubMisbehaviour: RingNetworkOptions['onHubMisbehaviour'];
  private applied: Generation | null = null;
  /** Ring messages of generations not applied yet: a neighbour may switch a moment sooner. */
  private future: Array<{ from: string; generation: number; bytes: Uint8Array }> = [];
  private futureBytes = 0;
  private tap: ((bytes: Uint8Array) => void) | null = null;
  /** The network check's probe of each link (link-probe.ts); it answers the peers' probes too. */
  private readonly probe: LinkProbe;

  constructor(options: RingNetworkOptions) {
    this.selfId = options.selfId;
    this.factory = options.factory;
    this.sendSignal = options.sendSignal;
    this.log = options.log;
    this.timeoutMs = options.collectiveTimeoutMs;
    this.poison = options.poison;
    this.clock = options.clock ?? systemClock;
    this.onHubMisbehaviour = options.onHubMisbehaviour;
    const send = (peer: string, bytes: Uint8Array): boolean => {
      const link = this.links.get(peer);
      if (!link?.isOpen()) return false;
      try {
        link.send(bytes);
        return true;
      } catch (err) {
        // A channel that closed under the probe: that link is not measured; the link's own failure handling does the rest.
        this.log(`probe of the link to ${peer} not sent: ${(err as Error).message}`);
        return false;
      }
    };
    this.probe = new LinkProbe({ send, clock: this.clock });
  }

  /** The collective of the latest generation this worker belongs to. */
  get collective(): RingAllReduce | null {
    return this.current;
  }

  /** The hub's reducer of the applied generation, when this network is the hub's; else null. */
  get hubReducer(): HubReducer | null {
    return this.reducer;
  }

  /** The generation the current collective belongs to (or the last one applied). */
  get generation(): Generation | null {
    return this.applied;
  }

  /**
   * Re-forms the ring for a new generation; the previous generation's collective is aborted.
   * Links to unchanged neighbours stay; failed ones are dialled again.
   */
  applyGeneration(g: Generation): RingAllReduce | null {
    this.current?.abort(new WebringError('ERR_STALE_GENERATION', `generation ${g.generation} replaced ${this.current.generation}`));
    this.current = null;
    this.reducer?.abort(new WebringError('ERR_STALE_GENERATION', `generation ${g.generation} replaced ${this.reducer.generation}`));
    this.reducer = null;
    this.applied = g;
    const n = g.members.length;
    const at = neighboursIn(g, this.selfId);
    this.appliedAt = at;
    this.preparingAt = null;
    this.rankOf = new Map(g.members.map((m, r) => [m.id, r]));
    if (g.hub) this.rankOf.set(g.hub.id, HUB_RANK);
    for (const link of this.links.values()) link.autoRedials = 0;
    if (!at) {
      this.leftId = null;
      this.rightId = null;
      for (const id of [...this.links.keys()]) this.dropLink(id);
      this.future = [];
      this.futureBytes = 0;
      return null;
    }
    const neededIds = new Set(at.peers.map((m) => m.id));
    for (const id of [...this.links.keys()]) if (!neededIds.has(id)) this.retireLink(id);
    this.dialNeighbours(at, true);
    const members = g.members;
    if (at.rank === HUB_RANK) {
      this.leftId = null;
      this.rightId = null;
      this.reducer = new HubReducer({
        generation: g.generation,
        worldSize: n,
        link: (r) => this.links.get(members[r]?.id ?? '') ?? null,
        onMisbehaviour: this.onHubMisbehaviour,
      });
      this.replayFuture(g.generation);
      return null;
    }
    this.leftId = n > 1 ? at.left!.id : null;
    this.rightId = n > 1 ? at.right!.id : null;
    this.current = new RingAllReduce({
      rank: at.rank,
      worldSize: n,
      generation: g.generation,
      right: n > 1 ? this.links.get(at.right!.id)! : null,
      peer: (r) => this.links.get(members[r]?.id ?? '') ?? null,
      hub: at.hub ? this.links.get(at.hub.id)! : null,
      timeoutMs: this.timeoutMs,
      poison: this.poison,
      clock: this.clock,
    });
    this.replayFuture(g.generation);
    return this.current;
  }

  /**
   * Opens the links a coming generation needs while the current ring keeps training on
   * its own links: joiners are connected before the switch, so the switch costs the others
   * only the state hand-over.
   */
  prepare(g: Generation): void {
    const at = neighboursIn(g, this.selfId);
    this.preparingAt = at;
    // A link that failed is dialled again: a joiner's link that failed once must not keep
    // the whole class from switching (neededPeer counts the prepared generation's peers).
    if (at) this.dialNeighbours(at, true);
  }

  /**
   * This worker's ring neighbours in `g` whose links are not open: what it reports when
   * they stay shut past their deadline (link-watchdog.ts), so that the server sheds whoever
   * cannot be reached. Empty for the hub and for a ring of one.
   */
  unreachableIn(g: Generation): string[] {
    const at = neighboursIn(g, this.selfId);
    if (!at || at.rank === HUB_RANK || g.members.length === 1) return [];
    return [...new Set([at.left!.id, at.right!.id])].filter((id) => this.links.get(id)?.isOpen() !== true);
  }

  /** How each link the applied generation needs carries its messages now (a network check). */
  linkPaths(): Array<{ peer: string; path: LinkPath }> {
    return (this.appliedAt?.peers ?? []).map((m) => ({ peer: m.id, path: this.links.get(m.id)?.path ?? 'shut' }));
  }

  /** Each link's path, and for an open one its round trip and bandwidth, measured one link at a time within LINK_PROBES_BUDGET_MS (link-probe.ts). */
  async probeLinks(): Promise<Array<{ peer: string; path: LinkPath } & LinkFigures>> {
    const out: Array<{ peer: string; path: LinkPath } & LinkFigures> = [];
    const end = this.clock.now() + LINK_PROBES_BUDGET_MS;
    for (const l of this.linkPaths()) {
      const measured = l.path !== 'shut' && this.clock.now() < end;
      out.push({ ...l, ...(measured ? await this.probe.measure(l.peer, end - this.clock.now()) : { rttMs: null, MBps: null }) });
    }
    return out;
  }

  /** True when both of this worker's ring links in `g` are open. */
  isReadyFor(g: Generation): boolean {
    const at = neighboursIn(g, this.selfId);
    if (!at || at.rank === HUB_RANK) return false;
    if (g.members.length === 1) return true;
    return [at.left!.id, at.right!.id].every((id) => this.links.get(id)?.isOpen() === true);
  }

  /**
   * True when every link halving-doubling needs in the applied generation is open. The
   * trainer votes on it: the ring never waits on a link only halving-doubling uses.
   */
  get meshReady(): boolean {
    const at = this.appliedAt;
    return at !== null && at.peers.every((m) => m.id === at.hub?.id || this.links.get(m.id)?.isOpen() === true);
  }

  /**
   * True when this worker's link to the applied generation's hub is open; false when the
   * generation has no hub. The trainer votes on it: nobody waits on the hub's link.
   */
  get hubReady(): boolean {
    const hub = this.appliedAt?.hub;
    return hub != null && this.links.get(hub.id)?.isOpen() === true;
  }

  private dialNeighbours(at: Neighbours, redialFailed: boolean): void {
    for (const member of at.peers) {
      let link = this.links.get(member.id);
      if (!link) {
        link = new PeerLink(member.id, this);
        this.links.set(member.id, link);
      }
      // The lower index dials; the other side answers the offer in handleSignal.
      const missing = link.linkId === null || (redialFailed && link.failed);
      if (!missing) continue;
      if (at.self.index < member.index) link.connect(true, newLinkId(this.selfId));
      else this.requestDial(member.id, link);
    }
  }

  /**
   * Asks the member that dials this link (the lower index) to dial it, saying which
   * connection this side holds. Members apply generations at slightly different moments;
   * one may have closed a connection the other still believes open, and only this side
   * knows.
   */
  private requestDial(peerId: string, link: PeerLink): void {
    this.sendSignal(peerId, link.linkId ?? NO_LINK, { type: DIAL_REQUEST });
  }

  /** The member `peerId` if the applied (or the prepared) generation needs a link to it, with whether this worker dials it. */
  private neededPeer(peerId: string): { member: MemberInfo; dials: boolean } | null {
    for (const at of [this.appliedAt, this.preparingAt]) {
      const member = at?.peers.find((m) => m.id === peerId);
      if (at && member) return { member, dials: at.self.index < member.index };
    }
    return null;
  }

  /**
   * A link failed: shortly, if the generation still needs it, dial it again (the lower
   * index) or ask the other side to (the higher index).
   */
  linkFailed(link: PeerLink): void {
    if (link.autoRedials >= MAX_AUTO_REDIALS) return;
    const generation = this.applied;
    const stillNeeded = (): boolean =>
      this.applied === generation && this.neededPeer(link.peerId) !== null && this.links.get(link.peerId) === link && link.failed;
    if (!stillNeeded()) return;
    const delay = AUTO_REDIAL_DELAY_MS * 2 ** link.autoRedials;
    link.autoRedials++;
    this.clock.setTimeout(() => {
      if (!stillNeeded()) return;
      if (this.neededPeer(link.peerId)!.dials) {
        this.log(`dialling ${link.peerId} again`);
        link.connect(true, newLinkId(this.selfId));
      } else {
        this.requestDial(link.peerId, link);
      }
    }, delay);
  }

  handleSignal(from: string, linkId: string, data: Record<string, unknown>): void {
    if (data.type === DIAL_REQUEST) {
      this.handleDialRequest(from, linkId);
      return;
    }
    let link = this.links.get(from);
    // A new connection starts with the dialler's offer, or with its relay signal when it opens no WebRTC link.
    if ((data.type === 'offer' || data.type === RELAY_SIGNAL) && link?.linkId !== linkId) {
      // Indices are never reused: the dialler of a pair never changes, and the other side asks
      // it to dial. A new link from the other side would replace this side's open one; a seat
      // moved its working link onto a flooded relay that way and stalled the class (issue 57).
      if (this.neededPeer(from)?.dials) return this.log(`ignoring ${from}'s new link ${linkId}: this side dials their link`);
      if (!link) {
        link = new PeerLink(from, this);
        this.links.set(from, link);
      }
      link.connect(false, linkId);
    }
    if (!link || link.linkId !== linkId) {
      this.log(`ignoring a signal of replaced link ${linkId} from ${from}`);
      return;
    }
    link.signal(data);
  }

  /**
   * The other side asks for a connection. Dial unless this side already dials the very
   * connection it holds; a peer this worker's generation does not need yet is dialled when
   * that generation is applied.
   */
  private handleDialRequest(from: string, theirLinkId: string): void {
    const needed = this.neededPeer(from);
    if (!needed?.dials) return;
    let link = this.links.get(from);
    if (!link) {
      link = new PeerLink(from, this);
      this.links.set(from, link);
    }
    if (link.linkId !== null && link.linkId === theirLinkId && !link.failed) return;
    if (link.linkId !== null && !link.failed && !link.isOpen()) {
      // Our offer may still be on its way to them: give it time before replacing it.
      const pending = link.linkId;
      this.clock.setTimeout(() => {
        if (link.linkId === pending && !link.isOpen() && this.links.get(from) === link && this.neededPeer(from)?.dials) {
          this.log(`${from} never answered link ${pending}; dialling again`);
          link.connect(true, newLinkId(this.selfId));
        }
      }, DIAL_REQUEST_GRACE_MS);
      return;
    }
    this.log(`${from} asks for a connection; dialling`);
    link.connect(true, newLinkId(this.selfId));
  }

  /** Data from a peer, handed to the collective with the sender's rank; it checks who may send what. */
  route(peerId: string, bytes: Uint8Array): void {
    if (bytes[0] === PHASE_PROBE) return this.probe.receive(peerId, bytes);
    if (this.tap) {
      if (peerId === this.leftId) this.tap(bytes);
      return;
    }
    const generation = generationOf(bytes);
    const known = this.applied?.generation ?? -1;
    if (generation !== null && generation > known) {
      if (this.futureBytes + bytes.byteLength > MAX_FUTURE_STASH_BYTES) return;
      this.future.push({ from: peerId, generation, bytes: bytes.slice() });
      this.futureBytes += bytes.byteLength;
      return;
    }
    const from = this.rankOf.get(peerId);
    if (from === undefined) return;
    if (this.reducer) this.reducer.receive(bytes, from);
    else this.current?.receive(bytes, from);
  }

  private replayFuture(generation: number): void {
    const keep = this.future.filter((m) => m.generation > generation);
    const now = this.future.filter((m) => m.generation === generation);
    this.future = keep;
    this.futureBytes = keep.reduce((n, m) => n + m.bytes.byteLength, 0);
    for (const m of now) this.route(m.from, m.bytes);
  }

  /** The link to the right neighbour, for link measurements between collectives. */
  get rightLink(): RingLink | null {
    return this.rightId ? (this.links.get(this.rightId) ?? null) : null;
  }

  /**
   * Diverts the left neighbour's messages to `handler` instead of the ring, for measuring a
   * link's raw throughput; null restores the ring. Never set while a collective runs.
   */
  setTap(handler: ((bytes: Uint8Array) => void) | null): void {
    this.tap = handler;
  }

  close(): void {
    this.current?.abort(new WebringError('ERR_ABORTED', 'worker closed'));
    this.current = null;
    this.reducer?.abort(new WebringError('ERR_ABORTED', 'hub closed'));
    this.reducer = null;
    this.applied = null;
    this.appliedAt = null;
    this.preparingAt = null;
    for (const id of [...this.links.keys()]) this.dropLink(id);
  }

  private dropLink(id: string): void {
    this.links.get(id)?.destroy();
    this.links.delete(id);
  }

  /** Forgets a link the applied generation does not need, closing it after RETIRED_LINK_GRACE_MS. */
  private retireLink(id: string): void {
    this.links.get(id)?.retire(RETIRED_LINK_GRACE_MS);
    this.links.delete(id);
  }
}
