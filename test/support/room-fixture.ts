/**
 * A Room on its own, on a manual clock, for the unit tests of the room (room.test.ts) and of
 * its hub member (room-hub.test.ts): members, a room joined in order, its ranks, the code a
 * call throws, and a chief's progress report.
 */
import { DEFAULT_START_CONFIG } from '../../shared/tasks/start-config';
import assert from 'node:assert/strict';
import { ManualClock } from '../../shared/util/clock';
import { WebringError } from '../../shared/protocol/errors';
import { type ProgressReport, type StartConfig } from '../../shared/protocol';
import { Room, type NewMember } from '../../signaling-server/rooms/room';

export const GRACE_MS = 1_000;
export const CONFIG: StartConfig = { ...DEFAULT_START_CONFIG, resumeFrom: 'none' };

export const member = (id: string, node: string | null = null): NewMember => ({
  id,
  socketId: `socket-${id}`,
  tokenHash: id.padEnd(64, '0'),
  name: `student ${id}`,
  backend: 'cpu',
  kind: 'node',
  adapter: null,
  node,
});

/** A room on a manual clock with members `ids`, joined in that order. */
export function roomWith(ids: string[], node: string | null = null): { room: Room; clock: ManualClock } {
  const clock = new ManualClock();
  const room = new Room('class', clock);
  for (const id of ids) room.join(member(id, node));
  return { room, clock };
}

export const ranks = (room: Room) => room.snapshot().members.map((m) => m.id);

/** The code a call threw, or 'none'. */
export function codeOf(fn: () => unknown): string {
  try {
    fn();
    return 'none';
  } catch (err) {
    assert.ok(err instanceof WebringError, `expected a WebringError, got ${String(err)}`);
    return err.code;
  }
}

export function progress(run: number, step: number, extra: Partial<ProgressReport> = {}): ProgressReport {
  return {
    run, generation: 0, step, epoch: 0, loss: 1 / step, trainAccuracy: 0.5, examplesPerSec: 100, weightsHash: '0123456789abcdef', totalSteps: 100,
    computeMs: 10, batchShare: 0.5, linkMBps: 20, learningRate: 0.001, speedVsMedian: 1, hashChecked: false, hashMismatch: false,
    collective: { algorithm: 'ring', alphaMs: 0.5, betaMBps: 20, reason: 'test', timing: { dataMs: 0, computeMs: 10, readbackMs: 1, crossMs: 0, commMs: 5, applyMs: 1 } }, ...extra,
  };
}
