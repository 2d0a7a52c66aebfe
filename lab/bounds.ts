/**
 * What each network model allows an all-reduce, from its rates alone: the time below
 * which no algorithm can go on that network, so every measured figure can be set against
 * it. Pure; the unit test checks the cases the issue reasons with.
 *
 * With S the bytes as they travel (halves on the fp16 wire), N ranks, and f the bytes each
 * rank sends per byte of buffer (choice.ts linkBytesFactor: 2(N-1)/N for the ring):
 *   wifi, server wired:  peer-to-peer frames cross the air twice, so the ring and
 *                        halving-doubling need 2·N·f·S of air; the hub's uploads and
 *                        downloads cross it once: 2·N·S (4·N·S with the server on the air);
 *   wired-lab:           full-duplex ports: a rank's port carries f·S each way for the
 *                        ring; the hub's port carries N·S each way, a rank's S;
 *   internet:            a site's uplink and downlink carry f·S each for the ring; for the
 *                        hub a site sends S and receives S, and the server's link carries
 *                        N·S each way, all pipelined: the slowest of the three.
 * Rates are the raw link rates: framing (IP, UDP, DTLS, SCTP) is part of what a measured
 * figure pays against them.
 */
import { linkBytesFactor } from '../shared/collectives/choice';
import type { Algorithm } from '../shared/protocol';
import type { ModelProfile } from './network-models';

const bytesPerMs = (mbit: number): number => (mbit * 1e6) / 8 / 1e3;

/** The least time an all-reduce of `bytes` (as they travel) among `n` ranks takes on `profile`, in ms. */
export function boundMs(profile: ModelProfile, algorithm: Algorithm, n: number, bytes: number): number {
  if (n <= 1) return 0;
  const f = algorithm === 'hub' ? 1 : linkBytesFactor(algorithm, n);
  switch (profile.name) {
    case 'wifi': {
      const air = bytesPerMs(profile.params.airMbit);
      if (algorithm !== 'hub') return (2 * n * f * bytes) / air;
      const crossings = profile.params.serverOnAir ? 4 : 2;
      const serverLink = profile.params.serverOnAir || profile.params.serverMbit === null ? 0 : (n * bytes) / bytesPerMs(profile.params.serverMbit);
      return Math.max((crossings * n * bytes) / air, serverLink);
    }
    case 'wired-lab': {
      const port = bytesPerMs(profile.params.portMbit);
      if (algorithm !== 'hub') return (f * bytes) / port;
      const serverPort = profile.params.serverMbit === null ? Infinity : bytesPerMs(profile.params.serverMbit);
      return Math.max(bytes / port, (n * bytes) / serverPort);
    }
    case 'internet': {
      const up = bytesPerMs(profile.params.upMbit);
      const down = bytesPerMs(profile.params.downMbit);
      if (algorithm !== 'hub') return Math.max((f * bytes) / up, (f * bytes) / down);
      return Math.max(bytes / up, bytes / down, (n * bytes) / bytesPerMs(profile.params.serverMbit));
    }
  }
}

/** Bus bandwidth (nccl-tests' convention): what each rank's link would carry for the ring, 2(N-1)/N·S, per second of the all-reduce; in MB/s. */
export function busMBps(n: number, bytes: number, ms: number): number {
  return ((2 * (n - 1)) / n) * bytes / ms / 1e3;
}
