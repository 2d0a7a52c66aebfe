/**
 * The start config against the task registry: each task's defaults fill what the teacher
 * leaves out, anything a task lacks is refused naming its field, and a config stored before
 * workloads were tasks (a checkpoint, room.json) still reads as the digits it meant.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DEFAULT_START_CONFIG, defaultConfigOf, startConfigSchema, storedConfigSchema } from '../../shared/tasks/start-config';
import { TASKS, TASK_CATALOG } from '../../shared/tasks/registry';
import { namesTask } from '../../shared/tasks/names/task';
import { parseOrThrow, startConfigSchemaFor } from '../../shared/protocol';
import { WebringError } from '../../shared/protocol/errors';

test("every task's defaults: its first model and dataset, its outputs, its recipe", () => {
  assert.equal(DEFAULT_START_CONFIG.task, TASKS[0]!.id);
  for (const task of TASKS) {
    const config = defaultConfigOf(task.id);
    assert.deepEqual([config.task, config.model, config.dataset, config.data], [task.id, task.models[0]!.id, task.datasets[0]!.id, 'dataset']);
    assert.deepEqual(config.classes, [...task.outputs]);
    for (const [field, value] of Object.entries(task.recipe)) assert.equal(config[field as keyof typeof config], value, `${task.id}.${field}`);
  }
  // The teacher's own values win over the task's.
  assert.equal(startConfigSchema.parse({ task: 'names', epochs: 1, learningRate: 0.01 }).learningRate, 0.01);
});

test('a task, model, dataset, data or classes the task lacks is refused naming the field', () => {
  const field = (body: object, schema = startConfigSchema): string | undefined => {
    try {
      parseOrThrow(schema, body);
    } catch (err) {
      assert.ok(err instanceof WebringError && err.code === 'ERR_BAD_REQUEST');
      return err.field;
    }
    assert.fail(`accepted ${JSON.stringify(body)}`);
  };
  assert.equal(field({ task: 'chess' }), 'task');
  assert.equal(field({ task: 'NAMES' }), 'task');
  assert.equal(field({ task: 'names', model: 'cnn' }), 'model');
  assert.equal(field({ model: 'char-mlp' }), 'model');
  assert.equal(field({ task: 'names', dataset: 'mnist-10k' }), 'dataset');
  assert.equal(field({ task: 'names', classes: ['a', 'b'] }), 'classes');
  // Own names train the task's symbols: a names run on own data names no classes of its own.
  assert.equal(field({ task: 'names', data: 'own', classes: ['a', 'b'] }), 'classes');
  for (const data of ['own', 'dataset+own'] as const) {
    const config = startConfigSchema.parse({ task: 'names', data });
    assert.deepEqual(config.classes, namesTask.outputs);
    // Read back as a checkpoint's metadata is: its 28 outputs are the task's, not a lesson's (at most 20).
    assert.deepEqual(startConfigSchema.parse(config), config);
  }
  // A task the class collects nothing for refuses own data.
  const datasetOnly = startConfigSchemaFor({ ...TASK_CATALOG, entry: (id) => (id === 'names' ? { ...TASK_CATALOG.entry(id)!, ownData: null } : TASK_CATALOG.entry(id)) });
  assert.equal(field({ task: 'names', data: 'dataset+own' }, datasetOnly), 'data');
  assert.equal(field({ data: 'mnist' }), 'data');
});

test('a config stored before tasks (data "mnist" or "mnist+own", no task) reads as the digits it meant', () => {
  const { task: _t, ...current } = DEFAULT_START_CONFIG;
  const old = { ...current, data: 'mnist+own', secureAggregation: true };
  const read = storedConfigSchema.parse(old);
  assert.deepEqual([read.task, read.data, read.model, read.dataset], ['mnist', 'dataset+own', 'mlp', 'mnist-60k']);
  assert.equal(storedConfigSchema.parse({ ...current, data: 'mnist' }).data, 'dataset');
  // A config of today passes unchanged; the API itself takes today's words only.
  assert.deepEqual(storedConfigSchema.parse(defaultConfigOf('names')), defaultConfigOf('names'));
  assert.throws(() => startConfigSchema.parse(old));
});
