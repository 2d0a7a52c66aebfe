/**
 * CPU caps for emulated devices: one cpu cgroup per capped process tree, with a CFS quota
 * against a period (20 ms by default, LAB_CFS_PERIOD_US to change it). Either hierarchy
 * does: cgroup v1's cpu controller at /sys/fs/cgroup/cpu (`cpu.cfs_quota_us`, this
 * project's CI machine), or cgroup v2's unified one at /sys/fs/cgroup (`cpu.max`, current
 * Ubuntu, Debian and Fedora, and the lab's container: docs/lab.md). On v2 the groups live
 * under one parent, /sys/fs/cgroup/webring-lab, whose subtree gets the cpu controller.
 *
 * A quota is not a slower CPU: a `phone` (0.05 core) runs at full speed for 5 ms of every
 * 100 ms period and then waits up to 95 ms, so every message it must answer after its
 * quota is spent waits for the next period. A real slow phone answers in a fraction of a
 * millisecond. The shorter the period, the closer the cap comes to a uniformly slow core
 * (docs/lab.md, "CPU caps").
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { LabError } from './lab-error';
import { LAB_PREFIX } from './network-models';

/** cgroup v1's cpu controller, and the unified v2 hierarchy. */
export const CGROUP_V1_CPU_ROOT = '/sys/fs/cgroup/cpu';
export const CGROUP_V2_ROOT = '/sys/fs/cgroup';
/** On v2, processes of the hierarchy's root moved aside so that its subtree may get the cpu controller (a container's root is not the kernel's). */
const V2_ASIDE = 'webring-init';

/** Where the lab's groups are made, and in which hierarchy. */
export interface CgroupLayout {
  version: 1 | 2;
  /** The directory the lab's groups go in. */
  groups: string;
}
/**
 * The default period, and its bounds (the kernel takes 1 ms to 1 s). 20 ms is the shortest
 * that gives a `phone` (0.05 core) the kernel's least quota of 1 ms: the closest the caps
 * come to slow cores. The kernel's own default of 100 ms stalls a 0.2-core laptop up to
 * 80 ms before every message it answers, which no real laptop does (docs/lab.md).
 */
export const DEFAULT_CFS_PERIOD_US = 20_000;
/** The period of reports written before it was recorded (the lab's default until 2026-11-24). */
export const UNRECORDED_CFS_PERIOD_US = 100_000;
const MIN_CFS_PERIOD_US = 1_000;
const MAX_CFS_PERIOD_US = 1_000_000;

/** The period every cap of this lab uses: LAB_CFS_PERIOD_US, or the default. */
export function cfsPeriodUs(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.LAB_CFS_PERIOD_US;
  if (raw === undefined || raw === '') return DEFAULT_CFS_PERIOD_US;
  const us = Number(raw);
  if (!Number.isInteger(us) || us < MIN_CFS_PERIOD_US || us > MAX_CFS_PERIOD_US) {
    throw new LabError('ERR_LAB_USAGE', `LAB_CFS_PERIOD_US must be an integer from ${MIN_CFS_PERIOD_US} to ${MAX_CFS_PERIOD_US} (microseconds), got ${JSON.stringify(raw)}`);
  }
  return us;
}

export const CFS_PERIOD_US = cfsPeriodUs();

/** Cores a class's devices get, roughly, next to a 2020s desktop core. */
export const DEVICE_CORES = { laptop: 0.2, chromebook: 0.1, phone: 0.05 } as const;
export type DeviceProfile = keyof typeof DEVICE_CORES;

/** A device profile's cores, or an explicit count. */
export type CpuCapSpec = DeviceProfile | { cores: number };

export function coresOf(spec: CpuCapSpec): number {
  const cores = typeof spec === 'string' ? DEVICE_CORES[spec] : spec.cores;
  if (!(cores > 0)) throw new LabError('ERR_LAB_USAGE', `a CPU cap must be a positive number of cores, got ${cores}`);
  return cores;
}

