/**
 * Measures TCP throughput between lab endpoints with lab/flow-tool.ts: every flow of a
 * call runs at the same time and is counted over the same window, so simultaneous flows
 * really compete.
 */
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { LabError } from './lab-error';
import type { Endpoint } from './network-models';
import { spawnIn, tail, type LabProcess } from './spawn';

const FLOW_TOOL = path.join(path.dirname(fileURLToPath(import.meta.url)), 'flow-tool.ts');
const FIRST_FLOW_PORT = 5201;
/** tsx starting several processes at once on two cores takes seconds. */
const FLOW_START_TIMEOUT_MS = 20_000;
/**
 * From "go" to the start of the window: the go line reaching every process, the tbf
 * bucket's initial burst (not the rate), and slow start, which on a 5 Mbit/s link with a
 * 200 ms queue overshoots into a burst of losses that can take a second to recover (with
 * 400 ms here, one of four simultaneous uploads now and then counted 3.3 of 4.8 Mbit/s).
 */
const WARMUP_MS = 1_000;
/** Senders go on a little past the window, so its last moment is still a full link. */
const SEND_PAST_WINDOW_MS = 150;
const RESULT_TIMEOUT_MS = 5_000;

export interface Flow {
  /** Names the flow in results, e.g. 'w0->w1'. */
  label: string;
  from: Endpoint;
  to: Endpoint;
}

export interface FlowResult {
  label: string;
  mbit: number;
}

const startTool = (ns: string, label: string, args: string[]): LabProcess => spawnIn(ns, process.execPath, ['--import', 'tsx', FLOW_TOOL, ...args], { label });

/** Runs `flows` at once for `seconds` of counted time; the rate each got, in Mbit/s. */
export async function measureFlows(flows: Flow[], seconds: number): Promise<FlowResult[]> {
  const procs: LabProcess[] = [];
  try {
    const sinks = flows.map((f, k) => startTool(f.to.ns, `sink ${f.label}`, ['sink', '--port', String(FIRST_FLOW_PORT + k)]));
    procs.push(...sinks);
    await Promise.all(sinks.map((s) => s.waitForLine(/^ready$/, FLOW_START_TIMEOUT_MS)));
    const sources = flows.map((f, k) => startTool(f.from.ns, `source ${f.label}`, ['source', '--host', f.to.address, '--port', String(FIRST_FLOW_PORT + k)]));
    procs.push(...sources);
    await Promise.all(sources.map((s) => s.waitForLine(/^ready$/, FLOW_START_TIMEOUT_MS)));
    const from = Date.now() + WARMUP_MS;
    const to = from + seconds * 1000;
    for (const s of sinks) s.child.stdin!.write(`${JSON.stringify({ from, to })}\n`);
    for (const s of sources) s.child.stdin!.write(`${JSON.stringify({ until: to + SEND_PAST_WINDOW_MS })}\n`);
    const results = await Promise.all(sinks.map((s) => s.waitForLine(/^\{"bytes"/, to - Date.now() + RESULT_TIMEOUT_MS)));
    return results.map((line, k) => {
      const { bytes, seconds: counted } = JSON.parse(line) as { bytes: number; seconds: number };
      if (bytes === 0) throw new LabError('ERR_LAB_PROCESS', `flow ${flows[k]!.label} moved no bytes:\n${tail(sources[k]!.lines)}`);
      return { label: flows[k]!.label, mbit: (bytes * 8) / counted / 1e6 };
    });
  } finally {
    await Promise.all(procs.map((p) => p.kill()));
  }
}
