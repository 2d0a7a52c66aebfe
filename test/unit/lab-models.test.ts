/**
 * The classroom lab's network models as commands (lab/network-models.ts): what each model
 * shapes and where, before any of it runs as root. The lab test (test/lab/) measures them.
 */
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  AIR_IFB,
  LAB_PREFIX,
  NET_NS,
  SERVER_NS,
  appliedDelayMs,
  internet,
  labCommands,
  PROFILE_NAMES,
  profileByName,
  schoolUplink,
  schoolWifiIsolated,
  isolationCommands,
  isIsolated,
  LAB_SERVER_PORT,
  SERVER_ADDRESS,
  serverEndpoint,
  shapingCommands,
  tbfArgs,
  topologyCommands,
  wifi,
  wiredLab,
  workerEndpoint,
  workerNs,
  type Command,
} from '../../lab/network-models';
import { checkCpuBudget, quotaUsFor } from '../../lab/cpu-caps';
import { LabError } from '../../lab/lab-error';

const line = (c: Command) => c.join(' ');
const has = (cmds: Command[], text: string) => cmds.some((c) => line(c) === text);
/** The rate of the tbf on `dev`, or null when none. */
function tbfRate(cmds: Command[], dev: string): string | null {
  const c = cmds.find((c) => c.includes('tbf') && c[c.indexOf('dev') + 1] === dev);
  return c ? c[c.indexOf('rate') + 1]! : null;
}

test('the topology: a namespace per worker, one for the server and one for the network, veths into the bridge, the control path', () => {
  const cmds = topologyCommands(3);
  for (const ns of [NET_NS, SERVER_NS, workerNs(0), workerNs(1), workerNs(2)]) assert.ok(has(cmds, `ip netns add ${ns}`), ns);
  assert.ok(!has(cmds, `ip netns add ${workerNs(3)}`));
  const w1 = workerEndpoint(1);
  assert.ok(has(cmds, `ip -n ${NET_NS} link add ${w1.portLink} type veth peer name ${w1.innerLink} netns ${w1.ns}`));
  assert.ok(has(cmds, `ip -n ${NET_NS} link set ${w1.portLink} master ${LAB_PREFIX}-br`));
  assert.ok(has(cmds, `ip -n ${w1.ns} addr add 198.18.0.11/24 dev ${w1.innerLink}`));
  assert.ok(has(cmds, `ip -n ${SERVER_NS} addr add 198.18.0.1/24 dev ${serverEndpoint().innerLink}`));
  assert.ok(has(cmds, `ip link add ${LAB_PREFIX}-c type veth peer name ${LAB_PREFIX}-cs netns ${SERVER_NS}`));
});

test('every name the lab makes carries the prefix and fits an interface name; every address is in 198.18.0.0/15', () => {
  for (const model of [wifi({ serverOnAir: true }), wiredLab(), internet(), schoolUplink()]) {
    const cmds = labCommands(model, 64, true);
    for (const c of cmds) {
      const names: Array<{ name: string; isLink: boolean }> = [];
      c.forEach((word, i) => {
        const before = c[i - 1] ?? '';
        if (['-n', 'netns'].includes(before) && word !== 'add') names.push({ name: word, isLink: false });
        else if (before === 'add' && c[c.indexOf('add') - 1] === 'netns') names.push({ name: word, isLink: false });
        else if (['dev', 'name', 'master'].includes(before) || (before === 'add' && c.includes('link'))) names.push({ name: word, isLink: true });
      });
      for (const { name, isLink } of names.filter((x) => x.name !== 'lo')) {
        assert.ok(name.startsWith(LAB_PREFIX), `${name} in ${line(c)}`);
        if (isLink) assert.ok(name.length <= 15, `${name} is longer than an interface name may be, in ${line(c)}`);
      }
      for (const addr of line(c).match(/\d+\.\d+\.\d+\.\d+/g) ?? []) assert.match(addr, /^198\.(18|19)\./, line(c));
    }
  }
});

