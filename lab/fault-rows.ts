/**
 * The faults a class has, in the lab, on the product's defaults: a class of laptops (each
 * with its own CPU cap and its own port on the network model) trains a lab workload (the
 * dense model, shared/tasks/lab-workloads.ts), and then
 *   - a hiccup: two devices' ports go down for HICCUP_MS (`ip link set down` on their port
 *     of the access point's bridge, then up: a Wi-Fi drop-out of two seconds);
 *   - a freeze: two devices' processes stop for FREEZE_MS (SIGSTOP: a locked phone), then
 *     go on (SIGCONT) and must come back by themselves;
 *   - a cut: one device's port goes down for good.
 * Each row says who was dropped, the class's longest time without a step, how long after
 * the fault ended the class was whole and in lock-step again, and whether the hashes agreed.
 */
import type { RoomStatus } from '../shared/protocol';
import type { Lab } from './netlab';
import { NET_NS } from './network-models';
import { runCommand } from './run-command';
import { startLabServer, startLabWorker, waitForRoom, type LabServer } from './lab-server';
import { BASE_CONFIG, netConfig, type TrainingNet } from './training-rows';
import { tail, type LabProcess } from './spawn';
import { progress } from './progress';

export const HICCUP_MS = 2_000;
export const FREEZE_MS = 15_000;
/** Steps the class takes before the first fault, and after each before the next. */
const SETTLE_STEPS = 5;
const START_TIMEOUT_MS = 240_000;
/** A class that is not whole and in lock-step this long after a fault ended is reported as not back. */
const BACK_TIMEOUT_MS = 120_000;
/** After a cut: watched this long (past the 5 s liveness) before the row is written. */
const CUT_WATCH_MS = 15_000;
const POLL_MS = 200;

export interface FaultRow {
  fault: string;
  devices: string[];
  dropped: string[];
  /** The class's longest time without a step while the fault lasted and until it was whole again. */
  pauseMs: number;
  /** From the fault's end to the class whole and in lock-step; null when it was not within BACK_TIMEOUT_MS (and for a cut). */
  backInLockStepMs: number | null;
  hashesAgree: boolean;
  /** The first faulted device's log after the fault ended, each line with its ms since then: where its way back went (the lab records it). */
  timeline?: string[];
}

