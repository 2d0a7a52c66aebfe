// Type-checked against the package's emitted declarations (test/package/package.test.ts).
// Each @ts-expect-error fails the check if the types it guards were lost (an unresolved
// import in a declaration file turns them into `any`, and the directive goes unused).
import { joinRoom, RoomControl, WebringError, ERROR_CODES, datasetFromFunction, type RoomMember, type Membership, type WorkerStatus, type StartOptions, type InputContext } from 'webring';
import { joinRoom as joinFromNode, nodePlatform } from 'webring/node';
import { startServer, type EmbeddedServer } from 'webring/server';
import { RoomControl as Control, type StatusSnapshot } from 'webring/control';

export async function main(): Promise<void> {
  const server: EmbeddedServer = await startServer({ port: 0 });
  const member: RoomMember = await joinFromNode({ url: server.url, room: 'class', code: server.joinCode('class'), backend: 'cpu' });
  const off = member.on('membership', (m: Membership) => console.log(m.rank, m.size, m.isChief));
  off();
  const options: StartOptions = { epochs: 1, batchSizePerWorker: 32, allreduce: 'ring', wire: 'fp16' };
  const status = await new RoomControl({ url: server.url, teacherToken: server.teacherToken }).start('class', options);
  const done: WorkerStatus = await member.whenDone();
  const snapshot: StatusSnapshot = await new Control({ url: server.url, teacherToken: server.teacherToken }).statusSnapshot('class');
  // @ts-expect-error: the clock offset is a number of milliseconds
  snapshot.clockOffsetMs.toUpperCase();
  const code: (typeof ERROR_CODES)[number] = 'ERR_BAD_JOIN_CODE';
  console.log(status.step, done.loss, joinRoom === joinFromNode, typeof nodePlatform, new WebringError(code, 'x').code);
  const context: InputContext = { shardIndex: 0, shardCount: 1, epoch: 0 };
  console.log(context.shardCount, datasetFromFunction((c: InputContext) => null as never).kind);
  // @ts-expect-error: a shard's function is told an InputContext, not a string
  datasetFromFunction((c: string) => null as never);
  // @ts-expect-error: a join needs its room's code
  await joinRoom({ url: server.url, room: 'class' });
  // @ts-expect-error: the rank is null while a member waits to be admitted
  member.rank.toFixed();
  // @ts-expect-error: no such collective
  await server.control.start('class', { allreduce: 'tree' });
}
