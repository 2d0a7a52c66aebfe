/**
 * How long a run will take, before Start: the teacher's plan for the lesson. From what the
 * room knows of the class (docs/http-api.md#the-network-check):
 * - each device's admission probe (ms per example of the task's default model, timed before
 *   it joined): a step computes the global batch at the class's combined speed, or at the
 *   slowest device's with shares not balanced;
 * - the network check, when the teacher ran one: the slowest device's bandwidth and round
 *   trip to the server for the hub and the relay, and the slowest link between two devices,
 *   as its own probe measured it, for the ring and halving-doubling (the server's figures
 *   stand in for a link that was not measured);
 * - the chosen task, model, dataset, epochs and batch: the steps, and what a gradient weighs
 *   (the model's parameter count, in the wire's format).
 * A model other than the probed one is timed by the network check, which times the form's
 * model on every device; until then it has no estimate. Pure; no DOM.
 */
import { datasetFacts, findTask } from '../../shared/tasks/registry';
import type { DeviceProbe, RoomStatus, StartConfig } from '../../shared/protocol';

/**
 * Each step's work besides the maths and the all-reduce (the optimizer's update, the
 * weights hash, the votes, the status), on top of the probe: calibrated against three tabs
 * of WebGPU through SwiftShader (test/e2e/network-check.spec.ts).
 */
export const STEP_OVERHEAD_MS = 25;
/** Without a network check: a class Wi-Fi's share for one device, and its round trip. */
export const ASSUMED_MBPS = 5;
export const ASSUMED_RTT_MS = 5;
/** A forward pass alone costs about this share of the probe's forward, backward and read-back. */
const FORWARD_SHARE = 1 / 3;

export type Path = 'hub' | 'ring' | 'halving-doubling' | 'relay';

export interface RunEstimate {
  totalMs: number;
  steps: number;
  stepMs: number;
  computeMs: number;
  exchangeMs: number;
  path: Path;
  /** Where the network figures came from. */
  network: 'measured' | 'assumed';
}

/** The estimate, or why there is none. */
export type EstimateResult = { ok: true; estimate: RunEstimate } | { ok: false; why: string };

export function estimateRun(s: RoomStatus, config: StartConfig): EstimateResult {
  const devices = [...s.members, ...s.waiting];
  if (devices.length === 0) return { ok: false, why: 'no students yet' };
  if (config.data !== 'dataset') return { ok: false, why: 'a run on the class’s own examples: their number is known once it starts' };
  // Each device's speed at the chosen model: its admission probe (the task's default model),
  // or what the network check timed when the teacher's form named another.
  const timedInCheck = new Map((s.network?.reports ?? []).flatMap((r) => (r.probe ? [[r.member, r.probe] as const] : [])));
  const chosen = (p: DeviceProbe | null | undefined) => !!p && p.task === config.task && p.model === config.model;
  const probes = devices.map((d) => (chosen(d.probe) ? d.probe : (timedInCheck.get(d.id) ?? d.probe)));
  if (probes.some((p) => p === null || p === undefined)) return { ok: false, why: 'a device has not timed itself yet' };
  const untimed = probes.find((p) => !chosen(p));
  if (untimed) {
    return { ok: false, why: `the devices timed ${untimed.task}/${untimed.model}; Check the network to time ${config.task}/${config.model} on them` };
  }
  const facts = datasetFacts(config.dataset);
  const parameters = findTask(config.task)?.models.find((m) => m.id === config.model)?.parameters;
  if (!facts || parameters === undefined) return { ok: false, why: `no figures for ${config.dataset}` };

  const n = devices.length;
  const msPerExample = probes.map((p) => p!.msPerExample);
  const globalBatch = config.batchSizePerWorker * n;
  const epochSteps = Math.ceil(facts.trainCount / globalBatch);
  const steps = Math.min(config.maxSteps ?? Number.POSITIVE_INFINITY, config.epochs * epochSteps);
  const computeMs = config.balanceShares ? globalBatch / msPerExample.reduce((sum, p) => sum + 1 / p, 0) : config.batchSizePerWorker * Math.max(...msPerExample);

  const reports = s.network?.reports ?? [];
  const measured = reports.length > 0;
  const mbps = measured ? Math.min(...reports.map((r) => Math.min(r.upMBps, r.downMBps))) : ASSUMED_MBPS;
  const rttMs = measured ? Math.max(...reports.map((r) => r.serverRttMs)) : ASSUMED_RTT_MS;
  const allRelayed = measured && reports.every((r) => r.links.length > 0 && r.links.every((l) => l.path === 'relay'));
  // The ring and halving-doubling cross the links between devices: their own probes say what
  // those carry, where the check measured them (the hub's and the relay's go through this laptop).
  const pairs = reports.flatMap((r) => r.links).filter((l) => l.peer !== s.hub?.id && l.MBps != null && l.rttMs != null);
  const pairBytesPerMs = (pairs.length > 0 ? Math.min(...pairs.map((l) => l.MBps!)) : mbps) * 1000;
  const pairRttMs = pairs.length > 0 ? Math.max(...pairs.map((l) => l.rttMs!)) : rttMs;
  const localSteps = config.sync === 'local-steps' ? config.localSteps : 1;
  const bytesPerParameter = !config.secureAggregation && config.wire === 'fp16' ? 2 : 4;
  const gradientBytes = parameters * bytesPerParameter;
  const bytesPerMs = mbps * 1000;
  // The hub runs on this laptop: its one network link carries every device's gradient in and the sum out.
  const hub = (2 * n * gradientBytes) / bytesPerMs + 2 * rttMs;
  const ring = n === 1 ? 0 : (2 * (n - 1) * gradientBytes) / n / pairBytesPerMs + 2 * (n - 1) * pairRttMs;
  const halvingDoubling = n === 1 ? 0 : (2 * (n - 1) * gradientBytes) / n / pairBytesPerMs + 2 * Math.ceil(Math.log2(n)) * pairRttMs;
  const path = pathOf(config, s.hub !== null, allRelayed, { ring, halvingDoubling });
  const exchangeMs = n === 1 ? 0 : { hub, relay: hub, ring, 'halving-doubling': halvingDoubling }[path] / localSteps;

  const stepMs = computeMs + exchangeMs + STEP_OVERHEAD_MS;
  const evaluationMs = (facts.testCount / n) * Math.max(...msPerExample) * FORWARD_SHARE;
  const epochs = Math.ceil(steps / epochSteps);
  return { ok: true, estimate: { totalMs: steps * stepMs + epochs * evaluationMs, steps, stepMs, computeMs, exchangeMs, path, network: measured ? 'measured' : 'assumed' } };
}

/**
 * Which way the gradients go: the one asked for; else, with `auto`, the hub when it runs (on
 * one shared Wi-Fi, where every frame crosses the air twice, it wins: collectives.md), and
 * otherwise the cheaper of the ring and halving-doubling by these costs.
 */
function pathOf(config: StartConfig, hasHub: boolean, allRelayed: boolean, cost: { ring: number; halvingDoubling: number }): Path {
  if (allRelayed) return 'relay';
  if (config.allreduce === 'ring') return 'ring';
  if (config.allreduce === 'halving-doubling') return 'halving-doubling';
  if (hasHub) return 'hub';
  return cost.ring <= cost.halvingDoubling ? 'ring' : 'halving-doubling';
}
