/**
 * This device's part of the teacher's network check (room:network-check, docs/http-api.md):
 * its round trip to the server (the median of RTT_SAMPLES requests), its bandwidth from and
 * to the server (NETWORK_PROBE_BYTES each way, once), and how each of its links carries
 * messages now (direct, through the server's relay, or shut), with each open link's round
 * trip and bandwidth measured over the link itself (network/link-probe.ts); and, when the
 * teacher's form names a model the admission probe did not time, that model's speed here.
 * The answer goes back as
 * worker:network; the teacher page turns the class's answers into plain words and an
 * estimate of the run (client/teacher/network-check.ts).
 */
import { MAX_REPORTED_MBPS, NETWORK_PROBE_BYTES, type DeviceClass, type DeviceProbe, type NetworkReport } from '../protocol';
import type { Compute, ProbeWorkload } from '../compute/compute';
import { toWebringError } from '../protocol/errors';
import type { Clock } from '../util/clock';
import type { SignalingSession } from './signaling-session';

/** Requests to the server whose median is the round trip. */
export const RTT_SAMPLES = 5;

export interface NetworkCheckOptions {
  session: SignalingSession;
  serverUrl: string;
  /** How each link of the applied generation carries messages, and what an open one measured (RingNetwork.probeLinks). */
  links(): Promise<NetworkReport['links']>;
  /**
   * Times `workload`'s model on this device (Compute.probe), for a check that names one; null
   * when the admission probe already timed it, or when timing failed (logged).
   */
  timeModel(workload: ProbeWorkload): Promise<DeviceProbe | null>;
  clock: Clock;
  log(message: string): void;
}

export class NetworkCheck {
  private running = false;

  constructor(private readonly options: NetworkCheckOptions) {
    options.session.socket.on('room:network-check', ({ check, workload }) => void this.run(check, workload));
  }

  private async run(check: number, workload: ProbeWorkload | undefined): Promise<void> {
    const id = this.options.session.identity;
    if (!id || this.running || !Number.isInteger(check)) return;
    this.running = true;
    const { serverUrl, clock, log } = this.options;
    try {
      const rtts: number[] = [];
      for (let i = 0; i < RTT_SAMPLES; i++) {
        const t0 = clock.now();
        await expectOk(await fetch(`${serverUrl}/healthz`, { cache: 'no-store' }));
        rtts.push(clock.now() - t0);
      }
      const probe = `${serverUrl}/api/rooms/${encodeURIComponent(id.room)}/network-probe?check=${check}`;
      const auth = { authorization: `Bearer ${id.memberToken}` };
      const t1 = clock.now();
      const down = await expectOk(await fetch(probe, { headers: auth, cache: 'no-store' }));
      const received = (await down.arrayBuffer()).byteLength;
      const downMs = clock.now() - t1;
      const t2 = clock.now();
      await expectOk(await fetch(probe, { method: 'POST', headers: { ...auth, 'content-type': 'application/octet-stream' }, body: new Uint8Array(NETWORK_PROBE_BYTES) }));
      const upMs = clock.now() - t2;
      const links = await this.options.links();
      // After the network's figures, which the maths would disturb.
      const timed = workload ? await this.options.timeModel(workload) : null;
      const report: NetworkReport = {
        check,
        serverRttMs: median(rtts),
        downMBps: mbps(received, downMs),
        upMBps: mbps(NETWORK_PROBE_BYTES, upMs),
        links,
        ...(timed ? { probe: timed } : {}),
      };
      const link = (l: NetworkReport['links'][number]) => `${l.path}${l.rttMs == null ? '' : ` ${l.rttMs.toFixed(1)} ms`}${l.MBps == null ? '' : ` ${l.MBps.toFixed(1)} MB/s`}`;
      log(`network check ${check}: ${report.serverRttMs.toFixed(1)} ms to the server, ${report.downMBps.toFixed(1)} MB/s down, ${report.upMBps.toFixed(1)} MB/s up; links ${report.links.map(link).join(', ') || 'none'}`);
      this.options.session.report('worker:network', report);
    } catch (err) {
      log(`network check ${check} failed: ${toWebringError(err).message}`);
    } finally {
      this.running = false;
    }
  }
}

/** Times `workload`'s model unless the admission probe (`admitted`) already did: null then, or on a failure (logged). */
export async function timeModelOnce(compute: Compute, device: DeviceClass, admitted: Promise<DeviceProbe | null>, workload: ProbeWorkload, log: (message: string) => void): Promise<DeviceProbe | null> {
  const probe = await admitted;
  if (probe && probe.task === workload.task && probe.model === workload.model) return null;
  try {
    return await compute.probe(device, undefined, workload);
  } catch (err) {
    const e = toWebringError(err);
    log(`timing ${workload.task}/${workload.model} for the network check failed (${e.code}: ${e.message})`);
    return null;
  }
}

async function expectOk(res: Response): Promise<Response> {
  if (!res.ok) throw new Error(`HTTP ${res.status}: ${(await res.text()).slice(0, 200)}`);
  return res;
}

function median(xs: number[]): number {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[sorted.length >> 1]!;
}

/** MB/s (10^6 bytes) of `bytes` in `ms`, capped where the protocol caps it. */
const mbps = (bytes: number, ms: number): number => Math.min(MAX_REPORTED_MBPS, bytes / 1e6 / Math.max(ms / 1000, 1e-6));
