/**
 * The relay's flow control (handlers/link-relay.ts): the server forwards relayed messages to
 * a member only while less than RELAY_TARGET_BACKLOG_BYTES of them are on their way to it,
 * unacknowledged by the member's page, and holds the rest; the sender's acknowledgement
 * waits for the forward. An honest sender keeps at most its window
 * (shared/network/relay-link.ts RELAY_WINDOW_BYTES) unacknowledged, so it slows to its
 * partner's download speed and nothing piles up. A sender that ignores its
 * acknowledgements finds RELAY_PAIR_HELD_BYTES held for one partner and is refused with
 * ERR_RELAY_BACKLOG; past RELAY_FLOOD_STRIKES refusals in RELAY_FLOOD_WINDOW_MS the server
 * names it (the caller logs it, and the teacher's page marks it). Without this, one seat's
 * 160 Mbit/s relay budget aimed at a classmate on a busy 1 MB/s Wi-Fi buried the
 * classmate's pings, and the server dropped the classmate as dead within 5 s (issue 57).
 *
 * The member's page acknowledges each relayed message as it arrives, because what the
 * server's connection still holds says little: the kernel's send buffer took 5 MB of a
 * flood on loopback before the server's own buffers grew. A target on another node of a
 * cluster is not visible here: messages to it are forwarded at once, unacknowledged.
 */
import { WebringError } from '../../shared/protocol/errors';
import type { Clock } from '../../shared/util/clock';

/** Relayed bytes on their way to one member, unacknowledged, at most: at 1 MB/s, a second of delay for its pings. */
export const RELAY_TARGET_BACKLOG_BYTES = 1024 * 1024;
/** Bytes one sender may have held for one partner: an honest sender's window (1 MiB) and one message, with room to spare. */
export const RELAY_PAIR_HELD_BYTES = 2 * 1024 * 1024;
/** A held message not forwarded within this long is refused: its partner takes less than a few kB/s, or is gone. */
export const RELAY_HOLD_MS = 10_000;
/** How often (ms) a target with held messages is looked at for expired ones and a closed connection. */
export const RELAY_CHECK_MS = 250;
/** A sender refused this often within RELAY_FLOOD_WINDOW_MS is named. */
export const RELAY_FLOOD_STRIKES = 16;
export const RELAY_FLOOD_WINDOW_MS = 10_000;

/** The target's connection, as far as the flow control needs it. */
export interface RelayTarget {
  readonly connected: boolean;
}

/** Sends the message to the target; calls `taken` once the target's page acknowledged it. */
export type RelaySend = (taken: () => void) => void;

interface Held {
  from: string;
  bytes: number;
  at: number;
  send: RelaySend;
  settle(error: WebringError | null): void;
}

interface Strikes {
  count: number;
  since: number;
  named: boolean;
}

interface TargetFlow {
  target: RelayTarget;
  /** Bytes forwarded to it and not acknowledged yet. */
  outstanding: number;
  /** Messages waiting, oldest first. */
  held: Held[];
  timer: unknown;
}

export class RelayBackpressure {
  private readonly flows = new Map<string, TargetFlow>();
  private readonly strikes = new Map<string, Strikes>();

  constructor(private readonly clock: Clock) {}

