#!/usr/bin/env bash
# Tests and benchmarks drive Debian's Chromium; a Playwright browser download cannot work
# offline. Install the distribution package when it is missing (needs root, as in CI).
set -euo pipefail
CHROMIUM="${CHROMIUM_PATH:-/usr/bin/chromium}"
if [ -x "$CHROMIUM" ]; then
  exit 0
fi
echo "webring: $CHROMIUM is missing; installing Debian's chromium package" >&2
if [ "$(id -u)" -ne 0 ]; then
  SUDO=sudo
else
  SUDO=
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq chromium >/dev/null
if [ ! -x "$CHROMIUM" ]; then
  echo "webring: chromium installed, but $CHROMIUM is still missing; set CHROMIUM_PATH" >&2
  exit 1
fi
"$CHROMIUM" --version
