/**
 * What the room API and the teacher's page show of a room (RoomStatus): the ring, the
 * waiting members and the hub, the run and its metrics, the newest events, and the hub's
 * and the seats' settings.
 */
import type { RoomStatus } from '../../shared/protocol';
import { exampleBytes, trainingSetBytes } from '../../shared/data/data-service';
import { datasetFacts } from '../../shared/tasks/registry';
import { DEFAULT_SEATS_PER_LAN_ADDRESS } from './seats';
import type { RoomCore } from './room-core';
import { secureHold } from './secure-count';

/** The room API shows this many of the newest events. */
const ROOM_EVENTS_SHOWN = 50;

/** The room as the room API (GET /api/rooms/:room) and the teacher's page show it. */
export function roomStatus(core: RoomCore): RoomStatus {
  const run = core.runState.record;
  const ring = core.members.ring;
  return {
    room: core.name,
    state: run.state,
    run: run.run,
    generation: core.currentGeneration,
    step: run.step,
    round: run.round ?? run.step,
    ...bytesPerRound(core),
    epoch: run.epoch,
    clients: core.clients,
    chief: ring[0]?.id ?? null,
    members: ring.map((m, rank) => core.members.info(m, rank)),
    hub: core.hubInfo(),
    waiting: core.members.waiting.map((m) => core.members.info(m, null)),
    config: run.config,
    totalSteps: core.runState.totalSteps(ring.length),
    metrics: { loss: run.loss, accuracy: run.accuracy, trainAccuracy: run.trainAccuracy, testLoss: run.testLoss ?? null },
    lastError: run.lastError,
    dropped: [...run.dropped],
    consistency: { ...run.consistency },
    events: core.events.slice(-ROOM_EVENTS_SHOWN),
    // What was served is counted where it is served (edge/data-api.ts), which fills it in.
    data: { dataset: run.config?.dataset ?? null, ...datasetBytesOf(run.config?.dataset ?? null), bytesServed: 0, trainBytesServed: 0, refused: [] },
    // Likewise the relay, counted where it relays (handlers/link-relay.ts).
    relay: { members: [], refused: [] },
    network: null,
    joins: run.joins ?? [],
    collect: core.collectSetting,
    hubAccess: hubAccess(core),
    seats: { perAddress: core.members.seatsPerAddress, defaultPerLanAddress: DEFAULT_SEATS_PER_LAN_ADDRESS, vouched: core.members.sharedAddressVouched },
    secureHold: secureHold(core),
  };
}

/** The ring's bytes in its last turn's all-reduce, from each member's last report, and per example trained in it. */
function bytesPerRound(core: RoomCore): Pick<RoomStatus, 'bytesSentPerRound' | 'bytesSentPerExample'> {
  const ring = core.members.ring;
  const hub = core.members.hub;
  const senders = hub ? [...ring, hub] : ring;
  const total = senders.reduce((sum, m) => sum + m.bytesSent, 0);
  if (total === 0) return { bytesSentPerRound: null, bytesSentPerExample: null };
  const examples = core.runState.record.roundExamples ?? 0;
  return { bytesSentPerRound: total, bytesSentPerExample: examples > 0 ? total / examples : null };
}

function hubAccess(core: RoomCore): RoomStatus['hubAccess'] {
  const { accusers, needed } = core.hubRole.accusationsOf(core.members.ring, core.members.hub);
  return { barred: core.hubRole.barred(), accusers, accusersNeeded: needed };
}

/** The training set's size on the wire and one example's, for the teacher's "bytes served per epoch"; 0 before a run. */
function datasetBytesOf(dataset: string | null): { datasetBytes: number; exampleBytes: number } {
  const facts = dataset ? datasetFacts(dataset) : null;
  return facts ? { datasetBytes: trainingSetBytes(facts, facts.features), exampleBytes: exampleBytes(facts.features) } : { datasetBytes: 0, exampleBytes: 0 };
}
