/**
 * The classroom lab end to end, as root: a wired-lab network of three worker namespaces
 * measures what its profile says, and the real signaling server and three real Node
 * workers, each in its own namespace under a CPU cap, train five steps over it to
 * identical weights. Where the machine cannot make namespaces the test fails with the
 * coded reason (ERR_LAB_NEEDS_ROOT, ERR_LAB_NO_NETNS): it never skips itself. `npm test`
 * (scripts/run-tests.ts) skips the lab suite for a non-root user, saying so; CI requires it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { checkPreconditions } from '../../lab/preconditions';
import { wiredLab } from '../../lab/network-models';
import { measureFlows } from '../../lab/flows';
import { MODEL_TOLERANCE, TCP_GOODPUT_PER_FRAME } from '../../lab/validate-models';
import { startLabServer, startLabWorker, waitForRoom, type LabServer } from '../../lab/lab-server';
import { tail, type LabProcess } from '../../lab/spawn';
import { cleanupLab, withLab } from '../../lab/netlab';

const WORKERS = 3;
const PORT_MBIT = 50;
/** Three capped workers together stay under the machine's two cores, beside the server. */
const WORKER_CORES = 0.4;
const STEPS = 5;
const ROOM = 'lab';

test('wired-lab with 3 namespaces: a port measures its rate, and 3 capped Node workers train 5 steps to identical weights', { timeout: 150_000 }, async (t) => {
  t.after(() => {
    cleanupLab();
  });
  const capabilities = checkPreconditions();
  await withLab(
    wiredLab({ portMbit: PORT_MBIT }),
    WORKERS,
    async (lab) => {
      const [w0, w1] = lab.workers;
      const [single] = await measureFlows([{ label: 'w0->w1', from: w0!, to: w1! }], 2);
      const expected = PORT_MBIT * TCP_GOODPUT_PER_FRAME;
      assert.ok(Math.abs(single!.mbit - expected) <= MODEL_TOLERANCE * expected, `one flow got ${single!.mbit.toFixed(1)} Mbit/s of a ${PORT_MBIT} Mbit/s port (${expected.toFixed(1)} of goodput ±${MODEL_TOLERANCE * 100}%)`);

      let server: LabServer | null = null;
      const workers: LabProcess[] = [];
      try {
        // The test build, as the e2e tests leave it: this test needs no client, so no rebuild either way.
        server = await startLabServer(lab, ROOM, { env: { CLIENT_BUILD_MODE: 'test' } });
        for (let i = 0; i < WORKERS; i++) workers.push(startLabWorker(lab, i, server, { cores: WORKER_CORES }));
        const explain = () => workers.map((w) => `--- ${w.label}\n${tail(w.lines, 8)}`).join('\n');
        await waitForRoom(server, (r) => r.members.length === WORKERS, 'all workers joined', 60_000).catch((err: Error) => assert.fail(`${err.message}\n${explain()}`));
        await server.start({ model: 'mlp', maxSteps: STEPS, resumeFrom: 'none' });
        const room = await waitForRoom(server, (r) => r.members.length === WORKERS && r.members.every((m) => m.step >= STEPS && m.weightsHash !== null), `all workers at step ${STEPS}`, 60_000).catch((err: Error) =>
          assert.fail(`${err.message}\n${explain()}`),
        );
        const hashes = room.members.map((m) => m.weightsHash);
        assert.equal(new Set(hashes).size, 1, `weights hashes at step ${STEPS}: ${hashes.join(', ')}`);
        assert.deepEqual(room.members.map((m) => m.step), Array(WORKERS).fill(STEPS));
        // The gradients crossed the lab's links (host candidates on the 198.18 veths): each member measured its link.
        assert.ok(room.members.every((m) => m.linkMBps > 0), `link rates: ${room.members.map((m) => m.linkMBps).join(', ')}`);
      } finally {
        await Promise.all(workers.map((w) => w.kill()));
        await server?.stop();
      }
    },
    capabilities,
  );
});
