/**
 * The network check's pairwise probe: the round trip and the bandwidth of each of this
 * worker's links to a classmate (or the hub), measured over the link itself, direct or
 * relayed, so the teacher sees what the gradients between devices will get, not only each
 * device's way to the server.
 *
 * Probe messages share the links with the collectives. Their first byte is PHASE_PROBE,
 * which no collective uses, so RingNetwork.route hands them here before anything else. A
 * message from a peer is checked before it is answered: a ping gets a pong of the same 10
 * bytes, and a bulk transfer gets one acknowledgement once its declared size arrived. At
 * most one bulk per peer is counted, never past LINK_PROBE_BYTES; anything else is ignored
 * and counted as refused.
 *
 * Layout: [0] PHASE_PROBE, [1] kind, [2..5] the nonce (u32 LE), [6..9] the bulk's total
 * bytes (u32 LE, 0 otherwise), then a bulk's payload.
 */
import { PHASE_PROBE } from '../collectives/wire';
import { MAX_REPORTED_MBPS } from '../protocol';
import { systemClock, type Clock } from '../util/clock';

const KIND_PING = 1;
const KIND_PONG = 2;
const KIND_BULK = 3;
const KIND_BULK_ACK = 4;
export const PROBE_HEADER_BYTES = 10;
/** Bytes each link carries one way for its bandwidth: enough to fill a link's window, and under a second on a 2 Mbit/s uplink's share of a check. */
export const LINK_PROBE_BYTES = 256 * 1024;
/** Per message: under the relay's largest (MAX_RELAYED_MESSAGE_BYTES, 96 KiB) and a data channel's comfortable size. */
const BULK_MESSAGE_BYTES = 64 * 1024;
/** Round trips whose median is the link's. */
export const LINK_RTT_SAMPLES = 3;
/**
 * A ping not answered this long after it went out counts as not measured; a bulk gets at
 * least this long, and whatever is left of the device's LINK_PROBES_BUDGET_MS: every device
 * probes at once, so on a 2 Mbit/s uplink shared by three bulks each one crawls at ~80 kB/s.
 */
export const LINK_PROBE_TIMEOUT_MS = 3_000;
/**
 * All of a device's links are probed within this long; the links left after it report their
 * path only. The teacher waits for the answer, which must reach the server inside
 * NETWORK_CHECK_REPORT_WINDOW_MS, after the probes to the server.
 */
export const LINK_PROBES_BUDGET_MS = 12_000;

export interface LinkFigures {
  rttMs: number | null;
  MBps: number | null;
}

export interface LinkProbeOptions {
  /** Sends one message on the link to `peer`; false when that link is not open (nothing sent). */
  send(peer: string, bytes: Uint8Array): boolean;
  clock?: Clock;
}

export class LinkProbe {
  private readonly clock: Clock;
  private nonce = 1;
  private readonly waiting = new Map<number, (at: number) => void>();
  /** The bulk each peer is sending this worker: its nonce, size and what arrived. */
  private readonly incoming = new Map<string, { nonce: number; total: number; got: number }>();
  /** Probe messages that were malformed or over the bounds (a confused or hostile peer). */
  refused = 0;

  constructor(private readonly options: LinkProbeOptions) {
    this.clock = options.clock ?? systemClock;
  }

  /** A probe message from `peer` (its first byte is PHASE_PROBE): answers or settles it. */
  receive(peer: string, bytes: Uint8Array): void {
    if (bytes.byteLength < PROBE_HEADER_BYTES) return void this.refused++;
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const kind = bytes[1];
    const nonce = view.getUint32(2, true);
    const total = view.getUint32(6, true);
    if ((kind === KIND_PING || kind === KIND_PONG || kind === KIND_BULK_ACK) && bytes.byteLength !== PROBE_HEADER_BYTES) return void this.refused++;
    if (kind === KIND_PING) return void this.reply(peer, KIND_PONG, nonce);
    if (kind === KIND_PONG || kind === KIND_BULK_ACK) return this.settle(nonce);
    if (kind !== KIND_BULK || total === 0 || total > LINK_PROBE_BYTES) return void this.refused++;
    let bulk = this.incoming.get(peer);
    if (!bulk || bulk.nonce !== nonce) this.incoming.set(peer, (bulk = { nonce, total, got: 0 }));
    bulk.got += bytes.byteLength - PROBE_HEADER_BYTES;
    if (bulk.total !== total || bulk.got > bulk.total) {
      this.incoming.delete(peer);
      return void this.refused++;
    }
    if (bulk.got === bulk.total) {
      this.incoming.delete(peer);
      void this.reply(peer, KIND_BULK_ACK, nonce);
    }
  }

