/**
 * The classroom networks the lab emulates, as data: names, addresses and the exact `ip` and
 * `tc` commands that build each one. Pure (nothing here runs a command), so the unit test
 * and docs/lab.md see exactly what lab/netlab.ts executes.
 *
 * Layout: one namespace per endpoint (each worker, the signaling server) and one for the
 * network between them, which holds a bridge (the switch or the access point). Each
 * endpoint reaches the bridge over a veth pair. Addresses come from 198.18.0.0/15, the
 * range RFC 2544 sets aside for benchmarks, so nothing here can collide with a real network.
 */
import { LabError } from './lab-error';

/** Everything the lab makes (namespaces, links, cgroups) starts with this, so a clean-up finds it. */
export const LAB_PREFIX = 'webring-lab';
export const NET_NS = `${LAB_PREFIX}-net`;
export const SERVER_NS = `${LAB_PREFIX}-srv`;
export const BRIDGE = `${LAB_PREFIX}-br`;
/** The one ifb device every wifi client's traffic is redirected through: the air. */
export const AIR_IFB = `${LAB_PREFIX}-air`;
/** The harness's own, unshaped path into the server namespace (root-namespace end, server end). */
export const CONTROL_HOST_LINK = `${LAB_PREFIX}-c`;
export const CONTROL_SERVER_LINK = `${LAB_PREFIX}-cs`;

export const SUBNET_PREFIX_LEN = 24;
export const SERVER_ADDRESS = '198.18.0.1';
const FIRST_WORKER_HOST = 10;
/** A /30 of its own, at the far end of the benchmark range, so it can never be routed from a worker. */
export const CONTROL_HOST_ADDRESS = '198.19.255.1';
export const CONTROL_SERVER_ADDRESS = '198.19.255.2';
const CONTROL_PREFIX_LEN = 30;

/** Interface names are at most 15 characters (IFNAMSIZ): `webring-lab-p99` is the longest. */
export const MAX_WORKERS = 64;

export const workerNs = (i: number): string => `${LAB_PREFIX}-w${i}`;
export const workerAddress = (i: number): string => `198.18.0.${FIRST_WORKER_HOST + i}`;

/** An endpoint of the lab: its namespace, address and the two ends of its veth pair. */
export interface Endpoint {
  /** 'srv' or 'w<i>'. */
  id: string;
  ns: string;
  address: string;
  /** The veth end inside the endpoint's namespace. */
  innerLink: string;
  /** The veth end on the bridge, in NET_NS; its egress is the endpoint's download. */
  portLink: string;
  /** The ifb in NET_NS that shapes the endpoint's upload (what enters the bridge from it). */
  uplinkIfb: string;
}

function endpoint(id: string, ns: string, address: string): Endpoint {
  const suffix = id === 'srv' ? 's' : id.slice(1);
  return { id, ns, address, innerLink: `${LAB_PREFIX}-e${suffix}`, portLink: `${LAB_PREFIX}-p${suffix}`, uplinkIfb: `${LAB_PREFIX}-u${suffix}` };
}

export const serverEndpoint = (): Endpoint => endpoint('srv', SERVER_NS, SERVER_ADDRESS);
export const workerEndpoint = (i: number): Endpoint => endpoint(`w${i}`, workerNs(i), workerAddress(i));

export const MODEL_NAMES = ['wifi', 'wired-lab', 'internet'] as const;
export type ModelName = (typeof MODEL_NAMES)[number];

/**
 * The lab's named profiles: each of the models with the rates the runs use, and
 * `school-uplink`, the internet model with every device behind a 2 Mbit/s uplink (a school
 * or home line that the class's gradients must leave through). A profile of a model, not a
 * model of its own: it is built, shaped, bounded and validated as `internet`.
 */
export const PROFILE_NAMES = [...MODEL_NAMES, 'school-uplink', 'school-wifi-isolated'] as const;
export type ProfileName = (typeof PROFILE_NAMES)[number];

