#!/bin/sh
# Playwright's Chromium inside a lab namespace. Playwright talks to the browser over pipes on
# file descriptors 3 and 4 (--remote-debugging-pipe); `exec` keeps them, and so does
# `ip netns exec`, which execs too. The namespace comes from WEBRING_LAB_NS, which
# lab/chromium.ts sets in the environment it launches this script with.
set -eu
: "${WEBRING_LAB_NS:?WEBRING_LAB_NS must name the lab namespace to run Chromium in}"
exec ip netns exec "$WEBRING_LAB_NS" "${CHROMIUM_PATH:-/usr/bin/chromium}" "$@"
