/**
 * `npm test`: every suite in turn, stopping at the first that fails. A suite that needs
 * what this machine lacks (root for the lab, Chromium for the browser tests) is skipped
 * with one line saying what is missing and how to run it, so a normal user's `npm test`
 * runs everything that needs no privilege. CI sets WEBRING_REQUIRE_ALL=1 (.ci/run): a
 * missing need then fails the run instead. Ends with which suites ran and which did not.
 */
import { spawnSync } from 'node:child_process';
import { programNeed, rootNeed, skipUnless, type Need } from '../test/support/requirements';

interface Suite {
  /** The npm script that runs it. */
  script: string;
  needs: Need[];
}

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

const SUITES: Suite[] = [
  { script: 'typecheck', needs: [] },
  { script: 'test:unit', needs: [] },
  { script: 'test:server', needs: [] },
  { script: 'test:package', needs: [] },
  { script: 'test:class', needs: [] },
  { script: 'test:lab', needs: [rootNeed(), programNeed('/usr/sbin/ip', 'iproute2'), programNeed('/usr/sbin/tc', 'iproute2')] },
  { script: 'test:e2e', needs: [programNeed(CHROMIUM, 'chromium')] },
];

const summary: string[] = [];
let status = 0;
for (const suite of SUITES) {
  const skip = skipUnless(suite.needs);
  if (skip) {
    console.log(`\nwebring: skipping ${suite.script}: it ${skip}`);
    summary.push(`  ${suite.script.padEnd(13)} skipped: ${skip}`);
    continue;
  }
  const t0 = Date.now();
  const run = spawnSync('npm', ['run', suite.script], { stdio: 'inherit' });
  const seconds = Math.round((Date.now() - t0) / 1000);
  if (run.status !== 0) {
    summary.push(`  ${suite.script.padEnd(13)} FAILED (exit ${run.status ?? run.signal}, ${seconds} s)`);
    status = run.status ?? 1;
    break;
  }
  summary.push(`  ${suite.script.padEnd(13)} passed (${seconds} s)`);
}
console.log(`\nwebring: test suites\n${summary.join('\n')}`);
process.exit(status);