test('wifi: every client port, both ways, is redirected through the one air ifb, whose tbf is the air rate', () => {
  const n = 4;
  const cmds = shapingCommands(wifi({ airMbit: 40 }), n, false);
  assert.ok(has(cmds, `ip -n ${NET_NS} link add ${AIR_IFB} type ifb`));
  assert.equal(tbfRate(cmds, AIR_IFB), '40mbit');
  const redirect = `protocol all u32 match u32 0 0 action mirred egress redirect dev ${AIR_IFB}`;
  for (let i = 0; i < n; i++) {
    const port = workerEndpoint(i).portLink;
    assert.ok(has(cmds, `tc -n ${NET_NS} qdisc add dev ${port} handle ffff: ingress`), `ingress qdisc on ${port}`);
    assert.ok(has(cmds, `tc -n ${NET_NS} filter add dev ${port} parent ffff: ${redirect}`), `upload of ${port} on the air`);
    assert.ok(has(cmds, `tc -n ${NET_NS} qdisc add dev ${port} root handle 1: htb`), `htb root on ${port}`);
    assert.ok(has(cmds, `tc -n ${NET_NS} filter add dev ${port} parent 1: ${redirect}`), `download of ${port} on the air`);
  }
  // The server is wired to the AP by default, at its own rate, and not on the air.
  const srv = serverEndpoint();
  assert.ok(!has(cmds, `tc -n ${NET_NS} filter add dev ${srv.portLink} parent 1: ${redirect}`));
  assert.equal(tbfRate(cmds, srv.portLink), '1000mbit');
  assert.equal(tbfRate(cmds, srv.uplinkIfb), '1000mbit');
  const onAir = shapingCommands(wifi({ serverOnAir: true }), n, false);
  assert.ok(has(onAir, `tc -n ${NET_NS} filter add dev ${srv.portLink} parent ffff: ${redirect}`));
  assert.ok(has(onAir, `tc -n ${NET_NS} filter add dev ${srv.portLink} parent 1: ${redirect}`));
  assert.equal(tbfRate(onAir, srv.portLink), null);
});

test('wired-lab: every port shaped each way on its own, at the port rate', () => {
  const cmds = shapingCommands(wiredLab({ portMbit: 50 }), 3, false);
  for (let i = 0; i < 3; i++) {
    const w = workerEndpoint(i);
    assert.equal(tbfRate(cmds, w.portLink), '50mbit', 'download');
    assert.equal(tbfRate(cmds, w.uplinkIfb), '50mbit', 'upload');
    assert.ok(has(cmds, `tc -n ${NET_NS} filter add dev ${w.portLink} parent ffff: protocol all u32 match u32 0 0 action mirred egress redirect dev ${w.uplinkIfb}`));
  }
  assert.ok(!cmds.some((c) => c.includes(AIR_IFB)), 'no shared medium');
});

test('internet: asymmetric site links and the server behind its own link', () => {
  const cmds = shapingCommands(internet({ downMbit: 20, upMbit: 4, serverMbit: 300 }), 2, false);
  for (let i = 0; i < 2; i++) {
    assert.equal(tbfRate(cmds, workerEndpoint(i).portLink), '20mbit');
    assert.equal(tbfRate(cmds, workerEndpoint(i).uplinkIfb), '4mbit');
  }
  assert.equal(tbfRate(cmds, serverEndpoint().portLink), '300mbit');
  assert.equal(tbfRate(cmds, serverEndpoint().uplinkIfb), '300mbit');
});

test('school-uplink: the internet model with every site behind a 2 Mbit/s uplink, and the internet\'s delay where netem exists', () => {
  const profile = schoolUplink();
  assert.equal(profile.name, 'internet', 'a profile of the internet model: built, bounded and validated as one');
  const cmds = shapingCommands(profile, 3, false);
  for (let i = 0; i < 3; i++) {
    assert.equal(tbfRate(cmds, workerEndpoint(i).uplinkIfb), '2mbit', 'upload');
    assert.equal(tbfRate(cmds, workerEndpoint(i).portLink), '20mbit', 'download');
  }
  assert.equal(tbfRate(cmds, serverEndpoint().portLink), '200mbit');
  assert.deepEqual(cmds, shapingCommands(internet({ downMbit: 20, upMbit: 2 }), 3, false), 'the lab\'s internet lines with the uplink at 2 Mbit/s');
  assert.ok(!cmds.some((c) => c.includes('netem')), 'no netem: rates only');
  assert.ok(has(shapingCommands(profile, 3, true), `tc -n ${NET_NS} qdisc add dev ${workerEndpoint(0).uplinkIfb} parent 1:1 handle 10: netem delay 20ms`));
  assert.equal(appliedDelayMs(profile, true), 20);
  assert.equal(appliedDelayMs(profile, false), 0);
  assert.deepEqual(PROFILE_NAMES, ['wifi', 'wired-lab', 'internet', 'school-uplink', 'school-wifi-isolated']);
  assert.deepEqual(profileByName('school-uplink'), profile);
  assert.throws(() => profileByName('dial-up'), (e: unknown) => e instanceof LabError && e.code === 'ERR_LAB_USAGE');
});

