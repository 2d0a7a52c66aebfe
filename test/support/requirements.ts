/**
 * What a test needs from the machine beyond npm: root, or a program from one of Debian's
 * packages (scripts/ensure-system-packages.sh names them all). For a normal user without
 * them, the test skips with one line saying what is missing and how to run it. CI sets
 * WEBRING_REQUIRE_ALL=1 (.ci/run), and then a missing need fails the run instead of
 * skipping: CI expects every suite to run.
 */
import { existsSync } from 'node:fs';

/** Set to 1 where every test must run (CI): an unmet need is then an error, not a skip. */
export const REQUIRE_ALL_ENV = 'WEBRING_REQUIRE_ALL';

export interface Need {
  /** What is missing, in a few words. */
  what: string;
  met: boolean;
  /** The command that meets it. */
  fix: string;
}

export function requireAll(env: NodeJS.ProcessEnv = process.env): boolean {
  return env[REQUIRE_ALL_ENV] === '1';
}

/** Root (uid 0): network namespaces, tc qdiscs and cgroups. */
export function rootNeed(): Need {
  const uid = typeof process.getuid === 'function' ? process.getuid() : -1;
  return { what: `root (uid 0; this is uid ${uid})`, met: uid === 0, fix: 'sudo npm run test:lab, or the lab container (docs/lab.md, "The lab in a container")' };
}

/** A program at `path` from Debian's `pkg`. */
export function programNeed(path: string, pkg: string): Need {
  return { what: `${path} (Debian's ${pkg})`, met: existsSync(path), fix: `sudo apt-get install -y ${pkg}` };
}

/** Dawn's WebGPU adapter in Node without a GPU: the Vulkan loader and Chromium's SwiftShader driver. */
export function swiftShaderNeeds(): Need[] {
  return [programNeed('/usr/lib/x86_64-linux-gnu/libvulkan.so.1', 'libvulkan1'), programNeed('/usr/lib/chromium/vk_swiftshader_icd.json', 'chromium')];
}

/**
 * The skip reason when any need is unmet (one line: what is missing, and how to run the
 * test), or false when all are met. Under WEBRING_REQUIRE_ALL=1 an unmet need throws.
 */
export function skipUnless(needs: Need[], env: NodeJS.ProcessEnv = process.env): string | false {
  const unmet = needs.filter((n) => !n.met);
  if (unmet.length === 0) return false;
  const reason = `needs ${unmet.map((n) => n.what).join(' and ')}; to run it: ${[...new Set(unmet.map((n) => n.fix))].join('; ')}`;
  if (requireAll(env)) throw new Error(`${REQUIRE_ALL_ENV}=1 and this test ${reason}`);
  return reason;
}