/** Rates in Mbit/s, delays in ms (one way, per shaped hop; applied only where netem exists). */
export interface WifiParams {
  /** The access point's airtime: every client's traffic, both ways, shares it. */
  airMbit: number;
  /** The server's wired link to the access point, each way; null: unshaped. Ignored with serverOnAir. */
  serverMbit: number | null;
  /** Put the server on the air as one more client instead of on a wire to the AP. */
  serverOnAir: boolean;
  /** Added to each crossing of the air when netem exists. */
  delayMs: number;
}
export interface WiredParams {
  /** Each worker's switch port, each way (full duplex). */
  portMbit: number;
  /** The server's switch port, each way; null: unshaped. */
  serverMbit: number | null;
}
export interface InternetParams {
  /** Each site's downlink. */
  downMbit: number;
  /** Each site's uplink. */
  upMbit: number;
  /** The server's own link, each way. */
  serverMbit: number;
  /** Added to each site's uplink and downlink when netem exists. */
  delayMs: number;
}

/**
 * Which students a school's network isolates: none, every one (`school-wifi-isolated`), or
 * every other one, so that half the class opens links and half cannot (a mixed class).
 */
export type IsolatedStudents = 'none' | 'all' | 'half';

export type ModelProfile = (
  | { name: 'wifi'; params: WifiParams }
  | { name: 'wired-lab'; params: WiredParams }
  | { name: 'internet'; params: InternetParams }
) & {
  /** Client isolation and blocked UDP (isolationCommands); absent: 'none'. */
  isolated?: IsolatedStudents;
};

/** The port the lab's signaling server listens on: it has its namespace to itself. The one port an isolated student reaches. */
export const LAB_SERVER_PORT = 8080;

export const DEFAULT_WIFI: WifiParams = { airMbit: 100, serverMbit: 1000, serverOnAir: false, delayMs: 2 };
export const DEFAULT_WIRED: WiredParams = { portMbit: 100, serverMbit: 1000 };
export const DEFAULT_INTERNET: InternetParams = { downMbit: 10, upMbit: 5, serverMbit: 200, delayMs: 20 };
/** `school-uplink`: the lab's internet lines (20 down, the server behind 200) with 2 Mbit/s up per device, and the internet's 20 ms each way where netem exists. */
export const DEFAULT_SCHOOL_UPLINK: InternetParams = { downMbit: 20, upMbit: 2, serverMbit: 200, delayMs: 20 };

/** A named profile with its defaults, and any of its parameters overridden. */
export function wifi(params: Partial<WifiParams> = {}): ModelProfile {
  return { name: 'wifi', params: { ...DEFAULT_WIFI, ...params } };
}
export function wiredLab(params: Partial<WiredParams> = {}): ModelProfile {
  return { name: 'wired-lab', params: { ...DEFAULT_WIRED, ...params } };
}
export function internet(params: Partial<InternetParams> = {}): ModelProfile {
  return { name: 'internet', params: { ...DEFAULT_INTERNET, ...params } };
}

/** The `school-uplink` profile: the internet model, each device's uplink 2 Mbit/s. */
export function schoolUplink(params: Partial<InternetParams> = {}): ModelProfile {
  return internet({ ...DEFAULT_SCHOOL_UPLINK, ...params });
}

/**
 * `school-wifi-isolated`: the Wi-Fi model as a school runs it. The access point isolates its
 * clients (bridge port isolation: students cannot reach each other), and each student's
 * traffic to anything but the teacher's TCP port is dropped: no UDP, so no WebRTC, and no
 * TURN. `half` isolates every other student only.
 */
export function schoolWifiIsolated(isolated: Exclude<IsolatedStudents, 'none'> = 'all', params: Partial<WifiParams> = {}): ModelProfile {
  return { ...wifi(params), isolated };
}

/** Whether worker `i` is behind the profile's isolation. */
export function isIsolated(profile: ModelProfile, i: number): boolean {
  const isolated = profile.isolated ?? 'none';
  // The odd ones: the chief (worker 0) and every ring neighbour of an isolated student can open links.
  return isolated === 'all' || (isolated === 'half' && i % 2 === 1);
}