test('school-wifi-isolated: Wi-Fi whose access point isolates its clients, each student reaching only the teacher\'s TCP port', () => {
  const profile = schoolWifiIsolated();
  assert.equal(profile.name, 'wifi', 'the Wi-Fi model, shaped and validated as one');
  assert.deepEqual(profileByName('school-wifi-isolated'), profile);
  const n = 3;
  const cmds = labCommands(profile, n, false);
  assert.deepEqual(cmds.slice(0, -isolationCommands(profile, n).length), labCommands(wifi(), n, false), 'the same air, the isolation after it');
  for (let i = 0; i < n; i++) {
    const w = workerEndpoint(i);
    assert.ok(has(cmds, `ip -n ${NET_NS} link set dev ${w.portLink} type bridge_slave isolated on`), 'the access point forwards between no two students');
    const rules = cmds.filter((c) => c.includes(w.ns) && c.includes('rule')).map(line);
    assert.deepEqual(rules, [
      `ip -n ${w.ns} rule add pref 100 to ${SERVER_ADDRESS} ipproto tcp dport ${LAB_SERVER_PORT} lookup main`,
      `ip -n ${w.ns} rule add pref 110 blackhole`,
    ], 'the teacher\'s TCP port, and nothing else anywhere (no UDP: no WebRTC, no TURN; no ICE-TCP to any of the server\'s addresses)');
  }
  assert.ok(!cmds.some((c) => c.includes(serverEndpoint().portLink) && c.includes('isolated')), 'the server\'s port is not isolated: every student reaches it');

  const mixed = schoolWifiIsolated('half');
  assert.deepEqual([0, 1, 2, 3].map((i) => isIsolated(mixed, i)), [false, true, false, true], 'every other student, the chief open');
  const mixedCmds = isolationCommands(mixed, 4);
  assert.ok(!mixedCmds.some((c) => c.includes(workerEndpoint(0).ns) || c.includes(workerEndpoint(0).portLink)), 'an open student keeps its links');
  assert.equal(mixedCmds.filter((c) => c.includes('bridge_slave')).length, 2);
  assert.deepEqual(isolationCommands(wifi(), 4), [], 'the other profiles isolate nobody');
});

test('netem delays only where the kernel has netem; the delay applied says so', () => {
  assert.ok(!labCommands(internet(), 2, false).some((c) => c.includes('netem')));
  const withNetem = shapingCommands(internet({ delayMs: 25 }), 2, true);
  assert.ok(has(withNetem, `tc -n ${NET_NS} qdisc add dev ${workerEndpoint(0).portLink} parent 1:1 handle 10: netem delay 25ms`));
  assert.equal(appliedDelayMs(internet(), true), 20);
  assert.equal(appliedDelayMs(internet(), false), 0);
  assert.equal(appliedDelayMs(wifi(), true), 2);
});

test('tbf: the bucket and the queue grow with the rate, with floors for slow links', () => {
  const size = (mbit: number) => {
    const a = tbfArgs(mbit);
    return { burst: Number(a[a.indexOf('burst') + 1]), limit: Number(a[a.indexOf('limit') + 1]) };
  };
  assert.deepEqual(size(5), { burst: 15_140, limit: 131_072 });
  assert.deepEqual(size(1000), { burst: 250_000, limit: 6_250_000 });
  assert.ok(size(100).burst >= 10 * 1514);
  assert.throws(() => tbfArgs(0), (e: unknown) => e instanceof LabError && e.code === 'ERR_LAB_USAGE');
});

test('worker counts outside the lab are refused with a code', () => {
  assert.throws(() => topologyCommands(0), (e: unknown) => e instanceof LabError && e.code === 'ERR_LAB_USAGE');
  assert.throws(() => topologyCommands(65), (e: unknown) => e instanceof LabError && e.code === 'ERR_LAB_USAGE');
});

test('CPU caps: quota per period, and caps that add up to more than the machine are refused', () => {
  assert.equal(quotaUsFor(0.2), 4_000, "a laptop's quota on the default 20 ms period");
  assert.equal(quotaUsFor(0.2, 100_000), 20_000);
  assert.equal(quotaUsFor(0.05, 20_000), 1_000, "a phone's quota on a 20 ms period is the kernel's least");
  assert.throws(() => quotaUsFor(0.05, 10_000), (e: unknown) => e instanceof LabError && e.code === 'ERR_LAB_USAGE' && /at least 20000/.test(e.message), 'a quota the kernel would refuse is a usage error naming the period that works');
  assert.ok(Math.abs(checkCpuBudget(['laptop', 'chromebook', { cores: 0.4 }], 2) - 0.7) < 1e-9);
  assert.throws(() => checkCpuBudget([{ cores: 1 }, { cores: 1.5 }], 2), (e: unknown) => e instanceof LabError && e.code === 'ERR_LAB_CPU_OVERCOMMIT');
});

test('docs/lab-models.md shows exactly the commands the models emit (lab/print-commands.ts)', () => {
  const page = readFileSync(new URL('../../docs/lab-models.md', import.meta.url), 'utf8');
  for (const cmds of [topologyCommands(2), ...[wifi(), wiredLab(), internet()].map((m) => shapingCommands(m, 2, false)), isolationCommands(schoolWifiIsolated(), 2)]) {
    for (const c of cmds) assert.ok(page.includes(`\n${line(c)}\n`), `docs/lab-models.md lacks: ${line(c)}`);
  }
});
