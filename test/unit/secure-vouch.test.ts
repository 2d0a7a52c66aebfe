/**
 * Issue 57 (5): a secure ring of four members behind one address holds (one client), and
 * goes on once the teacher vouches for the address: the server sends a generation with the
 * same members counting four clients, which the held replica switches to (its links are
 * open) and then trains. The server side is tested for real in
 * test/server/shared-address.test.ts; here the run's decision, over a stand-in network.
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

const SEATS = 4;

const generationOf = (generation: number, clients: number): Generation => ({
  room: 'r',
  generation,
  members: memberIds(SEATS).map((id, rank) => ({ id, name: id, index: rank, rank }) as unknown as Generation['members'][number]),
  clients,
});

test('issue 57 (5): four seats on one address hold, naming the address; the vouched generation counting four lets them train', async () => {
  const status = new WorkerStatusView({ backend: 'cpu', connected: true, numTensors: 0 }, () => undefined);
  let current = generationOf(4, 1);
  let pending: Generation | null = null;
  const network = {
    get generation() {
      return current;
    },
    isReadyFor: () => true,
    applyGeneration: (g: Generation) => (current = g),
  } as unknown as RingView;
  const generations = {
    get pending() {
      return pending;
    },
    nextChange: () => Promise.resolve(),
    admitted: () => (pending = null),
  } as unknown as RunGenerations;
  const run = new SecureRun({
    start: { run: 1, generation: 4, config: startConfigSchema.parse({ secureAggregation: true }), startStep: 0, resume: null, admitted: false },
    network,
    generations,
    control: { stopRequested: false, stopReason: null, pauseRequested: false },
    status,
    secure: new SecureAggregation(relayedDirectories(memberIds(1))[0]!, systemClock),
    log: () => undefined,
  });
  const trainer = {} as Trainer;

  assert.equal(await run.hold(SEATS, trainer), true, 'one client: held');
  assert.match(status.current.secureWait ?? '', /the ring has 1 \(4 seats on 1 network address: one address counts once unless the teacher vouches/);

  pending = generationOf(5, 4);
  assert.equal(await run.hold(SEATS, trainer), true, 'switches to the vouched generation first');
  assert.equal(current.generation, 5);
  assert.equal(await run.hold(SEATS, trainer), false, 'four clients: trains');
  assert.equal(status.current.secureWait, null);
});
