/**
 * The settings a lab section ran with, set against the product's defaults, so that a figure
 * measured with a raised setting says so and never counts as a target met (docs/lab.md,
 * "The report"). What is recorded:
 *
 *  - the regime: the plan (a `--quick` smoke test is not the measurement), the CFS period
 *    of the devices' CPU caps, where the workers computed (LAB_WORKER_COMPUTE);
 *  - every signaling server the section started: the liveness it ran with
 *    (PING_INTERVAL_MS, PING_TIMEOUT_MS, from the row's env or the harness's own), and the
 *    ICE policy;
 *  - every start config the section sent or trained in-process: each field that differs
 *    from its task's default, once its schema has filled in the rest.
 *
 * A section declares the fields its targets are about (secure aggregation's
 * `secureAggregation`, local steps' `sync`, …): their values are the experiment, named in
 * the target's goal. The run-length fields a harness must set (HARNESS_FIELDS) are never a
 * deviation. Everything else that differs is listed by `nonDefault`.
 */
import type { StartConfig } from '../shared/protocol';
import { startConfigSchema, defaultConfigOf } from '../shared/tasks/start-config';
import { DEFAULT_PING_INTERVAL_MS, DEFAULT_PING_TIMEOUT_MS } from '../signaling-server/server';
import { DEFAULT_CFS_PERIOD_US } from './cpu-caps';

/** A section's plan: the measurement, a smoke test of it, or some of its rows only. */
export type PlanKind = 'full' | 'quick' | 'partial';

/**
 * Fields that say how long a run lasts, where it starts and what it keeps, which every
 * harness must set (a window never waits for the default epochs to end): not the recipe.
 */
export const HARNESS_FIELDS: ReadonlySet<string> = new Set(['maxSteps', 'epochs', 'resumeFrom', 'maxToKeep', 'saveEverySteps']);

export interface RunSettings {
  plan: PlanKind;
  cfsPeriodUs: number;
  /** `thread` (the product's) or what LAB_WORKER_COMPUTE asked for. */
  workerCompute: string;
  /** Each distinct liveness the section's servers ran with, ms. */
  liveness: Array<{ pingIntervalMs: number; pingTimeoutMs: number }>;
  /** ICE_TRANSPORT_POLICY where a server had one. */
  icePolicies: string[];
  /** Start-config fields any run of the section set away from its task's default: field → the values seen. */
  config: Record<string, unknown[]>;
  /** The fields the section's targets are about: their values are the experiment. */
  declared: string[];
}

export const DEFAULT_SETTINGS = {
  plan: 'full',
  cfsPeriodUs: DEFAULT_CFS_PERIOD_US,
  workerCompute: 'thread',
  liveness: { pingIntervalMs: DEFAULT_PING_INTERVAL_MS, pingTimeoutMs: DEFAULT_PING_TIMEOUT_MS },
} as const;

/** What a section run has seen so far. */
export class SettingsRecorder {
  private readonly liveness = new Map<string, { pingIntervalMs: number; pingTimeoutMs: number }>();
  private readonly ice = new Set<string>();
  private readonly config = new Map<string, Map<string, unknown>>();

  /** A server starting with `env` (the harness's own environment merged with the row's). */
  noteServer(env: NodeJS.ProcessEnv): void {
    const ms = (name: string, fallback: number) => (env[name] === undefined || env[name] === '' ? fallback : Number(env[name]));
    const l = { pingIntervalMs: ms('PING_INTERVAL_MS', DEFAULT_PING_INTERVAL_MS), pingTimeoutMs: ms('PING_TIMEOUT_MS', DEFAULT_PING_TIMEOUT_MS) };
    this.liveness.set(`${l.pingIntervalMs}/${l.pingTimeoutMs}`, l);
    if (env.ICE_TRANSPORT_POLICY) this.ice.add(env.ICE_TRANSPORT_POLICY);
  }

  /** A run started with `config` (the fields sent; its task's defaults fill the rest, as the server does). */
  noteConfig(config: Partial<StartConfig> | Record<string, unknown>): void {
    for (const [field, value] of Object.entries(configDeviations(config))) {
      const seen = this.config.get(field) ?? new Map<string, unknown>();
      seen.set(JSON.stringify(value), value);
      this.config.set(field, seen);
    }
  }

  settings(plan: PlanKind, cfsPeriodUs: number, declared: readonly string[], workerCompute = process.env.LAB_WORKER_COMPUTE ?? 'thread'): RunSettings {
    return {
      plan,
      cfsPeriodUs,
      workerCompute,
      liveness: [...this.liveness.values()],
      icePolicies: [...this.ice],
      config: Object.fromEntries([...this.config].map(([field, values]) => [field, [...values.values()]])),
      declared: [...declared],
    };
  }
}

/** The fields of `config`, filled in by its task's schema, that differ from that task's defaults (run-length fields left out). */
export function configDeviations(config: Partial<StartConfig> | Record<string, unknown>): Record<string, unknown> {
  const result = startConfigSchema.safeParse(config);
  // The server refuses such a config with a coded error; here it is a deviation to show, not a crash.
  if (!result.success) return { invalidConfig: result.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ') };
  const parsed = result.data as unknown as Record<string, unknown>;
  const defaults = defaultConfigOf(String(parsed.task)) as unknown as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(parsed)) {
    if (HARNESS_FIELDS.has(field)) continue;
    if (JSON.stringify(value) !== JSON.stringify(defaults[field])) out[field] = value;
  }
  return out;
}

/**
 * Every way `s` differs from the defaults, in words ("PING_TIMEOUT_MS 60000 (default
 * 4000)"); empty when the section ran on the defaults. A declared field is the experiment,
 * not a deviation.
 */
export function nonDefault(s: RunSettings): string[] {
  const out: string[] = [];
  if (s.plan !== DEFAULT_SETTINGS.plan) out.push(`plan ${s.plan} (the measurement is the full plan)`);
  if (s.cfsPeriodUs !== DEFAULT_SETTINGS.cfsPeriodUs) out.push(`CFS period ${s.cfsPeriodUs} µs (default ${DEFAULT_SETTINGS.cfsPeriodUs})`);
  if (s.workerCompute !== DEFAULT_SETTINGS.workerCompute) out.push(`LAB_WORKER_COMPUTE ${s.workerCompute} (default: the compute thread)`);
  for (const l of s.liveness) {
    if (l.pingIntervalMs !== DEFAULT_SETTINGS.liveness.pingIntervalMs) out.push(`PING_INTERVAL_MS ${l.pingIntervalMs} (default ${DEFAULT_SETTINGS.liveness.pingIntervalMs})`);
    if (l.pingTimeoutMs !== DEFAULT_SETTINGS.liveness.pingTimeoutMs) out.push(`PING_TIMEOUT_MS ${l.pingTimeoutMs} (default ${DEFAULT_SETTINGS.liveness.pingTimeoutMs})`);
  }
  for (const p of s.icePolicies) out.push(`ICE_TRANSPORT_POLICY ${p} (default: all)`);
  for (const [field, values] of Object.entries(s.config)) {
    if (s.declared.includes(field)) continue;
    out.push(`${field} ${values.map((v) => JSON.stringify(v)).join(', ')} (not its task's default)`);
  }
  return out;
}

/** The recorder of the section now running: lab-server.ts and the in-process runs report to it. */
let current = new SettingsRecorder();

/** A fresh recorder for the next section. */
export function beginSettings(): SettingsRecorder {
  current = new SettingsRecorder();
  return current;
}

export const recorder = (): SettingsRecorder => current;
