/**
 * The lab's in-process accuracy runs (lab/local-steps-accuracy.ts: local steps against every
 * step, and the conv workload's time to accuracy) as a pool of child processes at idle
 * priority, and the CPU they took. The pool is paused (its children stopped with SIGSTOP:
 * a run's result does not depend on when it runs) except while a section waits for its
 * runs' results, with nothing else running. Any CPU work beside a capped device delays
 * it (beside the collectives it made the Wi-Fi model's TCP flows miss their profile by
 * 19 %): the kernel lets an unthrottled
 * group preempt a busy CPU only at the next tick, so latency-bound rows (a ring of eight
 * 0.2-core laptops on the wired lab) stepped 1.7 to 2.3× slower beside two idle-priority busy loops.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { registerIdleWork, type CpuSample } from './cpu-monitor';
import { tail } from './spawn';
import { progress } from './progress';
import { DONE_PREFIX, POINT_PREFIX, planConfig, type AccuracyPlan, type AccuracyResult } from './local-steps-protocol';
import { recorder } from './run-settings';

const PROJECT_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/**
 * The accuracy runs, `workers` at a time, each `chrt --idle 0 node lab/local-steps-accuracy.ts`:
 * SCHED_IDLE, so beside the windows they take only what the capped devices, the server and
 * the harness leave over, and otherwise both cores.
 */
export class AccuracyPool {
  readonly results: AccuracyResult[] = [];
  readonly errors: Array<{ what: string; message: string }> = [];
  private readonly queue: AccuracyPlan[] = [];
  private readonly running = new Map<string, { child: ChildProcess; stderr: string[] }>();
  /** Every id ever added, and the ids settled (a result or an error). */
  private readonly known = new Set<string>();
  private readonly plans = new Map<string, AccuracyPlan>();
  private readonly settled = new Set<string>();
  private readonly waiters: Array<{ ids: string[]; resolve: () => void }> = [];
  private readonly listeners: Array<(r: AccuracyResult) => void> = [];
  /** CPU seconds of the children that have exited. */
  private exitedCpuSeconds = 0;
  private readonly unregister: () => void;
  private paused = true;

  constructor(private readonly workers: number) {
    this.unregister = registerIdleWork(() => this.cpuSeconds());
  }

  /** Lets the runs go on (and new ones start). */
  resume(): void {
    if (!this.paused) return;
    this.paused = false;
    for (const { child } of this.running.values()) child.kill('SIGCONT');
    this.fill();
  }

  /** Stops every run where it is until `resume`. */
  pause(): void {
    if (this.paused) return;
    this.paused = true;
    for (const { child } of this.running.values()) child.kill('SIGSTOP');
  }

  /** Queues the plans whose ids are new, in order, and starts as many as there are workers. */
  add(plans: AccuracyPlan[]): void {
    for (const p of plans) {
      if (this.known.has(p.id)) continue;
      this.known.add(p.id);
      this.plans.set(p.id, p);
      this.queue.push(p);
    }
    this.fill();
  }

  /** Calls `listener` with each result from now on. */
  onResult(listener: (r: AccuracyResult) => void): () => void {
    this.listeners.push(listener);
    return () => this.listeners.splice(this.listeners.indexOf(listener), 1);
  }

  /**
   * Resolves once every one of `ids` has a result or an error, the pool running meanwhile
   * (and paused again after, unless it was running before). The section now running
   * (lab/run-settings.ts) records what these runs train with: they are its figures, even
   * when a whole run queued them before it began.
   */
  async wait(ids: string[]): Promise<void> {
    for (const id of ids) {
      const plan = this.plans.get(id);
      if (plan) recorder().noteConfig(planConfig(plan));
    }
    const wasPaused = this.paused;
    this.resume();
    await new Promise<void>((resolve) => {
      this.waiters.push({ ids, resolve });
      this.wake();
    });
    if (wasPaused) this.pause();
  }

  resultOf(id: string): AccuracyResult | undefined {
    return this.results.find((r) => r.plan.id === id);
  }

  get pending(): string[] {
    return [...this.running.keys(), ...this.queue.map((p) => p.id)];
  }

  private wake(): void {
    for (const w of [...this.waiters]) {
      if (w.ids.every((id) => this.settled.has(id) || !this.known.has(id))) {
        this.waiters.splice(this.waiters.indexOf(w), 1);
        w.resolve();
      }
    }
  }

