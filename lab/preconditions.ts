/**
 * What the lab needs from the machine, checked before anything is built, each with a coded
 * reason: root, `ip` and `tc`, network namespaces, the ifb device, the tbf qdisc and a
 * cgroup cpu controller (v1 or v2: cpu-caps.ts). netem is probed, not required: this machine's kernel lacks it,
 * and then the models shape rates without adding delay (the report says which).
 */
import { LabError } from './lab-error';
import { LAB_PREFIX } from './network-models';
import { tryCommand } from './run-command';
import { cgroupLayout, type CgroupLayout } from './cpu-caps';

const PROBE_NS = `${LAB_PREFIX}-probe`;
const PROBE_IFB = `${LAB_PREFIX}-pi`;

export interface LabCapabilities {
  /** Whether the kernel has the netem qdisc, so a model may add delay. */
  netem: boolean;
  /** The cgroup hierarchy the CPU caps use. */
  cgroup: CgroupLayout['version'];
}

/** Throws ERR_LAB_NEEDS_ROOT, ERR_LAB_NO_NETNS or ERR_LAB_NO_CGROUP, else says what the kernel offers. */
export function checkPreconditions(): LabCapabilities {
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) {
    throw new LabError('ERR_LAB_NEEDS_ROOT', `the classroom lab makes network namespaces, tc qdiscs and cgroups, which needs root (uid 0; this is uid ${process.getuid?.() ?? 'unknown'}): run \`sudo npm run lab\`, or the lab's container, which any user with Docker or Podman can run (docs/lab.md, "The lab in a container")`);
  }
  for (const tool of [['ip', '-V'], ['tc', '-V']]) {
    const r = tryCommand(tool);
    if (r.status !== 0) throw new LabError('ERR_LAB_NO_NETNS', `\`${tool[0]}\` (iproute2) is missing or broken: ${r.stderr.trim()}; install it: sudo apt-get install -y iproute2`);
  }
  const cgroup = cgroupLayout().version;
  // A probe namespace of our own, so a kernel that lacks something fails here and not halfway
  // through a model. It is removed whatever happens.
  tryCommand(['ip', 'netns', 'del', PROBE_NS]);
  const made = tryCommand(['ip', 'netns', 'add', PROBE_NS]);
  if (made.status !== 0) throw new LabError('ERR_LAB_NO_NETNS', `cannot make a network namespace (\`ip netns add ${PROBE_NS}\`): ${made.stderr.trim()}`);
  try {
    const ifb = tryCommand(['ip', '-n', PROBE_NS, 'link', 'add', PROBE_IFB, 'type', 'ifb']);
    if (ifb.status !== 0) throw new LabError('ERR_LAB_NO_NETNS', `the kernel has no ifb device, which the wifi model needs: ${ifb.stderr.trim()}`);
    const tbf = tryCommand(['tc', '-n', PROBE_NS, 'qdisc', 'add', 'dev', PROBE_IFB, 'root', 'handle', '1:', 'tbf', 'rate', '10mbit', 'burst', '16kb', 'limit', '64kb']);
    if (tbf.status !== 0) throw new LabError('ERR_LAB_NO_NETNS', `the kernel has no tbf qdisc, which every model needs: ${tbf.stderr.trim()}`);
    const netem = tryCommand(['tc', '-n', PROBE_NS, 'qdisc', 'add', 'dev', PROBE_IFB, 'parent', '1:1', 'handle', '10:', 'netem', 'delay', '1ms']);
    return { netem: netem.status === 0, cgroup };
  } finally {
    tryCommand(['ip', 'netns', 'del', PROBE_NS]);
  }
}
