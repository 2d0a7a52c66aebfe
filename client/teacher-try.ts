/**
 * "Try the latest checkpoint" on the teacher page: the newest checkpoint the chief stored on
 * the server, loaded with tf.loadLayersModel exactly as anyone adopting the model would, and
 * a drawing pad that asks it. Reloaded whenever a newer checkpoint appears.
 */
import * as tf from '@tensorflow/tfjs';
import type { CheckpointInfo } from '../shared/checkpoints/checkpoint';
import { toWebringError } from '../shared/protocol/errors';
import { mountDigitPad } from './digit-pad';
import { predictDigit } from '../shared/compute/models';
import { areDigitClasses } from '../shared/protocol';

export interface TeacherTry {
  /** Call with the room's checkpoint list (newest first); loads the newest if it changed. */
  update(list: CheckpointInfo[]): void;
}

export function mountTeacherTry(container: HTMLElement, room: string, readHeaders: Record<string, string>): TeacherTry {
  let model: tf.LayersModel | null = null;
  let loadedId: string | null = null;
  let loading = false;
  const status = document.createElement('p');
  status.className = 'hint';
  status.dataset.testid = 'teacher-try-status';
  status.textContent = 'No checkpoint yet: the chief saves one every few steps while the class trains.';
  const padHost = document.createElement('div');
  container.append(status, padHost);
  const pad = mountDigitPad(padHost, {
    title: 'Draw on the pad',
    emptyHint: 'Draw a digit from 0 to 9 to ask the latest checkpoint.',
    predict: async (input) => (model ? predictDigit(model, input) : null),
  });
  pad.setEnabled(false, 'waiting for the first checkpoint');

  const load = async (c: CheckpointInfo) => {
    loading = true;
    try {
      // The same headers go with model.json and the weights beside it.
      const next = await tf.loadLayersModel(`/api/rooms/${encodeURIComponent(room)}/checkpoints/${c.id}/model.json`, { requestInit: { headers: readHeaders } });
      model?.dispose();
      model = next;
      loadedId = c.id;
      status.textContent = `Using the checkpoint of step ${c.step} (epoch ${c.epoch + 1}), loaded with tf.loadLayersModel.`;
      status.dataset.checkpoint = c.id;
      // The checkpoint's own classes: the digits, or the ones the class collected.
      pad.setClasses(c.classes, areDigitClasses(c.classes) ? 'Draw a digit from 0 to 9 to ask the latest checkpoint.' : `Draw ${c.classes.join(', ')} to ask the latest checkpoint.`);
      pad.setEnabled(true);
      pad.refresh();
    } catch (err) {
      const e = toWebringError(err);
      status.textContent = `Could not load checkpoint ${c.id}: ${e.message}`;
    } finally {
      loading = false;
    }
  };

  return {
    update(list) {
      const newest = list[0];
      if (!newest || newest.id === loadedId || loading) return;
      void load(newest);
    },
  };
}
