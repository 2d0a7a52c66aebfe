/**
 * The one wire protocol of webring: socket.io event maps, HTTP bodies and their schemas.
 * Both the server (`new Server<...>()`) and every worker (`io()`) import this file, so
 * there is never a second copy of a message shape. Types describe; the zod schemas
 * validate, at every entry point, because types are not validation.
 *
 * The folder shared/protocol/ owns what crosses between server and workers, in parts this
 * file re-exports (and only this file imports them all): limits and vocabulary
 * (vocabulary.ts), what workers and the teacher send with its schemas (messages.ts), a run's
 * recipe (start-config.ts), ICE
 * configuration (ice.ts), what the server sends (server-shapes.ts), who sends to whom in a
 * ring (topology.ts), when a member is too slow or a ring stuck (liveness.ts), the error codes
 * (errors.ts) and the join-code format (join-code.ts); the event maps are here. It imports nothing from the rest of the project, so every other
 * part may import it.
 */
import type { ErrorBody } from './errors';
import type { Ack, JoinAccepted, Generation, TrainStart, TrainStop, MemberDropped } from './server-shapes';
import type { IceConfig } from './ice';
import type { CollectSetting, DropRequest, EvaluationReport, EvictRequest, FinishReport, JoinRequest, OwnExamplesReport, ProgressReport, ReformRequest, SecureKey, SignalRelay, LinkData, RelayedLinkData, NetworkReport, NetworkCheckRequest } from './messages';

export * from './vocabulary';
export * from './ice';
export * from './messages';
export * from './start-config';
export * from './server-shapes';
export * from './topology';
export * from './liveness';

// ---------------------------------------------------------------------------
// socket.io event maps
// ---------------------------------------------------------------------------
export interface ClientToServerEvents {
  'room:join': (request: JoinRequest, ack: Ack<JoinAccepted>) => void;
  'room:leave': (ack?: Ack<Record<string, never>>) => void;
  'signal:relay': (relay: SignalRelay, ack?: Ack<Record<string, never>>) => void;
  /** One ring message for a member this worker reaches through the server (shared/network/relay-link.ts). */
  'link:data': (data: LinkData, ack?: Ack<Record<string, never>>) => void;
  'worker:progress': (report: ProgressReport) => void;
  'worker:evaluated': (report: EvaluationReport) => void;
  'worker:finished': (report: FinishReport) => void;
  /** This device's own examples per class changed (counts only). */
  'worker:own-examples': (report: OwnExamplesReport) => void;
  /** This device's answer to the teacher's network check. */
  'worker:network': (report: NetworkReport) => void;
  'ring:drop': (request: DropRequest) => void;
  'ring:reform': (request: ReformRequest) => void;
  /** Fresh TURN credentials for a member whose current ones are about to expire. */
  'ice:config': (ack: Ack<{ ice: IceConfig }>) => void;
  'ring:evict': (request: EvictRequest, ack?: Ack<{ evicted: string[] }>) => void;
  /** This member's public key for a generation of a secure run; the server relays it to the room. */
  'secagg:key': (key: SecureKey, ack?: Ack<Record<string, never>>) => void;
}

/** Every client event name, checked against the map so the list cannot fall out of date. */
export const CLIENT_EVENT_NAMES = Object.keys({
  'room:join': true,
  'room:leave': true,
  'signal:relay': true,
  'link:data': true,
  'worker:progress': true,
  'worker:evaluated': true,
  'worker:finished': true,
  'worker:own-examples': true,
  'worker:network': true,
  'ring:drop': true,
  'ring:reform': true,
  'ice:config': true,
  'ring:evict': true,
  'secagg:key': true,
} satisfies Record<keyof ClientToServerEvents, true>) as Array<keyof ClientToServerEvents>;

export interface ServerToClientEvents {
  'ring:generation': (generation: Generation) => void;
  'signal:relay': (relay: { from: string; linkId: string; data: Record<string, unknown> }) => void;
  /** A relayed ring message; the page calls `taken` as it arrives, which paces the server's relay to its link (signaling-server/edge/relay-backpressure.ts). */
  'link:data': (data: RelayedLinkData, taken?: () => void) => void;
  /** The teacher asked every device to measure its network now (POST /api/rooms/:room/network-check). */
  'room:network-check': (check: { check: number } & NetworkCheckRequest) => void;
  'train:start': (start: TrainStart) => void;
  'train:stop': (stop: TrainStop) => void;
  'member:dropped': (dropped: MemberDropped) => void;
  /** The teacher paused: every replica stops after the same step and waits for train:resume. */
  'train:pause': () => void;
  'train:resume': () => void;
  /** The teacher opened, changed or closed collecting (null): the classes to collect for. */
  'room:collect': (collect: CollectSetting | null) => void;
  /** A member's public key for a generation of a secure run, as it published it. */
  'secagg:key': (key: SecureKey & { member: string }) => void;
  /** Errors for events that have no ack. */
  'server:error': (error: ErrorBody) => void;
}

