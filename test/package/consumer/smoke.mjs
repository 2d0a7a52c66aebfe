// Run by test/package/package.test.ts inside a project that installed webring's tarball:
// every entry point resolves, and two members train a short run on the embedded server,
// their maths in the built compute thread. Prints one JSON line with what it saw.
import * as webring from 'webring';
import * as node from 'webring/node';
import { startServer } from 'webring/server';
import { RoomControl } from 'webring/control';

const server = await startServer({ host: '127.0.0.1', logLevel: 'silent' });
try {
  const room = 'packaged';
  const join = (name) => node.joinRoom({ url: server.url, room, code: server.joinCode(room), name, backend: 'cpu' });
  const members = [await join('p0'), await join('p1')];
  const deadline = Date.now() + 30_000;
  while (!members.every((m) => m.size === 2 && m.rank !== null) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  const done = members.map((m) => m.whenDone());
  const control = new RoomControl({ url: server.url, teacherToken: server.teacherToken });
  const controlSaw = (await control.status(room)).members.length;
  await control.start(room, { maxSteps: 3, batchSizePerWorker: 8, resumeFrom: 'none', warmupSteps: 0 });
  const finished = await Promise.all(done);
  console.log(JSON.stringify({
    sameJoinRoom: webring.joinRoom === node.joinRoom,
    sameControl: RoomControl === webring.RoomControl && RoomControl === node.RoomControl,
    controlSaw,
    ranks: members.map((m) => m.rank).sort(),
    chiefs: members.filter((m) => m.isChief).length,
    steps: finished.map((s) => s.step),
    hashes: new Set(finished.map((s) => s.weightsHash)).size,
    backend: finished[0].backend,
  }));
  await Promise.all(members.map((m) => m.leave()));
} finally {
  await server.close();
}
