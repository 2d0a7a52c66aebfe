/**
 * The bound on a reported step (signaling-server/rooms/progress-bounds.ts), with the clock
 * in the test's hands: a turn or two past the room's step, more only after a silence long
 * enough that the class may have trained on without the server, and never past the plan.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CATCH_UP_SILENCE_MS, CATCH_UP_TURN_MS, PLAN_EXTRA_STEPS, PLAN_SLACK, REPORT_TURNS_AHEAD, checkReportedStep, highestReportableStep, planLimit, type RoomProgress } from '../../signaling-server/rooms/progress-bounds';
import { DEFAULT_START_CONFIG } from '../../shared/tasks/start-config';
import { MAX_RUN_STEPS } from '../../shared/protocol';
import { datasetFacts } from '../../shared/tasks/registry';
import { WebringError } from '../../shared/protocol/errors';

const AT = 1_000_000;
const room = (over: Partial<RoomProgress> = {}): RoomProgress => ({ step: 40, stepsPerTurn: 1, startStep: 0, config: { ...DEFAULT_START_CONFIG, maxSteps: 5_000 }, progressAt: AT, longestTurnMs: 200, ...over });

test('a report may be a turn or two past the room, in turns of localSteps in a local-steps run', () => {
  assert.equal(highestReportableStep(room(), AT + 100), 40 + REPORT_TURNS_AHEAD);
  assert.equal(highestReportableStep(room({ stepsPerTurn: 10 }), AT + 100), 40 + REPORT_TURNS_AHEAD * 10);
  assert.throws(() => checkReportedStep(room(), 1e9, AT, 'a report'), (e: unknown) => e instanceof WebringError && e.code === 'ERR_STEP_OUT_OF_RANGE' && e.field === 'step');
});

test('after a silence (a restarted server, a lost connection) the bound grows with the clock, from the longer of the floor and the longest turn', () => {
  // Still within the quiet time: no more than the turns ahead.
  assert.equal(highestReportableStep(room(), AT + CATCH_UP_SILENCE_MS), 40 + REPORT_TURNS_AHEAD);
  // Past it, one turn per CATCH_UP_TURN_MS: a class whose server was away 2 s past the quiet time catches up to 2,000 steps on.
  assert.equal(highestReportableStep(room(), AT + CATCH_UP_SILENCE_MS + 2_000), 40 + REPORT_TURNS_AHEAD + 2_000 / CATCH_UP_TURN_MS);
  // A class whose turns take 20 s waits that long before the bound grows.
  assert.equal(highestReportableStep(room({ longestTurnMs: 20_000 }), AT + 10_000), 40 + REPORT_TURNS_AHEAD);
  // Never past the plan: here the teacher's maxSteps.
  assert.equal(highestReportableStep(room(), AT + 3_600_000), 5_000);
});

test("the plan: maxSteps where set; a dataset's epochs at a ring of one, with slack, from the run's start; MAX_RUN_STEPS on own data", () => {
  assert.equal(planLimit(room()), 5_000);
  const config = { ...DEFAULT_START_CONFIG, maxSteps: undefined };
  const facts = datasetFacts(config.dataset)!;
  const plan = config.epochs * Math.ceil(facts.trainCount / config.batchSizePerWorker);
  assert.equal(planLimit({ startStep: 300, config }), 300 + PLAN_SLACK * plan + PLAN_EXTRA_STEPS);
  assert.equal(planLimit({ startStep: 0, config: { ...config, data: 'own', classes: ['cat', 'sun'] } as typeof config }), MAX_RUN_STEPS);
});
