/**
 * A headless Node worker: joins a room like a browser tab, with the same shared/ code (the
 * TrainingWorker, the ring, the trainer), over @roamhq/wrtc's RTCPeerConnection. A lab machine
 * with a real GPU can join a class of browsers this way.
 *
 *   npm run worker -- --url http://HOST:PORT --room NAME --code K7M-Q2P [--name X] [--backend webgpu|cpu] [--device laptop|tablet|phone|node] [--data DIR [--data-task ID]] [--compute thread|main]
 *
 * --data DIR holds this worker's own examples for a run on the class's own data, of the task
 * --data-task names (default: the default task), laid out as that task reads them
 * (shared/tasks/own-folders.ts, docs/own-data.md). They never leave this machine; the
 * server learns the counts per class.
 *
 * --device says what the teacher's class summary calls this worker (default node): the lab
 * runs its capped workers as the devices they stand for.
 *
 * --compute says where tfjs runs: in a worker thread of its own (thread, the default), so
 * the worker answers the server's pings while a step computes, or in the worker's own
 * thread (main), as before the compute thread, for comparison in the benchmarks.
 *
 * --slow-until-step N is a fault for tests: until global step N, every step of this worker
 * takes --slow-ms more (default 2,500 ms), as a laptop busy for a while: past the ring's
 * deadline, so the chief drops it as a straggler, and it comes back by itself.
 *
 * --hold-compute-ms N is a fault for tests and the lab: every gradient computation holds
 * the compute thread N ms, busy, as a slow device's maths does.
 *
 * SIGUSR2 makes the worker leave the room (saying goodbye) and join again 5 s later, in the
 * same process: a student closing the tab and opening it again (the churn of bench:class).
 *
 * --peer-links off: the worker opens no WebRTC link, and every link of it goes through the
 * signaling server (the relay, shared/network/relay-link.ts), as behind a school network
 * that lets no peer connection through.
 *
 * --peer-links silent is a fault for tests and the lab: the worker sends its peers no
 * signal at all, so no link of it opens, even through the server. The class sheds it as
 * unreachable, and it tries again by itself.
 *
 * The join code may also come from JOIN_CODE, which keeps it out of the process list.
 */
import os from 'node:os';
import { statSync } from 'node:fs';
import { BACKENDS, DEVICE_CLASSES, openMember, type Backend, type ComputePlace, type DeviceClass, type WorkerStatus } from './library';
import { toWebringError } from '../shared/protocol/errors';

/** The longest --hold-compute-ms: a minute, past any straggler deadline a test needs. */
const MAX_HOLD_COMPUTE_MS = 60_000;
/** --slow-ms when only --slow-until-step is given: past the straggler detector's 1,000 ms floor. */
const DEFAULT_SLOW_MS = 2_500;
/** After SIGUSR2's leave, the worker joins again this much later. */
const REJOIN_AFTER_LEAVE_MS = 5_000;

import { countByLabel, type OwnExamples } from '../shared/data/own-examples';
import { ownFolderReader } from '../shared/tasks/own-folders';
import { DEFAULT_TASK, TASKS } from '../shared/tasks/registry';
import { EXIT_FAILURE, failUsage, parseMemberArgs, type CommandLine, type MemberArgs } from './args';
import type { FaultInjector } from '../shared/training/faults';

const COMPUTE_PLACES: readonly ComputePlace[] = ['thread', 'main'];

const COMMAND_LINE: CommandLine<'backend' | 'device' | 'data' | 'data-task' | 'compute' | 'hold-compute-ms' | 'peer-links' | 'slow-ms' | 'slow-until-step'> = {
  program: 'webring worker',
  usage: 'usage: npm run worker -- --url http://HOST:PORT --room NAME --code JOIN-CODE [--name X] [--backend webgpu|cpu] [--device laptop|tablet|phone|node] [--data DIR [--data-task ID]] [--compute thread|main]',
  flags: ['backend', 'device', 'data', 'data-task', 'compute', 'hold-compute-ms', 'peer-links', 'slow-ms', 'slow-until-step'],
  defaultName: `node-${os.hostname()}`.slice(0, 40),
  codeHint: ', from the teacher page or the server\'s start-up output',
};
const fail = (message: string) => failUsage(COMMAND_LINE, message);

