#!/usr/bin/env bash
# Tests and benchmarks run programs that npm cannot provide, from Debian's packages:
#   chromium      Playwright drives it; a Playwright browser download cannot work offline
#   coturn        test/e2e/turn.spec.ts relays three tabs through a real TURN server
#   redis-server  test/server/redis-cluster.test.ts and test/e2e/cluster.spec.ts share rooms through it
#   haproxy       test/e2e/cluster.spec.ts puts it in front of two signaling nodes
#   iproute2      ip and tc: the classroom lab (test/lab, npm run lab) builds its network namespaces and shapes their links
#   libvulkan1    the Vulkan loader: Dawn (the `webgpu` package) gives Node a WebGPU adapter over Chromium's
#                 SwiftShader ICD, so test/unit/task-models.test.ts trains every task's models on WebGPU in Node too
#   firefox-esr, webkit2gtk-driver, xvfb
#                 test/e2e/engines.spec.ts: Firefox and WebKitGTK tabs (its MiniBrowser on an Xvfb display)
#                 train in one class with Chromium ones
# Each one missing is installed with apt-get (needs root, or sudo, as in CI). A normal user
# who has neither goes on without them: the tests that need one skip, each saying so, unless
# WEBRING_REQUIRE_ALL=1 (CI: .ci/run), where a missing package fails here. This list is
# the one place that names them: "<file the tests use> <Debian package that ships it>".
# Installing coturn or redis-server may start their system services on the default ports;
# the tests never use those: they start their own processes, on free ports, without the
# system config files.
set -euo pipefail
REQUIRED=(
  "${CHROMIUM_PATH:-/usr/bin/chromium} chromium"
  "/usr/bin/turnserver coturn"
  "/usr/bin/redis-server redis-server"
  "/usr/sbin/haproxy haproxy"
  "/usr/sbin/ip iproute2"
  "/usr/sbin/tc iproute2"
  "/usr/lib/x86_64-linux-gnu/libvulkan.so.1 libvulkan1"
  "/usr/bin/firefox-esr firefox-esr"
  "/usr/bin/WebKitWebDriver webkit2gtk-driver"
  "/usr/bin/Xvfb xvfb"
)

missing=()
for entry in "${REQUIRED[@]}"; do
  read -r binary package <<<"$entry"
  if [ ! -e "$binary" ]; then
    echo "webring: $binary is missing; it comes with Debian's $package package" >&2
    missing+=("$package")
  fi
done
if [ "${#missing[@]}" -eq 0 ]; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null 2>&1 || ! sudo -n true 2>/dev/null; then
    if [ "${WEBRING_REQUIRE_ALL:-0}" = "1" ]; then
      echo "webring: WEBRING_REQUIRE_ALL=1 and ${missing[*]} cannot be installed without root or sudo" >&2
      exit 1
    fi
    echo "webring: not installing ${missing[*]} (needs root or sudo): the tests that need them will say they were skipped; to run them: sudo apt-get install -y ${missing[*]}" >&2
    exit 0
  fi
  SUDO=sudo
else
  SUDO=
fi
export DEBIAN_FRONTEND=noninteractive
echo "webring: installing ${missing[*]}" >&2
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq "${missing[@]}" >/dev/null

status=0
for entry in "${REQUIRED[@]}"; do
  read -r binary package <<<"$entry"
  if [ ! -e "$binary" ]; then
    echo "webring: $package installed, but $binary is still missing" >&2
    status=1
  fi
done
if [ "$status" -ne 0 ]; then
  echo "webring: for Chromium elsewhere, set CHROMIUM_PATH" >&2
  exit 1
fi
