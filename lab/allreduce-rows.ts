/**
 * The lab's all-reduce rows: in one built network model, the real signaling server with its
 * hub (HUB=1, in the server's namespace, wired as the teacher's laptop is) and N bench peers
 * (lab/bench-peer-process.ts), one per worker namespace under a CPU cap, over real WebRTC
 * data channels. For each wire format and buffer size it times the ring, halving-doubling
 * and the hub, sets each against the model's bound (lab/bounds.ts), and asks the product's
 * own automatic choice (measureLinkModels, then chooseAlgorithm) which one it would take.
 *
 * Every row records how busy the machine was (lab/cpu-monitor.ts) and how often the peers'
 * CPU caps throttled them: a row the machine itself limited does not count.
 *
 * Rows that cannot be the fastest are not run: at each size and wire the pick of 'auto'
 * goes first, then the others from the smallest bound up, and an algorithm whose bound
 * alone is slower than a time already measured beside it is recorded as skipped (no
 * measured row has come within 88 % of its bound here). That halves the section's time on
 * the lab's networks without changing which algorithm is fastest. A plan's `required`
 * rows (the targets') are always run.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chooseAlgorithm, networkShape, type LinkModel, type LinkModels, type NetworkShape } from '../shared/collectives/choice';
import type { Algorithm, WireFormat } from '../shared/protocol';
import { LabError } from './lab-error';
import type { Lab } from './netlab';
import type { CpuCap, CpuCapSpec } from './cpu-caps';
import { machineBound, startCpuMonitor, type CpuSample } from './cpu-monitor';
import { startLabServer, waitForRoom, type LabServer } from './lab-server';
import { RESULT_PREFIX, type BenchPeerRequest } from './bench-peer-protocol';
import type { LabProcess } from './spawn';
import { boundMs, busMBps } from './bounds';
import { progress } from './progress';
import type { ModelName } from './network-models';

const PROJECT_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
/** Joining: the server's start, N processes' start-up on two cores, every link and the hub's. */
const JOIN_TIMEOUT_MS = 180_000;
/** A command may take this many times the model's bound for its bytes, plus a fixed allowance. */
const COMMAND_SLACK = 25;
const COMMAND_ALLOWANCE_MS = 60_000;
/** A row whose peers were throttled in more than this share of their CPU periods was bound by the emulated devices' CPU. */
export const DEVICE_BOUND_THROTTLE = 0.5;

export interface AllReducePlan {
  /** Buffer sizes in bytes of float32 (the wire carries half of it in fp16). */
  sizes: number[];
  wires: WireFormat[];
  algorithms: Algorithm[];
  /** Repetitions of each row, by buffer size: the median of these is the row's time. */
  reps(bytes: number): number;
  /**
   * The buffer 'auto' probes the links with, once per wire format; its α-β models then
   * predict every size, as a trainer's probes at its gradient's size do.
   */
  probeBytes: number;
  /** Each peer's CPU cap. */
  cpu: CpuCapSpec;
  /** Algorithms measured at this place whatever their bound: what a target reads. */
  required?(n: number, bytes: number, wire: WireFormat): Algorithm[];
}

/** A row not run: its bound alone is slower than the fastest time measured beside it. */
export interface SkippedRow {
  model: ModelName;
  n: number;
  bytes: number;
  wire: WireFormat;
  algorithm: Algorithm;
  boundMs: number;
  /** The fastest time measured at the same place when it was skipped. */
  fasterMs: number;
}

/**
 * The order to measure `algorithms` at one place: the pick first (its time is what 'auto'
 * is judged by), then by bound, smallest first, so that a fast time comes early and rules
 * out what cannot beat it.
 */
export function measureOrder(algorithms: readonly Algorithm[], picked: Algorithm, bound: (a: Algorithm) => number): Algorithm[] {
  const rest = algorithms.filter((a) => a !== picked).sort((a, b) => bound(a) - bound(b));
  return algorithms.includes(picked) ? [picked, ...rest] : rest;
}

export interface AllReduceRow {
  model: ModelName;
  n: number;
  bytes: number;
  wire: WireFormat;
  algorithm: Algorithm;
  /** Median over the repetitions of the slowest rank's time. */
  ms: number;
  /** The model's bound for this algorithm (lab/bounds.ts), and the bound over the measured time (1 = at the bound). */
  boundMs: number;
  ofBound: number;
  /** Bus bandwidth of the buffer as it travels (nccl-tests' convention), MB/s. */
  busMBps: number;
  cpu: CpuSample;
  /** The largest share of CPU periods in which a peer's cap throttled it. */
  throttled: number;
  /** False when the machine (all cores busy) or the emulated devices' CPU caps limited the row. */
  counts: boolean;
}