interface WorkerArgs extends MemberArgs {
  backend: Backend | null;
  device: DeviceClass;
  data: string | null;
  /** The task whose examples --data holds. */
  dataTask: string;
  compute: ComputePlace;
  holdComputeMs: number;
  /** --slow-ms and --slow-until-step: extra ms in each step before that global step (0: none). */
  slow: { ms: number; untilStep: number };
  /** --peer-links: WebRTC then the relay (on), the relay only (off), or no link at all (silent, a fault). */
  peerLinks: PeerLinks;
}

const PEER_LINKS = ['on', 'off', 'silent'] as const;
type PeerLinks = (typeof PEER_LINKS)[number];

function parse(): WorkerArgs {
  const { member, flags } = parseMemberArgs(COMMAND_LINE);
  const backend = flags.backend ?? null;
  if (backend !== null && !(BACKENDS as readonly string[]).includes(backend)) fail(`--backend ${backend}: one of ${BACKENDS.join(', ')}`);
  const device = flags.device ?? 'node';
  if (!(DEVICE_CLASSES as readonly string[]).includes(device)) fail(`--device ${device}: one of ${DEVICE_CLASSES.join(', ')}`);
  if (flags.data !== undefined && !isDirectory(flags.data)) fail(`--data ${flags.data}: not a folder (docs/own-data.md says what each task reads from it)`);
  const dataTask = flags['data-task'] ?? DEFAULT_TASK.id;
  if (!ownFolderReader(dataTask)) fail(`--data-task ${dataTask}: one of ${TASKS.filter((t) => ownFolderReader(t.id)).map((t) => t.id).join(', ')}`);
  const compute = flags.compute ?? 'thread';
  if (!(COMPUTE_PLACES as readonly string[]).includes(compute)) fail(`--compute ${compute}: one of ${COMPUTE_PLACES.join(', ')}`);
  const holdComputeMs = Number(flags['hold-compute-ms'] ?? 0);
  if (!Number.isInteger(holdComputeMs) || holdComputeMs < 0 || holdComputeMs > MAX_HOLD_COMPUTE_MS) fail(`--hold-compute-ms ${flags['hold-compute-ms']}: whole milliseconds from 0 to ${MAX_HOLD_COMPUTE_MS}`);
  const peerLinks = flags['peer-links'] ?? 'on';
  if (!(PEER_LINKS as readonly string[]).includes(peerLinks)) fail(`--peer-links ${peerLinks}: one of ${PEER_LINKS.join(', ')}`);
  const slow = { ms: Number(flags['slow-ms'] ?? DEFAULT_SLOW_MS), untilStep: Number(flags['slow-until-step'] ?? 0) };
  if (!Number.isInteger(slow.ms) || slow.ms < 0 || slow.ms > MAX_HOLD_COMPUTE_MS) fail(`--slow-ms ${flags['slow-ms']}: whole milliseconds from 0 to ${MAX_HOLD_COMPUTE_MS}`);
  if (!Number.isInteger(slow.untilStep) || slow.untilStep < 0) fail(`--slow-until-step ${flags['slow-until-step']}: a step number`);
  return { ...member, backend: backend as Backend | null, device: device as DeviceClass, data: flags.data ?? null, dataTask, compute: compute as ComputePlace, holdComputeMs, peerLinks: peerLinks as PeerLinks, slow };
}

/** The faults the command line asked for, or undefined for none (production). */
function faultsOf(args: WorkerArgs): FaultInjector | undefined {
  const { holdComputeMs, peerLinks, slow } = args;
  if (holdComputeMs === 0 && peerLinks !== 'silent' && slow.untilStep === 0) return undefined;
  return {
    ...(holdComputeMs > 0 ? { busyComputeMs: holdComputeMs } : {}),
    ...(peerLinks === 'silent' ? { noPeerLinks: true } : {}),
    ...(slow.untilStep > 0 ? { slowComputeMs: (step: number) => (step < slow.untilStep ? slow.ms : 0) } : {}),
  };
}

