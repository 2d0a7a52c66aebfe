/**
 * The teacher page watching a program's run: two Node members fit their own regression
 * model with the library's fitDataset against an embedded server that serves the classroom's
 * pages. The teacher page shows the run (its members, steps, loss) without an accuracy the
 * model does not have, says that the checkpoint holds a program's own model instead of
 * failing to load a task's try panel, and offers no Restore its form could not do.
 */
import { test, expect } from '@playwright/test';
import * as tf from '@tensorflow/tfjs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServer, type EmbeddedServer } from '../../signaling-server/library';
import { fitDataset, joinRoom, type RoomMember } from '../../node-worker/library';
import { reportCspViolations } from './helpers';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const ROOM = 'e2e-program';
let server: EmbeddedServer;
const members: RoomMember[] = [];

test.beforeAll(async () => {
  server = await startServer({ host: '127.0.0.1', clientDir: path.join(ROOT, 'dist', 'client'), logLevel: 'warn' });
});

test.afterAll(async () => {
  for (const m of members) await m.leave();
  await server?.close();
});

function regression(seed: number): tf.LayersModel {
  const model = tf.sequential({ layers: [tf.layers.dense({ inputShape: [2], units: 8, activation: 'tanh', kernelInitializer: tf.initializers.glorotUniform({ seed }) }), tf.layers.dense({ units: 1 })] });
  model.compile({ optimizer: tf.train.adam(0.01), loss: 'meanSquaredError' });
  return model;
}

const points = () =>
  tf.data.array(Array.from({ length: 480 }, (_, i) => i)).map((i) => {
    const x = [Math.sin(i as number), Math.cos((i as number) * 0.7)];
    return { xs: tf.tensor1d(x), ys: tf.tensor1d([0.6 * x[0]! - 0.4 * x[1]!]) };
  });

test("the teacher page follows a program's run: loss and steps, no accuracy, no try panel or Restore it cannot do", async ({ browser }) => {
  for (const [i, name] of ['prog-a', 'prog-b'].entries()) {
    members.push(await joinRoom({ url: server.url, room: ROOM, code: server.joinCode(ROOM), name, backend: 'cpu', compute: 'main', ...(i === 0 ? { teacherToken: server.teacherToken } : {}) }));
  }
  const context = await browser.newContext();
  await context.addInitScript(reportCspViolations);
  const teacher = await context.newPage();
  const errors: string[] = [];
  teacher.on('pageerror', (e) => errors.push(e.message));
  await teacher.goto(`${server.url}/teacher.html?room=${ROOM}&token=${server.teacherToken}`);
  await expect(teacher.getByRole('rowheader', { name: 'prog-b' })).toBeVisible({ timeout: 30_000 });

  const fits = members.map((m, i) => fitDataset(m, regression(i), points(), { epochs: 6, batchSize: 32, minMembers: 2, saveEverySteps: 20, resumeFrom: 'none' }));
  const histories = await Promise.all(fits);
  const loss = histories[0]!.history.loss as number[];
  expect(loss.at(-1)!).toBeLessThan(loss[0]!);

  // The last step of the run, out of its total: the page followed the run to its end.
  await expect(teacher.locator('#p-step')).toHaveText(/^\s*(\d+)\s*\/\s*\1\s*$/, { timeout: 30_000 });
  await expect(teacher.locator('#p-loss')).not.toHaveText('–');
  await expect(teacher.locator('#p-train-acc')).toHaveText('–');
  await expect(teacher.locator('#p-test-acc')).toHaveText('–');
  await expect(teacher.getByTestId('teacher-try-status')).toContainText("a program's own model", { timeout: 30_000 });
  const restore = teacher.locator('[data-restore]').first();
  await expect(restore).toBeDisabled();
  await expect(restore).toHaveAttribute('title', /program/);
  expect(errors).toEqual([]);
});