export interface AutoRow {
  model: ModelName;
  n: number;
  bytes: number;
  wire: WireFormat;
  /** What `allreduce: 'auto'` takes with the links measured as the trainer measures them. */
  picked: Algorithm;
  /** The fastest algorithm measured in this run, and the picked one's time over its time. */
  fastest: Algorithm;
  pickedOverFastest: number;
  /** The mean link models every replica agreed on, and the network shape they show. */
  models: LinkModels;
  shape: NetworkShape | null;
}

/** The peers of one lab, driven over their stdin and stdout. */
class PeerSet {
  private nextId = 1;

  constructor(
    readonly procs: LabProcess[],
    readonly caps: CpuCap[],
  ) {}

  /** Sends `command` to every peer and resolves with each one's value, by peer. */
  async all(command: BenchPeerRequest, timeoutMs: number): Promise<unknown[]> {
    const id = this.nextId++;
    const line = `${JSON.stringify({ ...command, id })}\n`;
    for (const p of this.procs) p.child.stdin!.write(line);
    const answers = await Promise.all(this.procs.map((p) => p.waitForLine(new RegExp(`^${RESULT_PREFIX}\\{"id":${id},`), timeoutMs)));
    return answers.map((a, i) => {
      const parsed = JSON.parse(a.slice(RESULT_PREFIX.length)) as { value?: unknown; error?: string };
      if (parsed.error !== undefined) throw new LabError('ERR_LAB_PROCESS', `bench peer ${i}: ${command.cmd} failed: ${parsed.error}`);
      return parsed.value;
    });
  }

  /** Each peer group's CPU periods and throttled periods so far (cgroup v1 cpu.stat). */
  throttleCounters(): Array<{ periods: number; throttled: number }> {
    return this.caps.map((cap) => {
      const stat = readFileSync(path.join(cap.dir, 'cpu.stat'), 'utf8');
      const field = (name: string) => Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(stat)?.[1] ?? 0);
      return { periods: field('nr_periods'), throttled: field('nr_throttled') };
    });
  }
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
};

/** The mean over ranks of each algorithm's model, as the gradient tail agrees it. */
function meanModels(all: LinkModels[]): LinkModels {
  const mean = (pick: (m: LinkModels) => LinkModel | null): LinkModel | null => {
    const ok = all.map(pick).filter((l): l is LinkModel => l !== null);
    if (ok.length === 0) return null;
    return { alphaMs: ok.reduce((s, l) => s + l.alphaMs, 0) / ok.length, betaBytesPerMs: ok.reduce((s, l) => s + l.betaBytesPerMs, 0) / ok.length };
  };
  return { ring: mean((m) => m.ring), halvingDoubling: mean((m) => m.halvingDoubling), hub: mean((m) => m.hub) };
}

const wireBytes = (bytes: number, wire: WireFormat): number => (wire === 'fp16' ? bytes / 2 : bytes);

/** Starts the server with its hub and the peers, and waits until every link (the hub's too) is open. */
async function startPeers(lab: Lab, plan: AllReducePlan): Promise<{ server: LabServer; peers: PeerSet }> {
  const room = `lab-${lab.profile.name}-${lab.n}`;
  const server = await startLabServer(lab, room, { env: { HUB: '1' } });
  await waitForRoom(server, (r) => r.hub !== null, 'the hub joining', JOIN_TIMEOUT_MS);
  const caps = lab.workers.map((_, i) => lab.cpuCap(`w${i}`, plan.cpu));
  const procs = lab.workers.map((_, i) =>
    lab.spawnInWorker(i, process.execPath, ['--import', 'tsx', 'lab/bench-peer-process.ts', '--url', server.url, '--room', room, '--name', `w${i}`, '--n', String(lab.n)], {
      label: `bench peer w${i}`,
      cwd: PROJECT_ROOT,
      cpuCap: caps[i],
      env: { JOIN_CODE: server.joinCode },
    }),
  );
  const peers = new PeerSet(procs, caps);
  await peers.all({ cmd: 'join', hub: true }, JOIN_TIMEOUT_MS);
  return { server, peers };
}

