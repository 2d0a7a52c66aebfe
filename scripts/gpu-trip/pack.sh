#!/usr/bin/env bash
# Packs the GPU bench for a lent machine that has no Node, no git and no network
# (docs/benchmarks.md, "A real GPU"): build/gpu-trip/ holds run.sh and payload.tar.xz with
#   - bench.mjs: test/bench/gpu-step.ts bundled by esbuild, the commit baked in;
#   - node: this machine's Node binary (linked to nothing but the C and C++ runtimes);
#   - node_modules/webgpu: the package's index.js and linux-x64/dawn.node (Dawn, Chromium's WebGPU);
#   - lib/libvulkan.so.1: Debian's Vulkan loader;
#   - native_step.py: the same step in PyTorch, run where PyTorch exists.
# About 30 MB: under the 64 MiB a device call carries. Then, in one call:
#   run(command: "bash build/gpu-trip/run.sh", carry: ["build/gpu-trip"])
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out="$root/build/gpu-trip"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
commit=$(git -C "$root" rev-parse --short HEAD)
if [ -n "$(git -C "$root" status --porcelain --untracked-files=no)" ]; then commit="$commit+changes"; fi

"$root/node_modules/.bin/esbuild" "$root/test/bench/gpu-step.ts" --bundle --platform=node --format=esm --target=node20 \
  --external:webgpu --define:process.env.WEBRING_COMMIT="\"$commit\"" \
  --banner:js="import { createRequire as packedRequire } from 'node:module'; const require = packedRequire(import.meta.url);" \
  --outfile="$stage/bench.mjs" --log-level=warning
cp "$(readlink -f "$(command -v node)")" "$stage/node"
mkdir -p "$stage/node_modules/webgpu/dist/linux-x64" "$stage/lib"
cp "$root/node_modules/webgpu/index.js" "$root/node_modules/webgpu/package.json" "$stage/node_modules/webgpu/"
cp "$root/node_modules/webgpu/dist/linux-x64/dawn.node" "$stage/node_modules/webgpu/dist/linux-x64/"
loader=$(dpkg -L libvulkan1 2>/dev/null | grep -m1 'libvulkan\.so\.1$' || true)
if [ -z "$loader" ]; then echo "pack: Debian's libvulkan1 is missing: apt-get install -y libvulkan1 (npm run ensure-system-packages)" >&2; exit 1; fi
cp "$(readlink -f "$loader")" "$stage/lib/libvulkan.so.1"
cp "$root/scripts/gpu-trip/native_step.py" "$stage/"
rm -rf "$out"
mkdir -p "$out"
tar -C "$stage" -cf - . | xz -T0 -6 > "$out/payload.tar.xz"
cp "$root/scripts/gpu-trip/run.sh" "$out/run.sh"
echo "$commit" > "$out/commit.txt"
du -sh "$out" | sed 's/^/pack: /'
