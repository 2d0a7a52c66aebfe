/**
 * CPU caps for emulated devices: one cgroup v1 cpu group per capped process tree, with a
 * CFS quota against a period (20 ms by default, LAB_CFS_PERIOD_US to change it). This
 * machine has the v1 controller at /sys/fs/cgroup/cpu (no v2 `cpu.max`; see the
 * handbook's ENVIRONMENT.md).
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

export const CGROUP_CPU_ROOT = '/sys/fs/cgroup/cpu';
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

/** Makes (or reuses) the group `webring-lab-<name>` capped at `spec`. */
export function createCpuCap(name: string, spec: CpuCapSpec): CpuCap {
  const cores = coresOf(spec);
  const dir = path.join(CGROUP_CPU_ROOT, `${LAB_PREFIX}-${name}`);
  mkdirSync(dir, { recursive: true });
  const quota = quotaUsFor(cores);
  writeFileSync(path.join(dir, 'cpu.cfs_period_us'), String(CFS_PERIOD_US));
  writeFileSync(path.join(dir, 'cpu.cfs_quota_us'), String(quota));
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

/** Every lab group left on the machine (by an earlier run that crashed, or this one). */
export function labCgroups(): string[] {
  if (!existsSync(CGROUP_CPU_ROOT)) return [];
  return readdirSync(CGROUP_CPU_ROOT)
    .filter((e) => e.startsWith(`${LAB_PREFIX}-`))
    .map((e) => path.join(CGROUP_CPU_ROOT, e));
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
