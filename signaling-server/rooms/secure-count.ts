/**
 * How many distinct clients a ring is, for secure aggregation (issue 57, defect 5). Masked
 * sums reveal nothing only over MIN_SECURE_MEMBERS distinct parties: over fewer, each learns
 * the others' gradients from the sum, and one student's several tabs must not count as
 * several parties, so by default members count by address (seats.ts: clientOf). A whole
 * class behind one school NAT is then one client, and its secure run holds for ever.
 *
 * The teacher, who sees the room, may vouch that members sharing an address are distinct
 * devices (PUT /api/rooms/:room/seats {vouched: true}): each member then counts as a client
 * of its own. What that gives up, the teacher page says beside the setting: a student who
 * opens extra tabs in a class of few could make up the parties itself and read a
 * classmate's gradient from the sum. The server cannot tell devices behind one address apart
 * (a per-device id the page keeps would be as easy for a script to fake), so it is the
 * teacher's word, never a default. The count itself is seats.ts: countClients.
 */
import { MIN_SECURE_MEMBERS } from '../../shared/protocol';
import { NO_CHANGE, type MembershipChange, type RoomCore } from './room-core';

/**
 * Why a secure run of `core` holds, in words the teacher acts on; null when it does not
 * (no secure run, a ring of one, or enough clients).
 */
export function secureHold(core: RoomCore): string | null {
  const ring = core.members.ring;
  const clients = core.clients;
  if (!core.runState.record.config?.secureAggregation || ring.length < 2 || clients >= MIN_SECURE_MEMBERS) return null;
  const needs = `secure aggregation holds: it needs ${MIN_SECURE_MEMBERS} distinct clients and the ring has ${clients}`;
  if (clients === ring.length) return `${needs}; with fewer, each would learn the other's gradient from the sum`;
  const shared = clients === 1 ? `all ${ring.length} members share one network address` : `the ${ring.length} members share ${clients} network addresses`;
  const why = "members on one address count once (one student's tabs must not count as several)";
  const vouch = `if they are different devices behind one NAT, vouch for them under the seats setting (PUT /api/rooms/${core.name}/seats {"vouched": true})`;
  return `${needs}: ${shared}, and ${why}; ${vouch}`;
}

/**
 * The teacher vouches (or stops vouching) that members sharing an address are distinct
 * devices. A running ring whose count of clients changes gets a new generation, since its
 * members read the count from the generation and a held secure run waits for one.
 */
export function vouchForSharedAddresses(core: RoomCore, vouched: boolean): MembershipChange {
  const before = core.clients;
  core.members.sharedAddressVouched = vouched;
  if (!core.isTraining || core.members.ring.length === 0 || core.clients === before) return NO_CHANGE;
  const what = vouched ? 'the teacher vouched that members sharing an address are distinct devices' : 'the teacher withdrew the vouch for shared addresses';
  const detail = `${what}: ${core.clients} clients`;
  core.log('reformed', [], detail);
  return { generation: core.bumpGeneration(), trainingAborted: false };
}