export function profileByName(name: string): ModelProfile {
  switch (name) {
    case 'wifi':
      return wifi();
    case 'wired-lab':
      return wiredLab();
    case 'internet':
      return internet();
    case 'school-uplink':
      return schoolUplink();
    case 'school-wifi-isolated':
      return schoolWifiIsolated();
    default:
      throw new LabError('ERR_LAB_USAGE', `unknown network profile ${JSON.stringify(name)}: one of ${PROFILE_NAMES.join(', ')}`);
  }
}

// tbf sizing. A token bucket too small for the bursts TCP hands it starves a single flow
// below the rate; a queue too short drops before TCP fills the pipe. Both scale with the
// rate, with floors for slow links.
/** The bucket holds this much time at the rate... */
const TBF_BURST_MS = 2;
/**
 * ...but at least ten full frames. Deliberately less than a GSO super-packet (64 KiB, which
 * veth passes whole): tbf then splits those into frames, so a 5 Mbit/s link delivers a
 * steady stream instead of one 64 KiB lump every 100 ms, which a 2 s count would get wrong
 * by a lump either way.
 */
const TBF_MIN_BURST_BYTES = 10 * 1514;
/** The queue holds this much time at the rate (a home router's or AP's buffer)... */
const TBF_QUEUE_MS = 50;
/** ...and at least two GSO super-packets, whose frames are queued all at once. */
const TBF_MIN_LIMIT_BYTES = 2 * 64 * 1024;

const bytesFor = (mbit: number, ms: number): number => Math.round((mbit * 1e6 * ms) / 1e3 / 8);

/** The tbf arguments (after `tc qdisc add dev X root handle 1:`) for a link of `mbit`. */
export function tbfArgs(mbit: number): string[] {
  if (!(mbit > 0)) throw new LabError('ERR_LAB_USAGE', `a link rate must be positive, got ${mbit} Mbit/s`);
  const burst = Math.max(bytesFor(mbit, TBF_BURST_MS), TBF_MIN_BURST_BYTES);
  const limit = Math.max(bytesFor(mbit, TBF_QUEUE_MS), TBF_MIN_LIMIT_BYTES);
  return ['tbf', 'rate', `${mbit}mbit`, 'burst', String(burst), 'limit', String(limit)];
}

/** One command as an argument list: `ip …` or `tc …`, namespaced with `-n NS`. */
export type Command = string[];

const ipIn = (ns: string | null, ...args: string[]): Command => (ns === null ? ['ip', ...args] : ['ip', '-n', ns, ...args]);
const tcIn = (ns: string, ...args: string[]): Command => ['tc', '-n', ns, ...args];

/** A rate limit on the egress of `dev` in `ns`, with netem's delay under it when it exists. */
function shape(ns: string, dev: string, mbit: number, delayMs: number): Command[] {
  const cmds = [tcIn(ns, 'qdisc', 'add', 'dev', dev, 'root', 'handle', '1:', ...tbfArgs(mbit))];
  if (delayMs > 0) cmds.push(tcIn(ns, 'qdisc', 'add', 'dev', dev, 'parent', '1:1', 'handle', '10:', 'netem', 'delay', `${delayMs}ms`));
  return cmds;
}