  private fill(): void {
    while (!this.paused && this.running.size < this.workers && this.queue.length > 0) this.launch(this.queue.shift()!);
    this.wake();
  }

  private launch(plan: AccuracyPlan): void {
    const child = spawn('chrt', ['--idle', '0', process.execPath, '--import', 'tsx', 'lab/local-steps-accuracy.ts', JSON.stringify(plan)], { cwd: PROJECT_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    const entry = { child, stderr: [] as string[] };
    this.running.set(plan.id, entry);
    let result: AccuracyResult | null = null;
    let cpu = 0;
    child.stderr!.on('data', (d: Buffer) => {
      entry.stderr.push(...d.toString().split('\n').filter(Boolean));
      entry.stderr.splice(0, Math.max(0, entry.stderr.length - 30));
    });
    createInterface({ input: child.stdout! }).on('line', (line) => {
      if (line.startsWith(POINT_PREFIX)) {
        const p = JSON.parse(line.slice(POINT_PREFIX.length)) as AccuracyResult['points'][number];
        cpu = p.cpuSeconds;
        progress(`accuracy ${plan.id}: ${p.examples} examples (step ${p.steps}, round ${p.rounds}): screen ${(p.screen * 100).toFixed(2)} %${p.full === null ? '' : `, all 10,000 ${(p.full * 100).toFixed(2)} %`}`);
      } else if (line.startsWith(DONE_PREFIX)) {
        result = JSON.parse(line.slice(DONE_PREFIX.length)) as AccuracyResult;
      }
    });
    const finish = (why: string | null) => {
      if (!this.running.has(plan.id)) return;
      this.running.delete(plan.id);
      if (result) {
        this.exitedCpuSeconds += result.cpuSeconds;
        this.results.push(result);
        this.settled.add(plan.id);
        progress(`accuracy ${plan.id}: ${result.stoppedBy}; ${result.crossed ? `${(plan.threshold * 100).toFixed(0)} % after ${result.crossed.examples} examples (step ${result.crossed.steps}, round ${result.crossed.rounds})` : `not ${(plan.threshold * 100).toFixed(0)} %`}; the default run ends at ${result.defaultRun ? `${(result.defaultRun.accuracy * 100).toFixed(2)} %` : '–'}; ${result.cpuSeconds.toFixed(0)} CPU s`);
        for (const l of this.listeners) l(result);
      } else {
        this.exitedCpuSeconds += cpu;
        this.settled.add(plan.id);
        this.errors.push({ what: `accuracy ${plan.id}`, message: `${why ?? 'exited without a result'}\n${tail(entry.stderr, 8)}` });
        progress(`accuracy ${plan.id}: failed (${why ?? 'no result'})`);
      }
      this.fill();
    };
    child.once('exit', (code, signal) => finish(code === 0 ? null : `exit ${code ?? signal}`));
    child.once('error', (err) => finish(`cannot start (chrt, util-linux): ${err.message}`));
  }

  /** CPU seconds the runs have used so far, finished and running (from /proc, the runners' own process). */
  cpuSeconds(): number {
    let sum = this.exitedCpuSeconds;
    for (const { child } of this.running.values()) sum += procCpuSeconds(child.pid);
    return sum;
  }

  /** Kills what still runs (the run is over or failed). */
  stop(): void {
    this.unregister();
    for (const p of this.queue) {
      this.settled.add(p.id);
      this.errors.push({ what: `accuracy ${p.id}`, message: 'not run: the lab stopped first' });
    }
    this.queue.length = 0;
    for (const { child } of this.running.values()) {
      child.kill('SIGCONT');
      child.kill('SIGKILL');
    }
  }
}

const CLOCK_TICKS = 100;
/** utime + stime of a process, in seconds; 0 when it is gone. */
function procCpuSeconds(pid: number | undefined): number {
  if (pid === undefined) return 0;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
  } catch {
    return 0;
  }
}

/** The machine's busy share in a sample, without what the idle-priority accuracy runs used meanwhile. */
export function busyWithout(cpu: CpuSample, poolCpuSeconds: number, windowMs: number): number {
  return Math.max(0, cpu.mean - poolCpuSeconds / Math.max(1e-9, (windowMs / 1000) * cpu.cores));
}
