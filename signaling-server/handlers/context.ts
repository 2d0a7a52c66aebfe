/**
 * What every handler receives: the rooms' context (rooms/room-context.ts), and what only
 * joining, leaving and renewing ICE credentials need.
 */
import type { RoomContext } from '../rooms/room-context';
import type { IceOptions } from '../edge/turn';
import type { RelayLedger } from '../rooms/relay-ledger';
import type { RelayBackpressure } from '../edge/relay-backpressure';
import type { NetworkChecks } from '../rooms/network-checks';

export interface ServerContext extends RoomContext {
  /** This signaling node's id when several share rooms over Redis; null on a single server. */
  node: string | null;
  /** Set while the server closes: with other nodes about, its connections' members are not leaving, they move. */
  draining: boolean;
  /** TURN and the ICE policy every worker gets (edge/turn.ts). */
  ice: IceOptions;
  /** Derives each room's hub key (edge/join-codes.ts), which a hub's join must carry. */
  joinSecret: Buffer;
  /** What members relayed through this server (link-relay.ts), for the teacher's page. */
  relay: RelayLedger;
  /** Holds relayed messages for a member whose connection is full (edge/relay-backpressure.ts). */
  relayFlow: RelayBackpressure;
  /** The teacher's network checks (rooms/network-checks.ts). */
  networkChecks: NetworkChecks;
}
