import { withLab, installTeardownHandlers, cleanupLab } from './netlab';
import { wiredLab } from './network-models';
import { startLabServer, waitForRoom } from './lab-server';
import { RESULT_PREFIX } from './bench-peer-protocol';
installTeardownHandlers();
cleanupLab();
const alg = process.argv[2] ?? 'hub';
const mb = Number(process.argv[3] ?? 16);
await withLab(wiredLab({ serverMbit: 100 }), 4, async (lab) => {
  const server = await startLabServer(lab, 'dbg', { env: { HUB: '1', LOG_LEVEL: 'info' } });
  await waitForRoom(server, (r) => r.hub !== null, 'hub', 60000);
  const procs = lab.workers.map((_, i) => lab.spawnInWorker(i, process.execPath, ['--import', 'tsx', 'lab/bench-peer-process.ts', '--url', server.url, '--room', 'dbg', '--name', `w${i}`, '--n', '4'], { cwd: process.cwd(), cpuCap: lab.cpuCap(`w${i}`, { cores: 0.45 }), env: { JOIN_CODE: server.joinCode, BENCH_VERBOSE: '1' } }));
  let id = 0;
  const all = async (cmd: object, ms: number) => { id++; for (const p of procs) p.child.stdin!.write(JSON.stringify({ ...cmd, id }) + '\n'); return Promise.all(procs.map((p) => p.waitForLine(new RegExp(`^${RESULT_PREFIX}\\{"id":${id},`), ms))); };
  console.log(await all({ cmd: 'join', hub: true }, 120000));
  try {
    console.log(await all({ cmd: 'allReduce', bytes: mb * 2 ** 20, reps: 1, algorithm: alg, wire: 'fp32' }, 150000));
  } catch (e) { console.log(String(e)); }
  for (const p of procs) console.log(p.label, p.lines.slice(-8).join('\n'));
  console.log('SERVER', server.proc.lines.slice(-30).join('\n'));
  await server.stop();
});
