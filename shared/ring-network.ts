/**
 * Keeps this worker's WebRTC links to its ring neighbours in step with the membership
 * generation, and gives each generation a fresh RingAllReduce over them.
 *
 * Of every pair of neighbours, the member with the lower index starts the connection, so
 * a ring of two shares one link in both directions. Links survive a generation change
 * when the neighbour stays the same.
 */
import { WebringError } from './errors';
import { LOW_WATER_BYTES, type PeerFactory, type PeerHandle } from './peer';
import type { Generation } from './protocol';
import { RingAllReduce, type RingLink } from './ring-allreduce';

export interface RingNetworkOptions {
  selfId: string;
  factory: PeerFactory;
  sendSignal(to: string, linkId: string, data: Record<string, unknown>): void;
  log(message: string): void;
  collectiveTimeoutMs?: number;
}

let linkCounter = 0;
function newLinkId(selfId: string): string {
  linkCounter++;
  return `${selfId.slice(0, 8)}-${Date.now().toString(36)}-${linkCounter}`;
}

/** The link to one neighbour; its WebRTC connection may be replaced underneath. */
class PeerLink implements RingLink {
  linkId: string | null = null;
  private handle: PeerHandle | null = null;
  private open = false;
  private failure: WebringError | null = null;
  private waiters: Array<{ resolve: () => void; reject: (e: WebringError) => void }> = [];

  constructor(
    readonly peerId: string,
    private readonly network: RingNetwork,
  ) {}

  connect(initiator: boolean, linkId: string): PeerHandle {
    this.handle?.destroy();
    this.linkId = linkId;
    this.open = false;
    this.failure = null;
    const handle = this.network.factory({ initiator }, {
      onSignal: (data) => this.network.sendSignal(this.peerId, linkId, data),
      onConnect: () => {
        if (this.handle !== handle) return;
        this.open = true;
        this.network.log(`link to ${this.peerId} open`);
        this.wake();
      },
      onData: (bytes) => {
        if (this.handle === handle) this.network.route(this.peerId, bytes);
      },
      onDrain: () => this.wake(),
      onClose: () => this.fail(handle, new WebringError('ERR_PEER_FAILED', `link to ${this.peerId} closed`)),
      onError: (code, message) => this.fail(handle, new WebringError(code, `link to ${this.peerId}: ${message}`)),
    });
    this.handle = handle;
    return handle;
  }

  signal(data: Record<string, unknown>): void {
    this.handle?.signal(data);
  }

  send(bytes: Uint8Array): void {
    if (!this.handle || !this.open) throw new WebringError('ERR_PEER_FAILED', `link to ${this.peerId} is not open`);
    this.handle.send(bytes);
  }

  isOpen(): boolean {
    return this.open;
  }

  bufferedAmount(): number {
    return this.handle?.bufferedAmount() ?? 0;
  }

  whenWritable(): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    if (this.open && this.bufferedAmount() <= LOW_WATER_BYTES) return Promise.resolve();
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
  }

  destroy(): void {
    const h = this.handle;
    this.handle = null;
    this.open = false;
    h?.destroy();
    this.rejectAll(new WebringError('ERR_ABORTED', `link to ${this.peerId} no longer needed`));
  }

  private wake(): void {
    if (!this.open || this.bufferedAmount() > LOW_WATER_BYTES) return;
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w.resolve();
  }

  private fail(handle: PeerHandle, error: WebringError): void {
    if (this.handle !== handle) return;
    this.open = false;
    this.failure = error;
    this.network.log(error.message);
    this.rejectAll(error);
  }

  private rejectAll(error: WebringError): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w.reject(error);
  }
}

export class RingNetwork {
  readonly factory: PeerFactory;
  readonly sendSignal: RingNetworkOptions['sendSignal'];
  readonly log: RingNetworkOptions['log'];
  private readonly selfId: string;
  private readonly timeoutMs: number | undefined;
  private readonly links = new Map<string, PeerLink>();
  private leftId: string | null = null;
  private rightId: string | null = null;
  private current: RingAllReduce | null = null;
  private tap: ((bytes: Uint8Array) => void) | null = null;

  constructor(options: RingNetworkOptions) {
    this.selfId = options.selfId;
    this.factory = options.factory;
    this.sendSignal = options.sendSignal;
    this.log = options.log;
    this.timeoutMs = options.collectiveTimeoutMs;
  }

  /** The collective of the latest generation this worker belongs to. */
  get collective(): RingAllReduce | null {
    return this.current;
  }

  /** Re-forms the ring for a new generation; the previous generation's collective is aborted. */
  applyGeneration(g: Generation): RingAllReduce | null {
    this.current?.abort(new WebringError('ERR_STALE_GENERATION', `generation ${g.generation} replaced ${this.current.generation}`));
    this.current = null;
    const n = g.members.length;
    const rank = g.members.findIndex((m) => m.id === this.selfId);
    if (rank < 0) {
      this.leftId = null;
      for (const id of [...this.links.keys()]) this.dropLink(id);
      return null;
    }
    const self = g.members[rank]!;
    const left = g.members[(rank - 1 + n) % n]!;
    const right = g.members[(rank + 1) % n]!;
    const neighbours = new Map([left, right].filter((m) => m.id !== this.selfId).map((m) => [m.id, m]));
    for (const id of [...this.links.keys()]) if (!neighbours.has(id)) this.dropLink(id);
    for (const [id, member] of neighbours) {
      let link = this.links.get(id);
      if (!link) {
        link = new PeerLink(id, this);
        this.links.set(id, link);
      }
      // The lower index dials; the other side answers the offer in handleSignal.
      if (self.index < member.index && link.linkId === null) link.connect(true, newLinkId(this.selfId));
    }
    this.leftId = n > 1 ? left.id : null;
    this.rightId = n > 1 ? right.id : null;
    this.current = new RingAllReduce({
      rank,
      worldSize: n,
      generation: g.generation,
      right: n > 1 ? this.links.get(right.id)! : null,
      timeoutMs: this.timeoutMs,
    });
    return this.current;
  }

  handleSignal(from: string, linkId: string, data: Record<string, unknown>): void {
    let link = this.links.get(from);
    if (data.type === 'offer' && link?.linkId !== linkId) {
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

  /** Data from a peer: ring traffic only ever comes from the left neighbour. */
  route(peerId: string, bytes: Uint8Array): void {
    if (peerId !== this.leftId) return;
    if (this.tap) this.tap(bytes);
    else this.current?.receive(bytes);
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
    for (const id of [...this.links.keys()]) this.dropLink(id);
  }

  private dropLink(id: string): void {
    this.links.get(id)?.destroy();
    this.links.delete(id);
  }
}
