// examples/node-own-model: `npm run example:node`. Starts the signaling server in this
// process, three worker processes that fit one model together, kills one with SIGKILL
// mid-run, and waits for the other two to finish; the chief saves the model with file://.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServer } from 'webring/server';

const here = path.dirname(fileURLToPath(import.meta.url));
const room = 'own-model';
const saveTo = process.env.SAVE_TO ?? path.join(mkdtempSync(path.join(os.tmpdir(), 'webring-example-')), 'model');
const server = await startServer({ host: '127.0.0.1', logLevel: 'warn' });
const code = server.joinCode(room);
console.log(`server ${server.url}, room ${room}, join code ${code}`);

const workers = ['w0', 'w1', 'w2'].map((name, i) => {
  const env = { ...process.env, WEBRING_URL: server.url, WEBRING_ROOM: room, WEBRING_CODE: code, WORKER_NAME: name, SAVE_TO: saveTo, ...(i === 0 ? { WEBRING_TOKEN: server.teacherToken } : {}) };
  const child = spawn(process.execPath, [path.join(here, 'worker.mjs')], { env, stdio: ['ignore', 'pipe', 'inherit'] });
  const lines = [];
  child.stdout.on('data', (d) => {
    for (const line of d.toString().split('\n').filter(Boolean)) {
      lines.push(line);
      console.log(line);
    }
  });
  return { name, child, lines, exited: new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal }))) };
});

// Mid-run, one worker dies without a goodbye: the ring re-forms and the class trains on.
const victim = workers[2];
for (;;) {
  const status = await server.control.status(room).catch(() => null);
  if (status && status.state === 'training' && status.step >= 40) break;
  await new Promise((r) => setTimeout(r, 100));
}
console.log(`kill -9 ${victim.name} at step ${(await server.control.status(room)).step}`);
victim.child.kill('SIGKILL');

// The room's view of the run until it ends: its steps, and whether the replicas ever disagreed.
const survivors = Promise.all(workers.filter((w) => w !== victim).map((w) => w.exited));
let exited = false;
void survivors.then(() => (exited = true));
let last = null;
while (!exited) {
  const status = await server.control.status(room);
  if (status.run > 0 && status.step >= (last?.step ?? 0)) last = status;
  await new Promise((r) => setTimeout(r, 50));
}
const results = await survivors;
const histories = workers.flatMap((w) => w.lines.filter((l) => l.startsWith('HISTORY ')).map((l) => JSON.parse(l.slice(8))));
await server.close();
const ok = results.every((r) => r.code === 0) && histories.length === 2 && existsSync(path.join(saveTo, 'model.json')) && last?.consistency.mismatches === 0;
console.log(`RESULT ${JSON.stringify({ ok, saved: saveTo, killed: victim.name, steps: last?.step ?? null, consistency: last?.consistency ?? null, histories })}`);
process.exit(ok ? 0 : 1);
