// The hostile student of issue 57, as a preload for a real Node worker
// (`node --import tsx --import ./test/support/reform-storm.mjs node-worker/main.ts …`): the
// worker trains like any other, and its connection also asks the server to re-form the
// generation it last heard of every REFORM_STORM_EVERY_MS (env, default 2 s), the pace of the
// review's reproduction. It patches socket.io-client in this process only, so nothing in the
// product can do this; each request prints a line the test counts. Plain JavaScript: the
// worker's compute thread inherits the preload, and a thread's loader has no tsx hooks for
// --import (tsx issue #354, as node-worker/compute-thread-boot.mjs says); there it patches a
// socket.io-client nobody uses.
import { Socket } from 'socket.io-client';

const EVERY_MS = Number(process.env.REFORM_STORM_EVERY_MS ?? 2_000);
const emit = Socket.prototype.emit;
const storming = new WeakSet();

/** Asks for a re-form of the newest generation `socket` heard of, every EVERY_MS, while connected. */
function storm(socket) {
  let generation = null;
  socket.on('ring:generation', (g) => (generation = g.generation));
  const timer = setInterval(() => {
    if (generation === null || !socket.connected) return;
    emit.call(socket, 'ring:reform', { generation, reason: 'ERR_TIMEOUT: a storm (issue 57)' });
    console.log(`reform-storm: asked to re-form generation ${generation}`);
  }, EVERY_MS);
  // The storm never keeps a finished worker alive.
  timer.unref();
}

// The worker's own connection is the first socket that sends anything (its room:join).
Socket.prototype.emit = function (event, ...args) {
  if (!storming.has(this)) {
    storming.add(this);
    storm(this);
  }
  return emit.call(this, event, ...args);
};
