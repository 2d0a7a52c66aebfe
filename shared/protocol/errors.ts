/**
 * Stable error codes shared by the server, the browser worker and the Node worker.
 * Callers branch on `code`, never on message text.
 */
export const ERROR_CODES = [
  'ERR_BAD_REQUEST',
  'ERR_UNAUTHORIZED',
  'ERR_BAD_JOIN_CODE',
  'ERR_UNKNOWN_ROOM',
  'ERR_NOT_IN_ROOM',
  'ERR_ALREADY_JOINED',
  'ERR_ROOM_FULL',
  'ERR_BAD_STATE',
  'ERR_NO_WORKERS',
  'ERR_PAYLOAD_TOO_LARGE',
  'ERR_STALE_GENERATION',
  'ERR_STALE_RUN',
  'ERR_STALE_STEP',
  'ERR_ABORTED',
  'ERR_TIMEOUT',
  'ERR_PEER_FAILED',
  'ERR_UNREACHABLE',
  /** This member's ring links would not open: the class shed it and trains on (signaling-server/rooms/formation.ts). */
  'ERR_RING_UNREACHABLE',
  /** Training failed on this member (its own run, not the class's): the class shed it and trains on. */
  'ERR_TRAINING_FAILED',
  'ERR_MEMBER_LEFT',
  'ERR_DROPPED',
  'ERR_RUN_ENDED',
  /** The class made no progress (no step, no evaluation) for longer than its own pace allows: the server ended the run (signaling-server/rooms/stall-watch.ts). */
  'ERR_RUN_STALLED',
  'ERR_NOT_CHIEF',
  'ERR_UNKNOWN_CHECKPOINT',
  /** A task, or a dataset of one, that the server's registry does not have (shared/tasks/registry.ts). */
  'ERR_UNKNOWN_TASK',
  /** A checkpoint of another task than the run's: its weights and data position mean nothing to this run. */
  'ERR_OTHER_TASK',
  'ERR_BAD_DATA',
  /** A run on the class's own data, and no device holds an example to train on. */
  'ERR_NO_EXAMPLES',
  'ERR_RATE_LIMITED',
  /** A relayed message to a member that is not the sender's ring partner, or on a link the other end has not said it relays (signaling-server/rooms/relay-partners.ts). */
  'ERR_RELAY_REFUSED',
  /** A relayed message to a member whose connection is too far behind: the sender has more than its window waiting at the server for it (signaling-server/edge/relay-backpressure.ts). */
  'ERR_RELAY_BACKLOG',
  /** A reader past its share of the data service's bytes for the room's current epoch (signaling-server/edge/data-budget.ts). */
  'ERR_DATA_BUDGET',
  /** A ring:reform from a member past its re-forms for the run: ignored, and a few more evict it (signaling-server/rooms/reform-votes.ts). */
  'ERR_TOO_MANY_REFORMS',
  /** A ring peer sent data no honest peer sends: wrong length, non-finite values, a wrong generation. */
  'ERR_PEER_MISBEHAVED',
  /** An eviction request the server refused (not the reporter's sender, or over its allowance), or a chief's drop that what the server saw contradicts. */
  'ERR_BAD_ACCUSATION',
  /** A secure sum whose masks did not cancel: some rank summed with other keys (shared/secagg/secure-collective.ts); the class re-forms with fresh keys. */
  'ERR_SECAGG_MISMATCH',
  /** A second hub member for a room that has one. */
  'ERR_HUB_TAKEN',
  /** A join from a client address that already holds as many of the room's seats as one address may (signaling-server/rooms/seats.ts). */
  'ERR_SEAT_LIMIT',
  /** A `kind: 'hub'` join without the room's hub key, which only the teacher's server hands out. */
  'ERR_HUB_NOT_AUTHORIZED',
  /** A hub join while the teacher has removed the room's hub (or the server did, for the rest of the run). */
  'ERR_HUB_REMOVED',
  /** A checkpoint's step outside its run: before the run's start step, or past the class's reported step plus a small margin. */
  'ERR_STEP_OUT_OF_RANGE',
  /** An optional package this machine needs and lacks (a Node worker's WebRTC, @roamhq/wrtc): the message names it and the command that installs it. */
  'ERR_MISSING_PACKAGE',
  'ERR_INTERNAL',
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

/** The JSON shape of every error that crosses the wire (socket acks, HTTP bodies). */
export interface ErrorBody {
  code: ErrorCode;
  message: string;
  /** For validation errors: the dotted path of the offending field. */
  field?: string;
}

export class WebringError extends Error {
  readonly code: ErrorCode;
  readonly field: string | undefined;

  constructor(code: ErrorCode, message: string, field?: string) {
    super(message);
    this.name = 'WebringError';
    this.code = code;
    this.field = field;
  }

  toBody(): ErrorBody {
    return this.field === undefined
      ? { code: this.code, message: this.message }
      : { code: this.code, message: this.message, field: this.field };
  }
}

/** Turns anything thrown into a coded error, keeping the code of a WebringError. */
export function toWebringError(err: unknown, fallback: ErrorCode = 'ERR_INTERNAL'): WebringError {
  if (err instanceof WebringError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new WebringError(fallback, message);
}
