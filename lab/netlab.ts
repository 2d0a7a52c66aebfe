/**
 * Builds a network model (lab/network-models.ts) on this machine, hands it to a row runner,
 * and removes everything again: on return, on a throw, on SIGINT/SIGTERM, and at the next
 * start after a crash (cleanupLab).
 */
import os from 'node:os';
import path from 'node:path';
import { LabError } from './lab-error';
import { RESERVED_CORES } from './cpu-budget';
import {
  CONTROL_HOST_LINK,
  CONTROL_SERVER_ADDRESS,
  LAB_PREFIX,
  appliedDelayMs,
  labCommands,
  serverEndpoint,
  workerEndpoint,
  type Command,
  type Endpoint,
  type ModelProfile,
} from './network-models';
import { runCommand, tryCommand } from './run-command';
import { DEVICE_CORES, checkCpuBudget, createCpuCap, labCgroups, removeLabCgroup, type CpuCap, type CpuCapSpec } from './cpu-caps';
import { killAllLabProcessesSync, spawnIn, type LabProcess, type SpawnInOptions } from './spawn';
import { checkPreconditions, type LabCapabilities } from './preconditions';
import { progress } from './progress';

export interface Lab {
  profile: ModelProfile;
  n: number;
  /** Whether netem exists here, and the one-way delay per shaped hop the model really got. */
  netem: boolean;
  delayMs: number;
  server: Endpoint;
  workers: Endpoint[];
  /** The commands that built it, in order. */
  commands: Command[];
  /** The server as the workers reach it: over the shaped network. */
  serverUrl(port: number): string;
  /** The server as the harness reaches it: over the unshaped control path. */
  controlUrl(port: number): string;
  /** A CPU cap removed with the lab. Throws ERR_LAB_CPU_OVERCOMMIT if the lab's caps would exceed the machine. */
  cpuCap(name: string, spec: CpuCapSpec): CpuCap;
  /**
   * The group capped processes start in before they take their own cap (SpawnInOptions
   * `startup`): the machine's cores less the share kept for the server, shared by whatever
   * is starting. Made on first use, removed with the lab.
   */
  startupCap(): CpuCap;
  spawnInWorker(i: number, command: string, args: string[], options?: SpawnInOptions): LabProcess;
  spawnInServer(command: string, args: string[], options?: SpawnInOptions): LabProcess;
}

let handlersInstalled = false;

/**
 * Removes every namespace, root-namespace link and cgroup named `webring-lab-…`, killing
 * what still runs in them. Synchronous, so exit and signal handlers can call it.
 * Returns what it removed.
 */
export function cleanupLab(): string[] {
  const removed: string[] = [];
  killAllLabProcessesSync();
  const namespaces = tryCommand(['ip', 'netns', 'list']).stdout.split('\n').map((l) => l.split(' ')[0] ?? '').filter((ns) => ns.startsWith(`${LAB_PREFIX}-`));
  for (const ns of namespaces) {
    // A process left inside would keep the namespace (and its links) alive unnamed.
    for (const pid of tryCommand(['ip', 'netns', 'pids', ns]).stdout.split('\n').filter(Boolean)) {
      try {
        process.kill(Number(pid), 'SIGKILL');
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
      }
    }
    runCommand(['ip', 'netns', 'del', ns]);
    removed.push(`netns ${ns}`);
  }
  const links = tryCommand(['ip', '-o', 'link', 'show']).stdout.split('\n').map((l) => /^\d+:\s+([^:@\s]+)/.exec(l)?.[1] ?? '').filter((name) => name.startsWith(LAB_PREFIX));
  for (const link of links) {
    // Deleting one veth end deletes its peer: the second may already be gone.
    const r = tryCommand(['ip', 'link', 'del', link]);
    if (r.status === 0) removed.push(`link ${link}`);
  }
  for (const dir of labCgroups()) {
    removeLabCgroup(dir);
    removed.push(`cgroup ${dir}`);
  }
  return removed;
}

/** Tears the lab down on SIGINT, SIGTERM, an uncaught error and exit. Idempotent. */
export function installTeardownHandlers(): void {
  if (handlersInstalled) return;
  handlersInstalled = true;
  process.on('exit', () => {
    cleanupLab();
  });
  for (const [signal, code] of [['SIGINT', 130], ['SIGTERM', 143]] as const) {
    process.once(signal, () => {
      progress(`${signal}: removing the lab`);
      cleanupLab();
      process.exit(code);
    });
  }
  process.once('uncaughtException', (err) => {
    process.stderr.write(`${err.stack ?? err.message}\n`);
    cleanupLab();
    process.exit(1);
  });
}

/**
 * Builds `profile` with `n` workers. Leftovers of an earlier run are removed first. Pass
 * `capabilities` from checkPreconditions() to skip probing again.
 */
export function buildLab(profile: ModelProfile, n: number, capabilities: LabCapabilities = checkPreconditions()): Lab {
  installTeardownHandlers();
  const leftovers = cleanupLab();
  if (leftovers.length > 0) progress(`removed leftovers of an earlier run: ${leftovers.join(', ')}`);
  const commands = labCommands(profile, n, capabilities.netem);
  progress(`building ${profile.name} with ${n} workers (${commands.length} ip/tc commands) ${JSON.stringify(profile.params)}`);
  try {
    for (const cmd of commands) runCommand(cmd);
  } catch (err) {
    cleanupLab();
    throw err;
  }
  const workers = Array.from({ length: n }, (_, i) => workerEndpoint(i));
  const server = serverEndpoint();
  const caps: CpuCapSpec[] = [];
  let startup: CpuCap | undefined;
  return {
    profile,
    n,
    netem: capabilities.netem,
    delayMs: appliedDelayMs(profile, capabilities.netem),
    server,
    workers,
    commands,
    serverUrl: (port) => `http://${server.address}:${port}`,
    controlUrl: (port) => `http://${CONTROL_SERVER_ADDRESS}:${port}`,
    cpuCap(name, spec) {
      checkCpuBudget([...caps, spec]);
      caps.push(spec);
      return createCpuCap(name, spec);
    },
    startupCap() {
      startup ??= createCpuCap('startup', { cores: Math.max(DEVICE_CORES.laptop, os.availableParallelism() - RESERVED_CORES) });
      return startup;
    },
    spawnInWorker(i, command, args, options) {
      const w = workers[i];
      if (!w) throw new LabError('ERR_LAB_USAGE', `no worker ${i} in a lab of ${n}`);
      return spawnIn(w.ns, command, args, { ...options, label: `${w.id} ${options?.label ?? path.basename(command)}` });
    },
    spawnInServer: (command, args, options) => spawnIn(server.ns, command, args, { ...options, label: `srv ${options?.label ?? path.basename(command)}` }),
  };
}

/** Removes the lab and everything it started. */
export function teardownLab(): void {
  const removed = cleanupLab();
  progress(`removed the lab (${removed.length} namespaces, links and cgroups)`);
  // The control link's root end goes with the server namespace; check that nothing stayed.
  if (tryCommand(['ip', 'link', 'show', CONTROL_HOST_LINK]).status === 0) throw new LabError('ERR_LAB_COMMAND_FAILED', `${CONTROL_HOST_LINK} survived the teardown`);
}

/** Builds the lab, runs `row` in it, and tears it down whatever happens. */
export async function withLab<T>(profile: ModelProfile, n: number, row: (lab: Lab) => Promise<T>, capabilities?: LabCapabilities): Promise<T> {
  const lab = buildLab(profile, n, capabilities);
  try {
    return await row(lab);
  } finally {
    teardownLab();
  }
}
