/**
 * How many seats of a room one client address may hold. One connection holds one seat
 * (a second room:join on it is ERR_ALREADY_JOINED), but a script can open 32 connections and
 * take every seat of MAX_ROOM_MEMBERS, leaving the class outside with ERR_ROOM_FULL.
 *
 * The default depends on where the address is, because a cap must never turn away a real
 * class (a whole class behind one school NAT shares one address):
 * - the server's own machine (loopback, or one of its own interface addresses: a tab the
 *   teacher opens from the printed LAN link): no cap. It is the teacher's: the hub, Node
 *   workers, demo tabs, a reverse proxy on the same host without TRUST_PROXY, the tests.
 * - the class network (private, link-local and unique-local addresses): the server runs on
 *   the teacher's laptop on the class network, where every device has an address of its own
 *   (no NAT between a student and the laptop), so DEFAULT_SEATS_PER_LAN_ADDRESS, room for a
 *   spare tab or a lab PC running a few Node workers, and no student can take a class's seats.
 * - a public address: most likely a whole school behind its NAT (a server on the internet),
 *   so no cap by default.
 * The teacher sets a cap per room that replaces both defaults (PUT /api/rooms/:room/seats):
 * a lower one for a public server whose students come from their own addresses, or up to
 * MAX_ROOM_MEMBERS for a class network that puts NAT between students and the laptop.
 */
import { BlockList, isIPv4, isIPv6 } from 'node:net';
import { networkInterfaces } from 'node:os';
import { MAX_ROOM_MEMBERS } from '../../shared/protocol';

/** Seats one address on the class network may hold unless the teacher says otherwise. */
export const DEFAULT_SEATS_PER_LAN_ADDRESS = 4;

export type AddressScope = 'loopback' | 'lan' | 'public';

const LOOPBACK = new BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');

const LAN = new BlockList();
for (const [net, prefix] of [['10.0.0.0', 8], ['172.16.0.0', 12], ['192.168.0.0', 16], ['169.254.0.0', 16]] as const) LAN.addSubnet(net, prefix, 'ipv4');
for (const [net, prefix] of [['fc00::', 7], ['fe80::', 10]] as const) LAN.addSubnet(net, prefix, 'ipv6');

/** An IPv4 address written as IPv6 (::ffff:192.168.1.20, as a dual-stack socket reports it) as plain IPv4. */
function plain(address: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  return mapped ? mapped[1]! : address;
}

/** This machine's own addresses, read at each call: a laptop's Wi-Fi address changes when it reconnects. */
function ownAddresses(): string[] {
  return Object.values(networkInterfaces()).flatMap((list) => list?.map((i) => plain(i.address)) ?? []);
}

/**
 * Where a client address is: this machine, the class network, or the internet. A global
 * IPv6 address in the /64 of one of this machine's own is on the class network too: the
 * server prints its IPv6 links, and a student who follows one connects from its own
 * global address in the laptop's prefix (issue 38: those counted as public, with no cap).
 * `own`: this machine's addresses (read from its interfaces).
 */
export function addressScope(address: string, own: readonly string[] = ownAddresses()): AddressScope {
  const a = plain(address);
  const family = isIPv4(a) ? 'ipv4' : 'ipv6';
  try {
    if (LOOPBACK.check(a, family) || own.includes(a)) return 'loopback';
    if (LAN.check(a, family)) return 'lan';
  } catch (err) {
    // Not an IP address at all (a test double, a Unix socket): treated like the internet.
    if (!(err instanceof TypeError)) throw err;
  }
  const prefix = ipv6Prefix64(a);
  if (prefix !== null && own.some((o) => ipv6Prefix64(o) === prefix)) return 'lan';
  return 'public';
}

/** The first 64 bits of an IPv6 address, as four hextets ("2001:db8:0:1"); null for anything else. */
export function ipv6Prefix64(address: string): string | null {
  if (!isIPv6(address) || address.includes('.')) return null;
  const [head = '', tail] = address.split('::');
  const left = head === '' ? [] : head.split(':');
  const right = tail === undefined || tail === '' ? [] : tail.split(':');
  const hextets = tail === undefined ? left : [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  return hextets.slice(0, 4).map((h) => parseInt(h, 16).toString(16)).join(':');
}

/**
 * The key one client's connections and seats count under: the address, except that a
 * public IPv6 address counts by its /64, which is one household or one device's privacy
 * addresses (a device may hold many in its prefix). On the class network every device has
 * an address of its own in the laptop's prefix, so there each address counts alone.
 */
export function addressGroup(address: string, own: readonly string[] = ownAddresses()): string {
  const a = plain(address);
  const prefix = ipv6Prefix64(a);
  if (prefix !== null && addressScope(a, own) === 'public') return `${prefix}::/64`;
  return a;
}

/** The seats `address` may hold in a room whose teacher set `perAddress` (null: the defaults above). */
export function seatsPerAddress(address: string, perAddress: number | null): number {
  const scope = addressScope(address);
  if (scope === 'loopback') return MAX_ROOM_MEMBERS;
  if (perAddress !== null) return perAddress;
  return scope === 'lan' ? DEFAULT_SEATS_PER_LAN_ADDRESS : MAX_ROOM_MEMBERS;
}

/** The same client for seats and connections, however the socket wrote its address (addressGroup). */
export function sameAddress(a: string, b: string): boolean {
  return addressGroup(a) === addressGroup(b);
}

/**
 * Which client a member is, for counting distinct classmates: its address, except that
 * every member from this machine (loopback: the teacher's Node workers, demo tabs, the
 * tests) counts as one of its own, like the seats above. Several tabs of one student on one
 * device are one client; a student's second device, on an address of its own, is not.
 */
export function clientOf(member: { id: string; address?: string }): string {
  const address = member.address;
  if (address === undefined || addressScope(address) === 'loopback') return `member:${member.id}`;
  return addressGroup(address);
}

/**
 * How many distinct clients `members` are: by clientOf, or each its own once the teacher
 * vouched that members sharing an address are distinct devices (secure-count.ts).
 */
export function countClients(members: ReadonlyArray<{ id: string; address?: string }>, vouched: boolean): number {
  return vouched ? members.length : new Set(members.map(clientOf)).size;
}
