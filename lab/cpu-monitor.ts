/**
 * How busy the whole machine was during a row, from /proc/stat. Emulated devices share two
 * real cores: a row during which the machine itself was saturated measured the machine,
 * not the network model, and does not count.
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
}

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
      return { mean: total > 0 ? (last.busy - first.busy) / total : 0, peak, cores: os.availableParallelism(), intervals };
    },
  };
}

/** True when the machine was saturated during the row: its figures do not count. */
export const machineBound = (sample: CpuSample): boolean => sample.mean >= MACHINE_BOUND_FRACTION;