/** Namespaces, bridge, veth pairs, addresses and the control path: the same for every model. */
export function topologyCommands(n: number): Command[] {
  checkWorkerCount(n);
  const endpoints = [serverEndpoint(), ...Array.from({ length: n }, (_, i) => workerEndpoint(i))];
  const cmds: Command[] = [ipIn(null, 'netns', 'add', NET_NS), ...endpoints.map((e) => ipIn(null, 'netns', 'add', e.ns))];
  cmds.push(ipIn(NET_NS, 'link', 'set', 'lo', 'up'), ipIn(NET_NS, 'link', 'add', BRIDGE, 'type', 'bridge'), ipIn(NET_NS, 'link', 'set', BRIDGE, 'up'));
  for (const e of endpoints) {
    cmds.push(
      ipIn(NET_NS, 'link', 'add', e.portLink, 'type', 'veth', 'peer', 'name', e.innerLink, 'netns', e.ns),
      ipIn(NET_NS, 'link', 'set', e.portLink, 'master', BRIDGE),
      ipIn(NET_NS, 'link', 'set', e.portLink, 'up'),
      ipIn(e.ns, 'link', 'set', 'lo', 'up'),
      ipIn(e.ns, 'addr', 'add', `${e.address}/${SUBNET_PREFIX_LEN}`, 'dev', e.innerLink),
      ipIn(e.ns, 'link', 'set', e.innerLink, 'up'),
      // Chromium gathers no ICE host candidates in a namespace without a default route (it
      // asks the kernel which local address a route to the internet would use). An on-link
      // default onto the bridge answers that; the bridge has no way out, so nothing leaves.
      ipIn(e.ns, 'route', 'add', 'default', 'dev', e.innerLink),
    );
  }
  // The harness calls the server's HTTP API over its own veth, so the control traffic never
  // spends the shaped bandwidth being measured.
  cmds.push(
    ipIn(null, 'link', 'add', CONTROL_HOST_LINK, 'type', 'veth', 'peer', 'name', CONTROL_SERVER_LINK, 'netns', SERVER_NS),
    ipIn(null, 'addr', 'add', `${CONTROL_HOST_ADDRESS}/${CONTROL_PREFIX_LEN}`, 'dev', CONTROL_HOST_LINK),
    ipIn(null, 'link', 'set', CONTROL_HOST_LINK, 'up'),
    ipIn(SERVER_NS, 'addr', 'add', `${CONTROL_SERVER_ADDRESS}/${CONTROL_PREFIX_LEN}`, 'dev', CONTROL_SERVER_LINK),
    ipIn(SERVER_NS, 'link', 'set', CONTROL_SERVER_LINK, 'up'),
  );
  return cmds;
}

const redirectTo = (ifb: string): string[] => ['protocol', 'all', 'u32', 'match', 'u32', '0', '0', 'action', 'mirred', 'egress', 'redirect', 'dev', ifb];

/** What enters the bridge from `port` goes through `ifb` first. */
function ingressThrough(port: string, ifb: string): Command[] {
  return [tcIn(NET_NS, 'qdisc', 'add', 'dev', port, 'handle', 'ffff:', 'ingress'), tcIn(NET_NS, 'filter', 'add', 'dev', port, 'parent', 'ffff:', ...redirectTo(ifb))];
}

/** Both directions of one port through the air: what enters from the client and what leaves towards it. */
function onAir(port: string): Command[] {
  return [
    ...ingressThrough(port, AIR_IFB),
    // htb only to have a classful root a filter can hang on; the filter steals every packet first.
    tcIn(NET_NS, 'qdisc', 'add', 'dev', port, 'root', 'handle', '1:', 'htb'),
    tcIn(NET_NS, 'filter', 'add', 'dev', port, 'parent', '1:', ...redirectTo(AIR_IFB)),
  ];
}

/**
 * Upload and download of one endpoint, both shaped on the network's side: the download on
 * the bridge port's egress, the upload on an ifb that the port's ingress is redirected
 * through. Not on the endpoint's own egress: there tbf's drops are local, and a local drop
 * makes the sender's TCP back off far harder than a loss in the network (a 5 Mbit/s uplink
 * measured 3.8 that way), while TCP Small Queues (4 MB here) would not stop it filling the queue.
 */
function duplex(e: Endpoint, upMbit: number, downMbit: number, delayMs: number): Command[] {
  return [
    ipIn(NET_NS, 'link', 'add', e.uplinkIfb, 'type', 'ifb'),
    ipIn(NET_NS, 'link', 'set', e.uplinkIfb, 'up'),
    ...shape(NET_NS, e.uplinkIfb, upMbit, delayMs),
    ...ingressThrough(e.portLink, e.uplinkIfb),
    ...shape(NET_NS, e.portLink, downMbit, delayMs),
  ];
}

