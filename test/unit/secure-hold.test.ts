/**
 * Issue 38 (6): the secure threshold counts distinct clients, not seats. Before, a student
 * with two tabs and one classmate made a ring of three, which trained, and the student read
 * the classmate's gradient from the sum minus its own two. Now such a ring holds like a ring
 * of two, by the server's count of distinct clients in the generation (the server side is
 * tested for real in test/server/small-defects.test.ts; here the run's decision, over a
 * stand-in network and a real SecureAggregation).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SecureRun } from '../../shared/training/secure-run';
import { SecureAggregation } from '../../shared/secagg/secure-collective';
import { WorkerStatusView } from '../../shared/training/worker-status';
import { startConfigSchema } from '../../shared/tasks/start-config';
import { relayedDirectories, memberIds } from '../support/secure-ring';
import { systemClock } from '../../shared/util/clock';
import type { Generation } from '../../shared/protocol';
import type { RingView } from '../../shared/training/generation-tracker';
import type { RunGenerations } from '../../shared/training/run-ports';
import type { Trainer } from '../../shared/training/trainer';

function secureRunOver(g: Generation): { run: SecureRun; status: WorkerStatusView } {
  const status = new WorkerStatusView({ backend: 'cpu', connected: true, numTensors: 0 }, () => undefined);
  const network = { generation: g, isReadyFor: () => false } as unknown as RingView;
  const generations = { pending: null, nextChange: () => Promise.resolve(), admitted: () => undefined } as unknown as RunGenerations;
  const config = startConfigSchema.parse({ secureAggregation: true });
  const run = new SecureRun({
    start: { run: 1, generation: g.generation, config, startStep: 0, resume: null, admitted: false },
    network,
    generations,
    control: { stopRequested: false, stopReason: null, pauseRequested: false },
    status,
    secure: new SecureAggregation(relayedDirectories(memberIds(1))[0]!, systemClock),
    log: () => undefined,
  });
  return { run, status };
}

const generationOf = (seats: number, clients: number | undefined): Generation => ({
  room: 'r',
  generation: 4,
  members: memberIds(seats).map((id, rank) => ({ id, name: id, index: rank, rank }) as unknown as Generation['members'][number]),
  clients,
});

const trainer = {} as Trainer;

test('issue 38 (6): three seats from two clients hold, like two seats; three clients train (failed on the previous main)', async () => {
  const twoTabs = secureRunOver(generationOf(3, 2));
  assert.equal(await twoTabs.run.hold(3, trainer), true, 'two tabs of one student and a classmate hold');
  assert.match(twoTabs.status.current.secureWait ?? '', /the ring has 2 \(3 seats on 2 network addresses: one address counts once unless the teacher vouches/);
  const three = secureRunOver(generationOf(3, 3));
  assert.equal(await three.run.hold(3, trainer), false);
  assert.equal(three.status.current.secureWait, null);
  // A server that does not count clients: the seats count, as before.
  assert.equal(await secureRunOver(generationOf(3, undefined)).run.hold(3, trainer), false);
  assert.equal(await secureRunOver(generationOf(2, undefined)).run.hold(2, trainer), true);
});