/** Lines of `p`'s output from now on, each stamped with its ms since now. */
function timeline(p: LabProcess): () => string[] {
  const t0 = Date.now();
  const lines: string[] = [];
  const take = (d: Buffer) => {
    for (const line of d.toString().split('\n').filter(Boolean)) lines.push(`${Date.now() - t0} ${line.replace(/^webring worker: /, '')}`);
  };
  p.child.stdout?.on('data', take);
  p.child.stderr?.on('data', take);
  return () => {
    p.child.stdout?.off('data', take);
    p.child.stderr?.off('data', take);
    return lines;
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Every ring member at one step with one hash, `size` of them. */
export function inLockStep(r: RoomStatus, size: number): boolean {
  const first = r.members[0];
  return r.members.length === size && r.waiting.length === 0 && !!first?.weightsHash && r.members.every((m) => m.step === first.step && m.weightsHash === first.weightsHash);
}

/** Names of the members that left or were dropped after `since` (server time). */
function goneSince(r: RoomStatus, since: number): string[] {
  return [...new Set(r.events.filter((e) => (e.kind === 'left' || e.kind === 'dropped') && e.at > since).flatMap((e) => e.members))];
}

/** Polls the room until `done` (or `ms` passes), keeping the longest time the class's step stood still. */
async function watch(server: LabServer, ms: number, done: (r: RoomStatus) => boolean = () => false): Promise<{ room: RoomStatus; longestStallMs: number; doneAt: number | null }> {
  const t0 = Date.now();
  let room = await server.roomStatus();
  let lastStep = room.step;
  let lastStepAt = t0;
  let longest = 0;
  while (Date.now() - t0 < ms) {
    await sleep(POLL_MS);
    room = await server.roomStatus();
    if (room.step > lastStep) {
      longest = Math.max(longest, Date.now() - lastStepAt);
      lastStep = room.step;
      lastStepAt = Date.now();
    }
    if (done(room)) return { room, longestStallMs: Math.max(longest, Date.now() - lastStepAt), doneAt: Date.now() };
  }
  return { room, longestStallMs: Math.max(longest, Date.now() - lastStepAt), doneAt: null };
}

const portOf = (lab: Lab, i: number) => lab.workers[i]!.portLink;
const setPort = (lab: Lab, i: number, state: 'up' | 'down'): void => {
  runCommand(['ip', '-n', NET_NS, 'link', 'set', portOf(lab, i), state]);
};
/** The worker's whole process group (`ip netns exec` runs it detached). */
const signal = (p: LabProcess, sig: NodeJS.Signals) => process.kill(-p.child.pid!, sig);

/** The three faults on a class of `lab.n` laptops on `lab`'s network model, training `net`. */
export async function faultRows(lab: Lab, net: TrainingNet): Promise<FaultRow[]> {
  const n = lab.n;
  const label = `${lab.profile.name}, faults at N = ${n}`;
  progress(`${label}: starting the server and ${n} workers`);
  const server = await startLabServer(lab, `faults-${lab.profile.name}-${n}`);
  const workers: LabProcess[] = [];
  const explain = () => workers.map((w, i) => `--- w${i}\n${tail(w.lines, 6)}`).join('\n');
  const rows: FaultRow[] = [];
  try {
    for (let i = 0; i < n; i++) workers.push(startLabWorker(lab, i, server, 'laptop'));
    await waitForRoom(server, (r) => r.members.length === n, `${n} workers joined`, START_TIMEOUT_MS);
    await server.start({ ...BASE_CONFIG, ...netConfig(net) });
    const settled = async (what: string, size: number) => {
      const from = (await server.roomStatus()).step;
      await waitForRoom(server, (r) => r.step >= from + SETTLE_STEPS && inLockStep(r, size), `${label}: ${what}`, START_TIMEOUT_MS);
    };
    await settled('the class training', n);
    // Never the chief (rank 0, lab-w0): its leaving is a hand-over, measured by the join rows' leaves.
    const fault = async (kind: string, devices: number[], hold: () => Promise<void>, release: (() => void) | null): Promise<FaultRow> => {
      const before = await server.roomStatus();
      const since = before.events.at(-1)?.at ?? 0;
      progress(`${label}: ${kind} on ${devices.map((i) => `lab-w${i}`).join(', ')}`);
      // One watch from before the fault until the class is whole again (or, after a cut, a while): its stall includes the fault's.
      let endedAt: number | null = null;
      const watching = watch(server, FREEZE_MS + BACK_TIMEOUT_MS + CUT_WATCH_MS, (r) => endedAt !== null && (release ? inLockStep(r, n) : Date.now() - endedAt > CUT_WATCH_MS));
      await hold();
      const log = timeline(workers[devices[0]!]!);
      release?.();
      endedAt = Date.now();
      const back = await watching;
      const room = back.room;
      const row: FaultRow = {
        fault: kind,
        devices: devices.map((i) => `lab-w${i}`),
        dropped: goneSince(room, since),
        pauseMs: back.longestStallMs,
        backInLockStepMs: release && back.doneAt !== null ? back.doneAt - endedAt : null,
        hashesAgree: new Set(room.members.map((m) => m.weightsHash)).size === 1,
        timeline: log().slice(0, 40),
      };
      progress(`${label}: ${kind}: dropped [${row.dropped.join(', ')}], longest pause ${row.pauseMs} ms, back in lock-step ${row.backInLockStepMs ?? '–'} ms after, hashes agree: ${row.hashesAgree}`);
      return row;
    };
    const hiccup = [1, 2].filter((i) => i < n);
    rows.push(
      await fault(`link down ${HICCUP_MS / 1000} s`, hiccup, async () => {
        for (const i of hiccup) setPort(lab, i, 'down');
        await sleep(HICCUP_MS);
        for (const i of hiccup) setPort(lab, i, 'up');
      }, () => {}),
    );
    await settled('the class after the hiccup', n);
    const frozen = [3, 4].filter((i) => i < n);
    rows.push(
      await fault(`SIGSTOP ${FREEZE_MS / 1000} s`, frozen, async () => {
        for (const i of frozen) signal(workers[i]!, 'SIGSTOP');
        await sleep(FREEZE_MS);
      }, () => {
        for (const i of frozen) signal(workers[i]!, 'SIGCONT');
      }),
    );
    await settled('the class after the freeze', n);
    const cut = n - 1;
    rows.push(await fault('link cut for good', [cut], async () => setPort(lab, cut, 'down'), null));
    return rows;
  } catch (err) {
    throw new Error(`${(err as Error).message}\n${explain()}`);
  } finally {
    for (const w of workers) if (w.child.exitCode === null && w.child.signalCode === null) signal(w, 'SIGCONT');
    await Promise.all(workers.map((w) => w.kill()));
    await server.stop();
  }
}