/** The shaping of `profile` over a topology of `n` workers; `netem`: whether delays can be added. */
export function shapingCommands(profile: ModelProfile, n: number, netem: boolean): Command[] {
  checkWorkerCount(n);
  const workers = Array.from({ length: n }, (_, i) => workerEndpoint(i));
  const server = serverEndpoint();
  switch (profile.name) {
    case 'wifi': {
      const p = profile.params;
      const delay = netem ? p.delayMs : 0;
      const cmds: Command[] = [ipIn(NET_NS, 'link', 'add', AIR_IFB, 'type', 'ifb'), ipIn(NET_NS, 'link', 'set', AIR_IFB, 'up'), ...shape(NET_NS, AIR_IFB, p.airMbit, delay)];
      for (const w of workers) cmds.push(...onAir(w.portLink));
      if (p.serverOnAir) cmds.push(...onAir(server.portLink));
      else if (p.serverMbit !== null) cmds.push(...duplex(server, p.serverMbit, p.serverMbit, 0));
      return cmds;
    }
    case 'wired-lab': {
      const p = profile.params;
      const cmds = workers.flatMap((w) => duplex(w, p.portMbit, p.portMbit, 0));
      if (p.serverMbit !== null) cmds.push(...duplex(server, p.serverMbit, p.serverMbit, 0));
      return cmds;
    }
    case 'internet': {
      const p = profile.params;
      const delay = netem ? p.delayMs : 0;
      return [...workers.flatMap((w) => duplex(w, p.upMbit, p.downMbit, delay)), ...duplex(server, p.serverMbit, p.serverMbit, 0)];
    }
  }
}

/** The one-way delay a model actually adds per shaped hop: its profile's where netem exists, else 0. */
export function appliedDelayMs(profile: ModelProfile, netem: boolean): number {
  if (!netem || profile.name === 'wired-lab') return 0;
  return profile.params.delayMs;
}

/**
 * The isolation of `profile`'s isolated students, with what this kernel has (no netfilter,
 * no tc drop action here):
 *  - the access point's client isolation is the bridge's own: an isolated port forwards to
 *    the server's port and to no other isolated one, silently, as an AP does;
 *  - the school's firewall is two policy rules in the student's namespace: its TCP to the
 *    teacher's port is routed, and everything else goes nowhere (a blackhole: dropped at
 *    the student instead of in the network). Everything: a rule for UDP alone let the
 *    hub's ICE-TCP candidates on the server's other address (the harness's control path,
 *    which the server namespace answers ARP for on any port) carry links directly.
 */
export function isolationCommands(profile: ModelProfile, n: number): Command[] {
  checkWorkerCount(n);
  const cmds: Command[] = [];
  for (let i = 0; i < n; i++) {
    if (!isIsolated(profile, i)) continue;
    const w = workerEndpoint(i);
    cmds.push(
      ipIn(NET_NS, 'link', 'set', 'dev', w.portLink, 'type', 'bridge_slave', 'isolated', 'on'),
      ipIn(w.ns, 'rule', 'add', 'pref', '100', 'to', SERVER_ADDRESS, 'ipproto', 'tcp', 'dport', String(LAB_SERVER_PORT), 'lookup', 'main'),
      ipIn(w.ns, 'rule', 'add', 'pref', '110', 'blackhole'),
    );
  }
  return cmds;
}

/** Every command that builds `profile` with `n` workers, in order. */
export function labCommands(profile: ModelProfile, n: number, netem: boolean): Command[] {
  return [...topologyCommands(n), ...shapingCommands(profile, n, netem), ...isolationCommands(profile, n)];
}

function checkWorkerCount(n: number): void {
  if (!Number.isInteger(n) || n < 1 || n > MAX_WORKERS) throw new LabError('ERR_LAB_USAGE', `the lab holds 1 to ${MAX_WORKERS} workers, got ${n}`);
}
