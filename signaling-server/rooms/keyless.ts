/**
 * The server's deadline for secure-aggregation keys (issue 38). A member of a secure run
 * that publishes no key for a new generation stalls every mask partner for the key wait
 * (KEY_WAIT_MS), and then the class re-forms with it again: 15 s per generation, forever,
 * and nobody named. The server relays every key, so it knows who published for the ring:
 * when the deadline passes on a generation that is still current, the members without a key
 * are evicted ('no-key'), on that evidence alone, and the class re-forms without them.
 * The room's side; key-deadline.ts keeps the timer.
 */
import { KEY_WAIT_MS } from '../../shared/secagg/key-directory';
import type { EvictionCause, MemberDropped } from '../../shared/protocol';
import { recordEvicted } from './removals';
import { NO_CHANGE, type MembershipChange, type RoomCore } from './room-core';

/** As long as a partner waits for a key: a member that has not published by then has stalled the class once already. */
export const KEY_DEADLINE_MS = KEY_WAIT_MS;

const NO_KEY: EvictionCause = 'no-key';

/** The members evicted for publishing no key, and what each is told. */
export interface KeylessEviction {
  change: MembershipChange;
  evicted: Array<{ id: string; socketId: string | null; notice: Extract<MemberDropped, { reason: 'evicted' }> }>;
}

/**
 * Evicts the ring members of `generation` of a secure run that published no key for it.
 * Nothing changes when the generation is gone, the run is not secure, or nobody published
 * (then the fault is not one member's: the relay, or a class without WebCrypto).
 */
export function evictKeyless(core: RoomCore, generation: number): KeylessEviction {
  const run = core.runState.run;
  if (!core.isTraining || !core.runState.config?.secureAggregation || generation !== core.currentGeneration) return { change: NO_CHANGE, evicted: [] };
  const ring = core.members.ring;
  const keyless = ring.filter((m) => m.publishedKey?.run !== run || m.publishedKey.generation !== generation);
  if (keyless.length === 0 || keyless.length === ring.length) return { change: NO_CHANGE, evicted: [] };
  const step = core.runState.step;
  const evicted = keyless.map((m) => {
    const detail = `published no secure-aggregation key for generation ${generation} within ${Math.round(KEY_DEADLINE_MS / 1000)} s; its mask partners could not sum`;
    recordEvicted(core, m, step, NO_KEY, null, detail);
    core.members.removeFromRing(m.id);
    core.log('evicted', [m.name], detail);
    return { id: m.id, socketId: m.socketId, notice: { reason: 'evicted' as const, step, misbehaviour: NO_KEY, detail } };
  });
  return { change: core.afterRemoval(), evicted };
}