function isDirectory(where: string): boolean {
  try {
    return statSync(where).isDirectory();
  } catch {
    return false;
  }
}

/** This worker's own examples of task `task`, read once at start; each unreadable file is named. */
function readOwnExamples(dir: string | null, task: string): OwnExamples | null {
  if (dir === null) return null;
  const { store, errors } = ownFolderReader(task)!(dir);
  for (const e of errors) console.error(`webring worker: --data ${e}`);
  const counts = Object.entries(countByLabel(store)).map(([label, n]) => `${label} ${n}`);
  console.log(`webring worker: own examples from ${dir}: ${store.examples.length} (${counts.join(', ') || 'none'})${errors.length ? `; ${errors.length} skipped` : ''}`);
  return store;
}

function describe(s: WorkerStatus): string {
  const rank = s.rank === null ? '-' : `${s.rank}/${s.worldSize}${s.chief ? ' chief' : ''}`;
  const loss = s.loss === null ? '-' : s.loss.toFixed(4);
  const accuracy = s.testAccuracy === null ? '' : ` test=${s.testAccuracy.toFixed(4)} test_loss=${s.testLoss?.toFixed(4) ?? '-'}`;
  return `state=${s.state} rank=${rank} step=${s.step} loss=${loss} hash=${s.weightsHash ?? '-'} step_ms=${s.computeMs.toFixed(1)} data_ms=${s.dataMs.toFixed(1)}${accuracy}`;
}

async function main(): Promise<void> {
  const args = parse();
  const base = args.url.origin;
  const own = readOwnExamples(args.data, args.dataTask);
  const log = (m: string) => console.log(`webring worker: ${m}`);
  // The library's member (node-worker/library.ts), as any developer's Node program opens it.
  const member = await openMember({
    url: base,
    backend: args.backend,
    compute: args.compute,
    device: args.device,
    // A run of another task trains none of them: they are examples of --data-task.
    ownExamples: (run) => (run.task === args.dataTask ? own : null),
    ...(args.peerLinks === 'off' ? { webrtc: false } : {}),
    ...(faultsOf(args) ? { faults: faultsOf(args) } : {}),
    log,
  });
  const choice = member.compute;
  console.log(`webring worker: backend ${choice.backend}${choice.adapter ? ` (${choice.adapter})` : ''} in ${args.compute === 'thread' ? 'a compute thread' : 'the main thread'}${choice.webgpuUnavailable ? `; WebGPU unavailable: ${choice.webgpuUnavailable}` : ''}`);
  let last = '';
  member.on('status', (s) => {
    // One line per change of state, rank or step: a readable log, not a flood.
    const line = describe(s);
    if (line !== last) console.log(`webring worker: ${line}`);
    last = line;
  });
  const entry = { room: args.room, name: args.name, code: args.code };
  // Leaving says goodbye, so the ring re-forms at once.
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(signal, () => {
      member.leaveRoom();
      setTimeout(() => process.exit(0), 200).unref();
    });
  }
  // SIGUSR2 plays a student who closes the tab and opens it again: it says goodbye and joins
  // afresh REJOIN_AFTER_LEAVE_MS later, in the same process (the lab's and bench's churn).
  process.on('SIGUSR2', () => {
    log(`SIGUSR2: leaving, and joining again in ${REJOIN_AFTER_LEAVE_MS} ms`);
    member.leaveRoom();
    setTimeout(() => {
      member.join(entry).then(
        (again) => log(`joined ${again.room} again as ${args.name} (index ${again.index})`),
        (err: unknown) => log(`joining again failed: ${toWebringError(err).message}`),
      );
    }, REJOIN_AFTER_LEAVE_MS);
  });
  if (own) member.reportOwnExamples(countByLabel(own));
  const joined = await member.join(entry);
  console.log(`webring worker: joined ${joined.room} as ${args.name} (index ${joined.index})`);
}

main().catch((err: unknown) => {
  const e = toWebringError(err);
  console.error(`webring worker: ${e.code}: ${e.message}`);
  process.exit(EXIT_FAILURE);
});