/** The kernel refuses a quota below 1 ms (EINVAL): a phone's 0.05 core needs a period of at least 20 ms. */
export const MIN_CFS_QUOTA_US = 1_000;

/** The quota that caps a group at `cores` (1 core = one full period); ERR_LAB_USAGE when the kernel would refuse it. */
export function quotaUsFor(cores: number, periodUs = CFS_PERIOD_US): number {
  const quota = Math.round(cores * periodUs);
  if (quota < MIN_CFS_QUOTA_US) {
    throw new LabError('ERR_LAB_USAGE', `${cores} core over a ${periodUs} µs CFS period is a ${quota} µs quota, below the kernel's ${MIN_CFS_QUOTA_US} µs: set LAB_CFS_PERIOD_US to at least ${Math.ceil(MIN_CFS_QUOTA_US / cores)}`);
  }
  return quota;
}

/**
 * Throws ERR_LAB_CPU_OVERCOMMIT when the caps add up to more cores than the machine has:
 * then the caps no longer bound anything and the devices just compete for the machine.
 */
export function checkCpuBudget(specs: CpuCapSpec[], machineCores = os.availableParallelism()): number {
  const total = specs.reduce((sum, s) => sum + coresOf(s), 0);
  if (total > machineCores + 1e-9) {
    throw new LabError('ERR_LAB_CPU_OVERCOMMIT', `the CPU caps add up to ${total.toFixed(2)} cores, more than the machine's ${machineCores}`);
  }
  return total;
}

export interface CpuCap {
  name: string;
  dir: string;
  cores: number;
  /** Moves a process (and the children it forks afterwards) into the group. */
  addPid(pid: number): void;
  /** Removes the group; its processes must be gone. */
  remove(): void;
}

/**
 * The hierarchy this machine gives the lab, or ERR_LAB_NO_CGROUP saying what is missing
 * and what to do. v1's cpu controller is taken where it is mounted; else v2's, where its
 * root offers the cpu controller (not bound to v1, and delegated to a container).
 */
export function detectCgroups(v1Root = CGROUP_V1_CPU_ROOT, v2Root = CGROUP_V2_ROOT): CgroupLayout {
  if (existsSync(path.join(v1Root, 'cpu.cfs_quota_us'))) return { version: 1, groups: v1Root };
  const controllers = path.join(v2Root, 'cgroup.controllers');
  if (!existsSync(controllers)) {
    throw new LabError('ERR_LAB_NO_CGROUP', `no cgroup cpu controller: neither v1's at ${v1Root} (cpu.cfs_quota_us) nor a cgroup v2 hierarchy at ${v2Root} (cgroup.controllers); mount one (v2: mount -t cgroup2 none ${v2Root}), or run the lab's container (docs/lab.md)`);
  }
  const offered = readFileSync(controllers, 'utf8').trim().split(/\s+/);
  if (!offered.includes('cpu')) {
    throw new LabError('ERR_LAB_NO_CGROUP', `cgroup v2 at ${v2Root} offers no cpu controller (cgroup.controllers: ${offered.join(' ') || 'none'}): it is bound to a v1 hierarchy, or the container was not given it; run the container with --privileged --cgroupns=private (docs/lab.md)`);
  }
  return { version: 2, groups: path.join(v2Root, LAB_PREFIX) };
}

let layout: CgroupLayout | null = null;

/**
 * The machine's hierarchy, ready for groups (once a process): on v2 the parent exists and
 * its subtree, and its parent's, have the cpu controller. ERR_LAB_NO_CGROUP where the
 * kernel refuses, with what to do.
 */
export function cgroupLayout(): CgroupLayout {
  if (layout) return layout;
  const found = detectCgroups();
  if (found.version === 2) prepareV2(CGROUP_V2_ROOT, found.groups);
  layout = found;
  return found;
}

/** Writes `value` to a cgroup file, turning the kernel's refusal into ERR_LAB_NO_CGROUP with `why`. */
function writeCgroup(file: string, value: string, why: string): void {
  try {
    writeFileSync(file, value);
  } catch (err) {
    throw new LabError('ERR_LAB_NO_CGROUP', `cannot write ${JSON.stringify(value)} to ${file} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}): ${why}`);
  }
}

