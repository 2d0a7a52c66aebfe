/** What the lab says to a bench peer process (lab/bench-peer-process.ts), and how it answers: JSON lines over stdin and stdout. */
import type { Algorithm, WireFormat } from '../shared/protocol';

/** A command without its id, as the lab's PeerSet sends it to every peer. */
export type BenchPeerRequest =
  | { cmd: 'join'; hub: boolean }
  | { cmd: 'allReduce'; bytes: number; reps: number; algorithm: Algorithm; wire: WireFormat }
  | { cmd: 'measure'; bytes: number; wire: WireFormat }
  | { cmd: 'close' };

export type BenchPeerCommand = BenchPeerRequest & { id: number };

/** The prefix of an answer line: everything else on stdout is the peer's log. */
export const RESULT_PREFIX = 'RESULT ';
