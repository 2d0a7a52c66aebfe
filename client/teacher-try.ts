/**
 * "Try the latest checkpoint" on the teacher page: the newest checkpoint the chief stored on
 * the server, loaded with tf.loadLayersModel exactly as anyone adopting the model would, and
 * its task's try panel (the digit pad, a name's completions) asking it. Reloaded whenever a
 * newer checkpoint appears; a checkpoint of another task swaps the panel.
 */
import * as tf from '@tensorflow/tfjs';
import type { CheckpointInfo } from '../shared/checkpoints/checkpoint';
import { toWebringError } from '../shared/protocol/errors';
import { predictBatch } from '../shared/compute/models';
import { loadPages, type TryPanel } from '../shared/tasks/pages';
import { findTask } from '../shared/tasks/registry';
import { PROGRAM_WORKLOAD } from '../shared/protocol/start-config';

export interface TeacherTry {
  /** Call with the room's checkpoint list (newest first); loads the newest if it changed. */
  update(list: CheckpointInfo[]): void;
  /** The model of the newest checkpoint loaded, and its task; null before one. */
  readonly loaded: { model: tf.LayersModel; task: string; checkpoint: CheckpointInfo } | null;
}

export function mountTeacherTry(container: HTMLElement, room: string, readHeaders: Record<string, string>, onLoaded?: (loaded: NonNullable<TeacherTry['loaded']>) => void): TeacherTry {
  let loaded: TeacherTry['loaded'] = null;
  let loading = false;
  let panel: { task: string; panel: TryPanel } | null = null;
  const status = document.createElement('p');
  status.className = 'hint';
  status.dataset.testid = 'teacher-try-status';
  status.textContent = 'No checkpoint yet: the chief saves one every few steps while the class trains.';
  const panelHost = document.createElement('div');
  container.append(status, panelHost);

  /** The checkpoint's task's panel, answering from the loaded model. */
  const panelFor = async (task: string, classes: readonly string[]): Promise<TryPanel> => {
    if (panel?.task === task) {
      panel.panel.setClasses(classes);
      return panel.panel;
    }
    const pages = await loadPages(task);
    panel?.panel.destroy();
    panelHost.replaceChildren();
    const shape = findTask(task)?.example.shape ?? [];
    const mounted = pages.mountTry(panelHost, {
      source: 'checkpoint',
      classes,
      ask: async (features, n) => (loaded ? predictBatch(loaded.model, features, [n, ...shape]) : null),
    });
    panel = { task, panel: mounted };
    return mounted;
  };

  const load = async (c: CheckpointInfo) => {
    if (c.task === PROGRAM_WORKLOAD) {
      // Nothing here knows a program's inputs: say where its model is instead of failing to load a panel.
      loaded = null;
      status.textContent = `The checkpoint of step ${c.step} holds a program's own model (fitDataset): this page has nothing to try it with. tf.loadLayersModel reads it from the checkpoint's model.json.`;
      status.dataset.checkpoint = c.id;
      return;
    }
    loading = true;
    try {
      // The same headers go with model.json and the weights beside it.
      const next = await tf.loadLayersModel(`/api/rooms/${encodeURIComponent(room)}/checkpoints/${c.id}/model.json`, { requestInit: { headers: readHeaders } });
      loaded?.model.dispose();
      loaded = { model: next, task: c.task, checkpoint: c };
      status.textContent = `Using the checkpoint of step ${c.step} (epoch ${c.epoch + 1}), loaded with tf.loadLayersModel.`;
      status.dataset.checkpoint = c.id;
      // The checkpoint's own task and classes: the task's outputs, or the ones the class collected.
      const tryPanel = await panelFor(c.task, c.classes);
      tryPanel.setEnabled(true);
      tryPanel.refresh(`the checkpoint of epoch ${c.epoch + 1}, step ${c.step}`);
      onLoaded?.(loaded);
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
      if (!newest || newest.id === loaded?.checkpoint.id || newest.id === status.dataset.checkpoint || loading) return;
      void load(newest);
    },
    get loaded() {
      return loaded;
    },
  };
}
