/**
 * The test build's round check (vite.config.ts builds it in test mode only): in this tab's
 * compute thread, on the backend asked for, a local-steps round across an epoch's end
 * against the step-by-step path (test/support/round-check.ts), the browser half of what
 * test/unit/device-round.test.ts runs in Node: WebGL exists only here, and WebGPU here is
 * the browser's own. test/e2e/round-backends.spec.ts calls `roundCheck` with real digits.
 */
import './zod-jitless';
import type { Backend } from '../shared/protocol';
import { replicaRecipe } from '../shared/protocol';
import { startConfigSchema } from '../shared/tasks/start-config';
import { roundPlaceFor } from '../shared/compute/device-round';
import { acrossEpochEnd, digitsFrom, type EpochEndReport } from '../test/support/round-check';
import { openCompute } from './open-compute';

/** Real digits from the test: a step's share, and the rows of features (bytes) and labels. */
interface CheckInput {
  backend: Backend;
  share: number;
  rowFloats: number;
  features: number[];
  labels: number[];
}

const logEl = document.getElementById('log')!;
const log = (m: string) => (logEl.textContent += `${m}\n`);

async function roundCheck(input: CheckInput): Promise<EpochEndReport & { backend: string; place: string }> {
  const compute = await openCompute(input.backend, 'thread', log);
  try {
    const backend = compute.info.backend;
    if (backend !== input.backend) throw new Error(`asked for ${input.backend}, the thread runs ${backend}`);
    const config = startConfigSchema.parse({ sync: 'local-steps', localOptimizer: 'adam', localLearningRate: 0.001, seed: 4 });
    const spec = { config: { ...config, ...replicaRecipe(config) } };
    const [a, b] = [await compute.createReplica(spec), await compute.createReplica(spec)];
    const digits = digitsFrom(input.features, input.labels, input.share, input.rowFloats);
    // The device's kernels round as the device does: within 1e-4 of the fused update's host pass; the host round is the same bits.
    const place = roundPlaceFor(backend);
    const report = await acrossEpochEnd(a, b, digits, place === 'host' ? 0 : 1e-4, () => compute.numTensors());
    await a.dispose();
    await b.dispose();
    log(`${backend} (${place}): ${JSON.stringify(report)}`);
    return { backend, place, ...report };
  } finally {
    await compute.close();
  }
}

(window as unknown as { roundCheck: typeof roundCheck }).roundCheck = roundCheck;
