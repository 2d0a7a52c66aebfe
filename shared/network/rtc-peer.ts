/**
 * A PeerFactory over the platform's RTCPeerConnection, for both sides: a tab passes the
 * browser's, a Node worker @roamhq/wrtc's. It replaces simple-peer, whose repository is
 * unmaintained (feross/simple-peer#780) and whose data channel webring had to reach through
 * private fields for backpressure and for zero-copy messages; the standard API gives both.
 *
 * One ordered data channel per connection, opened by the initiator. Signals (relayed by the
 * server, which never reads them) keep simple-peer's shapes, so a tab of this version and a
 * Node worker of the last still meet: `{type: 'offer' | 'answer', sdp}` and
 * `{type: 'candidate', candidate: {candidate, sdpMid, sdpMLineIndex, usernameFragment}}`,
 * trickled as they come. A signal is checked before it touches the connection (a peer's
 * signal is untrusted input); a bad one fails the link with ERR_PEER_FAILED.
 */
import { z } from 'zod';
import { LOW_WATER_BYTES, type PeerEvents, type PeerFactory } from './peer';

/** Whatever implements RTCPeerConnection: the browser's, or @roamhq/wrtc's in Node. */
export type RtcPeerConnectionClass = new (config?: RTCConfiguration) => RTCPeerConnection;

export interface RtcPeerFactoryOptions {
  /**
   * ICE servers and policy, read at every dial so that each new link gets the freshest TURN
   * credentials (shared/network/ice-config.ts); no servers on one LAN, where host candidates do.
   */
  rtcConfig: () => RTCConfiguration;
}

/** The data channel's label: one per connection. */
const CHANNEL_LABEL = 'webring';
/** The longest SDP taken from a peer: a data-channel offer is about 1 kB, with many candidates inlined a few kB. */
const MAX_SDP_CHARS = 64 * 1024;
const MAX_CANDIDATE_CHARS = 1024;

const descriptionSchema = z.strictObject({ type: z.enum(['offer', 'answer']), sdp: z.string().max(MAX_SDP_CHARS) });
const candidateSchema = z.strictObject({
  type: z.literal('candidate'),
  candidate: z.object({
    candidate: z.string().max(MAX_CANDIDATE_CHARS),
    sdpMid: z.string().max(64).nullable().optional(),
    sdpMLineIndex: z.number().int().min(0).max(1024).nullable().optional(),
    usernameFragment: z.string().max(256).nullable().optional(),
  }),
});
/** A signal as a peer may send it. */
const peerSignalSchema = z.union([descriptionSchema, candidateSchema]);

export function createRtcPeerFactory(Rtc: RtcPeerConnectionClass, options: RtcPeerFactoryOptions): PeerFactory {
  return ({ initiator }, events) => new RtcPeer(new Rtc(options.rtcConfig()), initiator, events);
}

/** One connection and its data channel, behind the PeerHandle interface. */
class RtcPeer {
  private channel: RTCDataChannel | null = null;
  /** Candidates that came before the remote description, added once it is set. */
  private early: RTCIceCandidateInit[] = [];
  private remoteSet = false;
  /** Signals are applied one after another: a candidate must not overtake the offer it belongs to. */
  private applying: Promise<void> = Promise.resolve();
  private done = false;

  constructor(
    private readonly pc: RTCPeerConnection,
    initiator: boolean,
    private readonly events: PeerEvents,
  ) {
    pc.onicecandidate = (e) => {
      const c = e.candidate;
      // Field by field: @roamhq/wrtc's candidates have no toJSON.
      if (c && !this.done) events.onSignal({ type: 'candidate', candidate: { candidate: c.candidate, sdpMid: c.sdpMid, sdpMLineIndex: c.sdpMLineIndex, usernameFragment: c.usernameFragment ?? null } });
    };
    pc.oniceconnectionstatechange = () => {
      // 'disconnected' may recover by itself; 'failed' does not (as simple-peer decided).
      const state = pc.iceConnectionState;
      if (state === 'connected' || state === 'completed') events.onReachable?.();
      else if (state === 'failed') this.fail('the connection failed (ICE)');
      else if (state === 'closed') this.close();
    };
    if (initiator) {
      this.attach(pc.createDataChannel(CHANNEL_LABEL, { ordered: true }));
      this.run(async () => {
        const offer = await pc.createOffer();
        if (this.done) return;
        await pc.setLocalDescription(offer);
        this.sendDescription();
      });
    } else {
      pc.ondatachannel = (e) => this.attach(e.channel);
    }
  }

