/**
 * Measures a built model with TCP flows before anything is benchmarked on it, and sets
 * each figure against what the profile allows. A lab whose links do not do what the report
 * will say they do would make every row after it wrong, so a figure more than
 * MODEL_TOLERANCE off fails the model.
 */
import { LabError } from './lab-error';
import { measureFlows, type Flow } from './flows';
import type { Lab } from './netlab';
import type { Endpoint, ModelProfile } from './network-models';
import { progress } from './progress';

/** How far (as a fraction) a measured figure may be from the profile's. */
export const MODEL_TOLERANCE = 0.15;
/**
 * tbf counts Ethernet frames; a flow delivers TCP payload: 1448 bytes (1500 MTU less IP,
 * TCP and timestamp headers) per 1514-byte frame. So a 100 Mbit/s link carries 95.6 Mbit/s
 * of goodput, and that is what the expected figures below say.
 */
export const TCP_GOODPUT_PER_FRAME = 1448 / 1514;
export const DEFAULT_FLOW_SECONDS = 2;
/**
 * Slow links are counted twice as long. Data reaches the receiver in lumps (a repaired
 * loss releases everything queued behind it, up to the 128 KiB queue), and at 5 Mbit/s one
 * lump is a tenth of a 2 s count: single 2 s counts of four simultaneous 5 Mbit/s uploads
 * ranged from 3.3 to 5.3 Mbit/s.
 */
const SLOW_LINK_MBIT = 20;
const SLOW_LINK_WINDOW_FACTOR = 2;

export interface ModelValidation {
  name: ModelProfile['name'];
  params: ModelProfile['params'];
  /** Whether netem existed, and the one-way delay per shaped hop the model got (0 without netem). */
  netem: boolean;
  delayMs: number;
  /** Goodput in Mbit/s per check (and a ratio for wifi's air check), keyed alike. */
  measured: Record<string, number>;
  expected: Record<string, number>;
  ok: boolean;
  /** When the first measurement missed the profile and the model was measured again: what the first one said. */
  firstAttempt?: Record<string, number>;
  /** One line per check outside the tolerance. */
  failures: string[];
}

const flow = (from: Endpoint, to: Endpoint): Flow => ({ label: `${from.id}->${to.id}`, from, to });
const goodput = (mbit: number): number => mbit * TCP_GOODPUT_PER_FRAME;
const sum = (xs: number[]): number => xs.reduce((a, b) => a + b, 0);
const round = (x: number): number => Math.round(x * 100) / 100;

/** Every worker sends to the next one around the ring, all at once. */
const ringFlows = (lab: Lab): Flow[] => lab.workers.map((w, i) => flow(w, lab.workers[(i + 1) % lab.n]!));

function slowestLinkMbit(profile: ModelProfile): number {
  switch (profile.name) {
    case 'wifi':
      return profile.params.airMbit / 2;
    case 'wired-lab':
      return profile.params.portMbit;
    case 'internet':
      return Math.min(profile.params.upMbit, profile.params.downMbit);
  }
}

/** Measures `lab` and judges it; throws only when a flow cannot run at all. */
export async function validateModel(lab: Lab, seconds = DEFAULT_FLOW_SECONDS): Promise<ModelValidation> {
  if (lab.n < 2) throw new LabError('ERR_LAB_USAGE', 'validating a model takes at least 2 workers');
  const measured: Record<string, number> = {};
  const expected: Record<string, number> = {};
  const check = (key: string, value: number, want: number) => {
    measured[key] = round(value);
    expected[key] = round(want);
  };
  const window = slowestLinkMbit(lab.profile) <= SLOW_LINK_MBIT ? seconds * SLOW_LINK_WINDOW_FACTOR : seconds;
  const run = async (what: string, flows: Flow[]) => {
    progress(`${lab.profile.name}: ${what} (${flows.map((f) => f.label).join(', ')}, ${window} s)`);
    return (await measureFlows(flows, window)).map((r) => r.mbit);
  };
  const [w0, w1] = lab.workers as [Endpoint, Endpoint];
  const srv = lab.server;
  const profile = lab.profile;
  switch (profile.name) {
    case 'wired-lab': {
      const port = goodput(profile.params.portMbit);
      check('single', (await run('one flow', [flow(w0, w1)]))[0]!, port);
      const all = await run('every worker to its neighbour at once', ringFlows(lab));
      // Full-duplex ports are independent: every flow gets a whole port.
      check('allMin', Math.min(...all), port);
      check('allMax', Math.max(...all), port);
      break;
    }
    case 'wifi': {
      const p = profile.params;
      const air = goodput(p.airMbit);
      // Client to client crosses the air twice (up to the AP, down again).
      const c2c = (await run('client to client', [flow(w0, w1)]))[0]!;
      check('clientToClient', c2c, air / 2);
      const serverLink = p.serverOnAir ? air / 2 : p.serverMbit === null ? air : Math.min(air, goodput(p.serverMbit));
      const c2s = (await run('client to server', [flow(w0, srv)]))[0]!;
      check('clientToServer', c2s, serverLink);
      check('clientToClientOverClientToServer', c2c / c2s, (air / 2) / serverLink);
      const all = await run('every client to its neighbour at once', ringFlows(lab));
      // One FIFO at the AP shares nothing fairly (no fq/sfq in this kernel): only the total is the model's.
      check('allTotal', sum(all), air / 2);
      if (lab.n >= 3 && !p.serverOnAir) {
        const [cc, cs] = await run('client to client against client to server', [flow(w0, w1), flow(lab.workers[2]!, srv)]);
        // Together they fill the air: the client-to-client bytes twice, the client-to-server ones once.
        check('mixedAirtime', 2 * cc! + cs!, air);
      }
      break;
    }
    case 'internet': {
      const p = profile.params;
      check('up', (await run('a site uploads to the server', [flow(w0, srv)]))[0]!, goodput(Math.min(p.upMbit, p.serverMbit)));
      check('down', (await run('the server sends to a site', [flow(srv, w0)]))[0]!, goodput(Math.min(p.downMbit, p.serverMbit)));
      // Each site has its own uplink: all of them at once each still get theirs, while the server's link has room.
      const all = await run('every site uploads at once', lab.workers.map((w) => flow(w, srv)));
      const each = goodput(Math.min(p.upMbit, p.serverMbit / lab.n));
      check('allUpMin', Math.min(...all), each);
      check('allUpMax', Math.max(...all), each);
      break;
    }
  }
  const failures = Object.keys(expected)
    .filter((k) => Math.abs(measured[k]! - expected[k]!) > MODEL_TOLERANCE * expected[k]!)
    .map((k) => `${k}: measured ${measured[k]}, expected ${expected[k]} ±${MODEL_TOLERANCE * 100}%`);
  return { name: profile.name, params: profile.params, netem: lab.netem, delayMs: lab.delayMs, measured, expected, ok: failures.length === 0, failures };
}

/** Throws ERR_LAB_MODEL_INVALID naming the failed checks. */
export function assertModelValid(v: ModelValidation): void {
  if (!v.ok) throw new LabError('ERR_LAB_MODEL_INVALID', `the ${v.name} model does not do what its profile says: ${v.failures.join('; ')}`);
}