  /**
   * Forwards a message of `bytes` from member `from` to `target` (null: not on this node)
   * through `send`, now or once the target has taken enough of what went before; the
   * promise resolves once it went, or rejects when it waited RELAY_HOLD_MS or the target
   * closed. Throws ERR_RELAY_BACKLOG, holding nothing, when `from` already has
   * RELAY_PAIR_HELD_BYTES held for this target; `onNamed` hears a sender the first time its
   * refusals reach RELAY_FLOOD_STRIKES within a window. Messages to one target go in
   * arrival order.
   */
  forward(
    from: string,
    targetId: string,
    target: RelayTarget | null,
    bytes: number,
    send: RelaySend,
    onNamed: (from: string) => void,
  ): Promise<void> {
    if (!target) {
      send(() => undefined);
      return Promise.resolve();
    }
    let flow = this.flows.get(targetId);
    if (!flow) {
      this.forgetClosed();
      this.flows.set(targetId, (flow = { target, outstanding: 0, held: [], timer: null }));
    }
    if (flow.held.length === 0 && flow.outstanding < RELAY_TARGET_BACKLOG_BYTES) {
      this.send(targetId, flow, bytes, send);
      return Promise.resolve();
    }
    const held = flow.held.reduce((sum, h) => (h.from === from ? sum + h.bytes : sum), 0);
    if (held + bytes > RELAY_PAIR_HELD_BYTES) {
      if (this.strike(from)) onNamed(from);
      const why = `the server holds ${held} bytes from ${from} that its partner has not taken yet`;
      throw new WebringError('ERR_RELAY_BACKLOG', `${why}; wait for the acknowledgements before sending more`);
    }
    return new Promise<void>((resolve, reject) => {
      flow.held.push({ from, bytes, at: this.clock.now(), send, settle: (error) => (error ? reject(error) : resolve()) });
      if (flow.timer === null) flow.timer = this.clock.setTimeout(() => this.check(targetId), RELAY_CHECK_MS);
    });
  }

  private send(targetId: string, flow: TargetFlow, bytes: number, send: RelaySend): void {
    flow.outstanding += bytes;
    send(() => {
      flow.outstanding -= bytes;
      this.drain(targetId, flow);
    });
  }

  /** Forwards held messages while the target has room; forgets a target with nothing on its way. */
  private drain(targetId: string, flow: TargetFlow): void {
    while (flow.held.length > 0 && flow.outstanding < RELAY_TARGET_BACKLOG_BYTES && flow.target.connected) {
      const first = flow.held.shift()!;
      this.send(targetId, flow, first.bytes, first.send);
      first.settle(null);
    }
    if (flow.held.length === 0) {
      if (flow.timer !== null) this.clock.clearTimeout(flow.timer);
      flow.timer = null;
      if (flow.outstanding <= 0 && this.flows.get(targetId) === flow) this.flows.delete(targetId);
    }
  }

  /** Refuses held messages that waited too long, or whose target closed. */
  private check(targetId: string): void {
    const flow = this.flows.get(targetId);
    if (!flow) return;
    flow.timer = null;
    const now = this.clock.now();
    if (!flow.target.connected) {
      const closed = new WebringError('ERR_NOT_IN_ROOM', 'the partner\'s connection closed before the server could relay to it');
      for (const h of flow.held.splice(0)) h.settle(closed);
      this.flows.delete(targetId);
      return;
    }
    while (flow.held.length > 0 && now - flow.held[0]!.at > RELAY_HOLD_MS) {
      flow.held.shift()!.settle(new WebringError('ERR_RELAY_BACKLOG', `the partner took no relayed message for ${RELAY_HOLD_MS / 1000} s`));
    }
    if (flow.held.length > 0) flow.timer = this.clock.setTimeout(() => this.check(targetId), RELAY_CHECK_MS);
    else this.drain(targetId, flow);
  }

  /** Forgets targets whose connection closed with nothing held (what went to them unacknowledged never will be). */
  private forgetClosed(): void {
    for (const [id, flow] of this.flows) if (!flow.target.connected && flow.held.length === 0) this.flows.delete(id);
  }

  /** Counts a refusal of `from`; true the first time its refusals in one window reach RELAY_FLOOD_STRIKES. */
  private strike(from: string): boolean {
    const now = this.clock.now();
    let s = this.strikes.get(from);
    if (!s || now - s.since > RELAY_FLOOD_WINDOW_MS) {
      for (const [id, old] of this.strikes) if (now - old.since > RELAY_FLOOD_WINDOW_MS) this.strikes.delete(id);
      this.strikes.set(from, (s = { count: 0, since: now, named: false }));
    }
    s.count++;
    if (s.count < RELAY_FLOOD_STRIKES || s.named) return false;
    s.named = true;
    return true;
  }

  /** Bytes held for every target: what a flood costs the server's memory. */
  get heldBytes(): number {
    let bytes = 0;
    for (const flow of this.flows.values()) for (const h of flow.held) bytes += h.bytes;
    return bytes;
  }
}