  signal(data: Record<string, unknown>): void {
    const parsed = peerSignalSchema.safeParse(data);
    if (!parsed.success) {
      this.fail(`a peer sent a signal that is no offer, answer or candidate (${parsed.error.issues[0]?.message ?? 'malformed'})`);
      return;
    }
    const signal = parsed.data;
    this.run(async () => {
      if (signal.type === 'candidate') {
        if (this.remoteSet) await this.pc.addIceCandidate(signal.candidate);
        else this.early.push(signal.candidate);
        return;
      }
      await this.pc.setRemoteDescription({ type: signal.type, sdp: signal.sdp });
      this.remoteSet = true;
      for (const c of this.early.splice(0)) {
        if (this.done) return;
        await this.pc.addIceCandidate(c);
      }
      if (signal.type === 'offer' && !this.done) {
        const answer = await this.pc.createAnswer();
        if (this.done) return;
        await this.pc.setLocalDescription(answer);
        this.sendDescription();
      }
    });
  }

  send(bytes: Uint8Array): void {
    const channel = this.channel;
    if (!channel || channel.readyState !== 'open') throw new Error('data channel not open');
    // A view sends its own bytes only, copied before send returns (the WebRTC spec; @roamhq/wrtc alike).
    channel.send(bytes as Uint8Array<ArrayBuffer>);
  }

  bufferedAmount(): number {
    return this.channel?.bufferedAmount ?? 0;
  }

  destroy(): void {
    this.close();
  }

  private attach(channel: RTCDataChannel): void {
    this.channel = channel;
    channel.binaryType = 'arraybuffer';
    channel.bufferedAmountLowThreshold = LOW_WATER_BYTES;
    channel.addEventListener('bufferedamountlow', () => this.events.onDrain());
    channel.addEventListener('open', () => this.events.onConnect());
    channel.addEventListener('message', (e: MessageEvent) => {
      const data: unknown = e.data;
      if (data instanceof ArrayBuffer) this.events.onData(new Uint8Array(data));
      else if (ArrayBuffer.isView(data)) this.events.onData(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
      else this.fail('a peer sent a non-binary data-channel message');
    });
    channel.addEventListener('close', () => this.close());
    channel.addEventListener('error', (e: Event) => this.fail(`data channel error: ${describeChannelError(e)}`));
  }

  /**
   * Every call on the connection checks first that it is still open: @roamhq/wrtc may crash
   * the process (SIGSEGV) when a closed connection's description is read or set
   * (node-webrtc/node-webrtc#696, WonderInventions/node-webrtc#35), and a link closes
   * whenever the ring re-forms, between any two of a handshake's awaits.
   */
  private sendDescription(): void {
    if (this.done) return;
    const d = this.pc.localDescription;
    if (d) this.events.onSignal({ type: d.type, sdp: d.sdp });
  }

  /** Applies one step of the handshake after the ones before; a failure fails the link, by name. */
  private run(step: () => Promise<void>): void {
    this.applying = this.applying.then(async () => {
      if (this.done) return;
      try {
        await step();
      } catch (err) {
        this.fail(`the handshake failed: ${(err as Error).message}`);
      }
    });
  }

  private fail(message: string): void {
    if (this.done) return;
    this.events.onError('ERR_PEER_FAILED', message);
    this.close();
  }

  /** Closes the channel and the connection once, and says so. */
  private close(): void {
    if (this.done) return;
    this.done = true;
    this.channel?.close();
    this.pc.close();
    this.events.onClose();
  }
}

/** What an RTCErrorEvent says, where the platform gives one. */
function describeChannelError(e: Event): string {
  const error = (e as Event & { error?: { message?: string } }).error;
  return error?.message ?? e.type;
}
