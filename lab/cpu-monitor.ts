/**
 * How busy the whole machine was during a row, from /proc/stat. Emulated devices share two
 * real cores: a row during which the machine itself was saturated measured the machine,
 * not the network model, and does not count.
 *
 * Work at idle priority (SCHED_IDLE: the in-process accuracy runs, the checkpoint scorer)
 * takes only what the row leaves over, so it is taken out of the busy share before a row
 * is judged: `registerIdleWork` names its CPU seconds, and every sample says the share
 * without it.
 */
import { readFileSync } from 'node:fs';
import os from 'node:os';

export const CPU_SAMPLE_INTERVAL_MS = 250;
/** At or above this busy fraction of all cores, a row is bound by the machine. */
export const MACHINE_BOUND_FRACTION = 0.9;

export interface CpuSample {
  /** Busy fraction of all cores (0..1), averaged over the row and the highest interval. */
  mean: number;
  peak: number;
  cores: number;
  intervals: number;
  /** `mean` without what idle-priority work used meanwhile (absent in reports from before it was recorded). */
  withoutIdle?: number;
}

/** The CPU seconds so far of each piece of idle-priority work now running beside the rows. */
const idleWork = new Set<() => number>();

/** Counts `cpuSeconds` as idle-priority work until the returned function is called. */
export function registerIdleWork(cpuSeconds: () => number): () => void {
  idleWork.add(cpuSeconds);
  return () => idleWork.delete(cpuSeconds);
}

const idleSeconds = (): number => [...idleWork].reduce((sum, f) => sum + f(), 0);

interface Jiffies {
  busy: number;
  total: number;
}

/** The aggregate `cpu` line: busy is everything but idle and iowait. */
function readJiffies(): Jiffies {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0]!;
  const fields = line.trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal (guest time is already inside user)
  const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = fields;
  const busy = user + nice + system + irq + softirq + steal;
  return { busy, total: busy + idle + iowait };
}

export interface CpuMonitor {
  /** Stops sampling and returns what it saw. */
  stop(): CpuSample;
}

/** Starts sampling /proc/stat every `intervalMs`. */
export function startCpuMonitor(intervalMs = CPU_SAMPLE_INTERVAL_MS): CpuMonitor {
  const idle0 = idleSeconds();
  const t0 = Date.now();
  const first = readJiffies();
  let last = first;
  let peak = 0;
  let intervals = 0;
  const tick = () => {
    const now = readJiffies();
    const total = now.total - last.total;
    if (total > 0) {
      peak = Math.max(peak, (now.busy - last.busy) / total);
      intervals++;
    }
    last = now;
  };
  const timer = setInterval(tick, intervalMs);
  return {
    stop() {
      clearInterval(timer);
      tick();
      const total = last.total - first.total;
      const mean = total > 0 ? (last.busy - first.busy) / total : 0;
      const cores = os.availableParallelism();
      const idleShare = (idleSeconds() - idle0) / Math.max(1e-9, ((Date.now() - t0) / 1000) * cores);
      return { mean, peak, cores, intervals, withoutIdle: Math.max(0, mean - idleShare) };
    },
  };
}

/** True when the machine was saturated during the row, idle-priority work aside: its figures do not count. */
export const machineBound = (sample: CpuSample): boolean => (sample.withoutIdle ?? sample.mean) >= MACHINE_BOUND_FRACTION;
