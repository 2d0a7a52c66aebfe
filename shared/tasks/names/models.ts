/** The names task's models, by id (names-models.ts builds them). */
import { WebringError } from '../../protocol/errors';
import type { TaskModels } from '../task';
import { VOCAB_SIZE } from './names-text';
import { buildNamesModel } from './names-models';

export const namesModels: TaskModels = {
  build(model, seed, outputs) {
    if (model !== 'char-mlp') throw new WebringError('ERR_BAD_REQUEST', `the names task has no model ${model}`, 'model');
    if (outputs !== VOCAB_SIZE) throw new WebringError('ERR_BAD_REQUEST', `the names model has ${VOCAB_SIZE} outputs, not ${outputs}`, 'classes');
    return buildNamesModel(seed);
  },
};
