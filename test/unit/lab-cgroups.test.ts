/**
 * Which cgroup hierarchy the lab's CPU caps use (lab/cpu-caps.ts): v1's cpu controller
 * where it is mounted, else cgroup v2's where its root offers the cpu controller, and
 * otherwise ERR_LAB_NO_CGROUP saying what is missing and what to do. The hierarchies here
 * are directories laid out as the kernel lays them out; the lab test (test/lab) makes real
 * groups on CI's v1 machine, and docs/lab.md records a run on v2.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { detectCgroups } from '../../lab/cpu-caps';
import { LabError } from '../../lab/lab-error';

function hierarchy(files: Record<string, string>): string {
  const root = mkdtempSync(path.join(os.tmpdir(), 'webring-cgroup-'));
  for (const [name, content] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(root, name)), { recursive: true });
    writeFileSync(path.join(root, name), content);
  }
  return root;
}

test("v1's cpu controller where it is mounted; else v2's unified hierarchy, whose groups go under one webring-lab parent", () => {
  const v1 = hierarchy({ 'cpu/cpu.cfs_quota_us': '-1\n' });
  const v2 = hierarchy({ 'cgroup.controllers': 'cpuset cpu io memory pids\n' });
  assert.deepEqual(detectCgroups(path.join(v1, 'cpu'), path.join(v2)), { version: 1, groups: path.join(v1, 'cpu') });
  assert.deepEqual(detectCgroups(path.join(v2, 'no-v1-here'), v2), { version: 2, groups: path.join(v2, 'webring-lab') });
});

test('without a cpu controller the lab stops with ERR_LAB_NO_CGROUP, saying which is missing and how to get one', () => {
  const bound = hierarchy({ 'cgroup.controllers': 'memory pids\n' });
  assert.throws(
    () => detectCgroups(path.join(bound, 'cpu'), bound),
    (e: unknown) => e instanceof LabError && e.code === 'ERR_LAB_NO_CGROUP' && /offers no cpu controller \(cgroup\.controllers: memory pids\).*--privileged --cgroupns=private/.test(e.message),
  );
  const none = hierarchy({});
  assert.throws(
    () => detectCgroups(path.join(none, 'cpu'), none),
    (e: unknown) => e instanceof LabError && e.code === 'ERR_LAB_NO_CGROUP' && /neither v1's .* nor a cgroup v2 hierarchy.*mount -t cgroup2/.test(e.message),
  );
});