/** Runs `plan` in `lab`: every algorithm at every size and wire, and the automatic choice for each. */
export async function allReduceRows(lab: Lab, plan: AllReducePlan): Promise<{ rows: AllReduceRow[]; autos: AutoRow[]; skipped: SkippedRow[] }> {
  const model = lab.profile.name;
  const n = lab.n;
  progress(`${model}, N = ${n}: starting the server, its hub and ${n} bench peers`);
  const { server, peers } = await startPeers(lab, plan);
  const rows: AllReduceRow[] = [];
  const autos: AutoRow[] = [];
  const skipped: SkippedRow[] = [];
  try {
    for (const wire of plan.wires) {
      // The product's own choice: measureLinkModels on every peer at once, the means as the gradient tail agrees them.
      progress(`${model}, N = ${n}, ${wire}: measuring the links as 'auto' does (${plan.probeBytes / 2 ** 20} MB probes)`);
      const probeTimeout = COMMAND_ALLOWANCE_MS + COMMAND_SLACK * 6 * boundMs(lab.profile, 'ring', n, wireBytes(plan.probeBytes, wire));
      const models = meanModels((await peers.all({ cmd: 'measure', bytes: plan.probeBytes, wire }, probeTimeout)) as LinkModels[]);
      const shape = networkShape(models, n);
      for (const bytes of plan.sizes) {
        const onWire = wireBytes(bytes, wire);
        const reps = plan.reps(bytes);
        const timeoutFor = (algorithm: Algorithm) => COMMAND_ALLOWANCE_MS + COMMAND_SLACK * reps * boundMs(lab.profile, algorithm, n, onWire);
        const picked = chooseAlgorithm('auto', n, onWire, models, { mesh: true, hub: true });
        const times = new Map<Algorithm, number>();
        const required = plan.required?.(n, bytes, wire) ?? [];
        for (const algorithm of measureOrder(plan.algorithms, picked, (a) => boundMs(lab.profile, a, n, onWire))) {
          const fasterMs = Math.min(...times.values());
          const bound = boundMs(lab.profile, algorithm, n, onWire);
          if (!required.includes(algorithm) && bound > fasterMs) {
            skipped.push({ model, n, bytes, wire, algorithm, boundMs: bound, fasterMs });
            progress(`${model}, N = ${n}, ${bytes / 2 ** 20} MB ${wire}: ${algorithm} skipped: its bound ${bound.toFixed(0)} ms is slower than ${fasterMs.toFixed(0)} ms measured`);
            continue;
          }
          progress(`${model}, N = ${n}, ${bytes / 2 ** 20} MB ${wire}: ${algorithm} ×${reps}`);
          const before = peers.throttleCounters();
          const monitor = startCpuMonitor();
          const perPeer = (await peers.all({ cmd: 'allReduce', bytes, reps, algorithm, wire }, timeoutFor(algorithm))) as number[][];
          const cpu = monitor.stop();
          const after = peers.throttleCounters();
          const throttled = Math.max(...after.map((a, i) => (a.periods - before[i]!.periods > 0 ? (a.throttled - before[i]!.throttled) / (a.periods - before[i]!.periods) : 0)));
          const slowest = perPeer[0]!.map((_, rep) => Math.max(...perPeer.map((t) => t[rep]!)));
          const ms = median(slowest);
          times.set(algorithm, ms);
          rows.push({
            model,
            n,
            bytes,
            wire,
            algorithm,
            ms,
            boundMs: bound,
            ofBound: bound / ms,
            busMBps: busMBps(n, onWire, ms),
            cpu,
            throttled,
            counts: !machineBound(cpu) && throttled <= DEVICE_BOUND_THROTTLE,
          });
          progress(`  ${algorithm}: ${ms.toFixed(0)} ms (bound ${bound.toFixed(0)} ms, ${((100 * bound) / ms).toFixed(0)} %), machine ${(cpu.mean * 100).toFixed(0)} % busy, caps throttled ${(throttled * 100).toFixed(0)} %`);
        }
        const [fastest, fastestMs] = [...times].reduce((a, b) => (b[1] < a[1] ? b : a));
        const pickedMs = times.get(picked);
        autos.push({ model, n, bytes, wire, picked, fastest, pickedOverFastest: pickedMs === undefined ? Number.NaN : pickedMs / fastestMs, models, shape });
        progress(`  auto picks ${picked} (${shape ?? 'shape unknown'}); fastest ${fastest}`);
      }
    }
  } finally {
    for (const p of peers.procs) p.child.stdin?.end();
    await Promise.all(peers.procs.map((p) => p.kill()));
    await server.stop();
  }
  return { rows, autos, skipped };
}