  /** The round trip (median of LINK_RTT_SAMPLES) and the bandwidth one way of the link to `peer`; null for what did not answer. */
  async measure(peer: string, bulkTimeoutMs = LINK_PROBE_TIMEOUT_MS): Promise<LinkFigures> {
    const rtts: number[] = [];
    for (let i = 0; i < LINK_RTT_SAMPLES; i++) {
      const t0 = this.clock.now();
      const at = await this.exchange(peer, KIND_PING, LINK_PROBE_TIMEOUT_MS, () => false);
      if (at === null) return { rttMs: null, MBps: null };
      rtts.push(at - t0);
    }
    const rttMs = [...rtts].sort((a, b) => a - b)[rtts.length >> 1]!;
    const t0 = this.clock.now();
    const at = await this.exchange(peer, KIND_BULK, Math.max(bulkTimeoutMs, LINK_PROBE_TIMEOUT_MS), (nonce) => {
      for (let sent = 0; sent < LINK_PROBE_BYTES; sent += BULK_MESSAGE_BYTES) {
        const bytes = new Uint8Array(PROBE_HEADER_BYTES + Math.min(BULK_MESSAGE_BYTES, LINK_PROBE_BYTES - sent));
        writeProbeHeader(bytes, KIND_BULK, nonce, LINK_PROBE_BYTES);
        if (!this.options.send(peer, bytes)) return false;
      }
      return true;
    });
    if (at === null) return { rttMs, MBps: null };
    // The acknowledgement's own way back is half a round trip of the time measured. The pings
    // may have waited longer than the bulk (a busy device), so that half is taken off at most
    // half the bulk's time: jitter can double the figure, never blow it past any link.
    const elapsedMs = Math.max(at - t0, 0.001);
    const ms = Math.max(elapsedMs - rttMs / 2, elapsedMs / 2);
    return { rttMs, MBps: Math.min(LINK_PROBE_BYTES / ms / 1000, MAX_REPORTED_MBPS) };
  }

  /** Sends a ping (or a bulk, by `sendBulk`) and resolves with the clock at its answer; null on a closed link or a timeout. */
  private exchange(peer: string, kind: number, timeoutMs: number, sendBulk: (nonce: number) => boolean): Promise<number | null> {
    const nonce = this.nonce++ >>> 0;
    return new Promise((resolve) => {
      const timer = this.clock.setTimeout(() => {
        this.waiting.delete(nonce);
        resolve(null);
      }, timeoutMs);
      this.waiting.set(nonce, (at) => {
        this.clock.clearTimeout(timer);
        resolve(at);
      });
      const sent = kind === KIND_PING ? this.reply(peer, KIND_PING, nonce) : sendBulk(nonce);
      if (!sent) {
        // The link is shut: not measured, as a timeout would say, without the wait.
        this.clock.clearTimeout(timer);
        this.waiting.delete(nonce);
        resolve(null);
      }
    });
  }

  private settle(nonce: number): void {
    const done = this.waiting.get(nonce);
    if (!done) return void this.refused++;
    this.waiting.delete(nonce);
    done(this.clock.now());
  }

  /** Sends a header-only message; false when the link to `peer` is shut. */
  private reply(peer: string, kind: number, nonce: number): boolean {
    const bytes = new Uint8Array(PROBE_HEADER_BYTES);
    writeProbeHeader(bytes, kind, nonce, 0);
    return this.options.send(peer, bytes);
  }
}

function writeProbeHeader(bytes: Uint8Array, kind: number, nonce: number, total: number): void {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  bytes[0] = PHASE_PROBE;
  bytes[1] = kind;
  view.setUint32(2, nonce, true);
  view.setUint32(6, total, true);
}