/**
 * Gives the cpu controller to `groups`' children. v2 lets a group hand a controller to its
 * children only when it holds no process itself, except the kernel's own root; a
 * container's root (its cgroup namespace) holds the container's processes, so they move
 * to a leaf of their own first, as container init systems do.
 */
function prepareV2(root: string, groups: string): void {
  const subtree = path.join(root, 'cgroup.subtree_control');
  const enabled = () => readFileSync(subtree, 'utf8').split(/\s+/).includes('cpu');
  if (!enabled()) {
    try {
      writeFileSync(subtree, '+cpu');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EBUSY') throw new LabError('ERR_LAB_NO_CGROUP', `cannot give the cpu controller to ${root}'s groups (${(err as NodeJS.ErrnoException).code}): run as root, or in the lab's container with --privileged (docs/lab.md)`);
      const aside = path.join(root, V2_ASIDE);
      mkdirSync(aside, { recursive: true });
      for (const pid of cgroupPids(root)) {
        try {
          writeFileSync(path.join(aside, 'cgroup.procs'), String(pid));
        } catch (moveErr) {
          // A kernel thread, or a process that exited: neither holds the root busy.
          if (!['EINVAL', 'ESRCH'].includes((moveErr as NodeJS.ErrnoException).code ?? '')) throw moveErr;
        }
      }
      writeCgroup(subtree, '+cpu', `${root} still holds processes after moving them to ${aside}`);
    }
  }
  mkdirSync(groups, { recursive: true });
  writeCgroup(path.join(groups, 'cgroup.subtree_control'), '+cpu', `${groups} must hold no process of its own`);
}

/** Makes (or reuses) the group `webring-lab-<name>` capped at `spec`. */
export function createCpuCap(name: string, spec: CpuCapSpec): CpuCap {
  const cores = coresOf(spec);
  const { version, groups } = cgroupLayout();
  const dir = path.join(groups, `${LAB_PREFIX}-${name}`);
  mkdirSync(dir, { recursive: true });
  const quota = quotaUsFor(cores);
  if (version === 1) {
    writeFileSync(path.join(dir, 'cpu.cfs_period_us'), String(CFS_PERIOD_US));
    writeFileSync(path.join(dir, 'cpu.cfs_quota_us'), String(quota));
  } else {
    writeFileSync(path.join(dir, 'cpu.max'), `${quota} ${CFS_PERIOD_US}`);
  }
  return {
    name,
    dir,
    cores,
    addPid: (pid) => writeFileSync(path.join(dir, 'cgroup.procs'), String(pid)),
    remove: () => removeCgroup(dir),
  };
}

/** The pids still in a group. */
export function cgroupPids(dir: string): number[] {
  return readFileSync(path.join(dir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean).map(Number);
}

function removeCgroup(dir: string): void {
  if (existsSync(dir)) rmdirSync(dir);
}

/** Every lab group left on the machine (by an earlier run that crashed, or this one), in either hierarchy. */
export function labCgroups(): string[] {
  const dirs = [CGROUP_V1_CPU_ROOT, path.join(CGROUP_V2_ROOT, LAB_PREFIX)];
  return dirs.flatMap((root) =>
    existsSync(root)
      ? readdirSync(root)
          .filter((e) => e.startsWith(`${LAB_PREFIX}-`))
          .map((e) => path.join(root, e))
      : [],
  );
}

/** Kills what is left in a lab group and removes it. */
export function removeLabCgroup(dir: string): void {
  for (const pid of cgroupPids(dir)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch (err) {
      // Gone between the listing and the kill: that is what we wanted.
      if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
    }
  }
  // The kernel empties the group a moment after the kill; rmdir fails with EBUSY until then.
  for (let attempt = 0; ; attempt++) {
    try {
      removeCgroup(dir);
      return;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EBUSY' || attempt >= 50) throw err;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 20);
    }
  }
}
