#!/usr/bin/env bash
# Runs on the lent GPU machine (packed by scripts/gpu-trip/pack.sh): says in one line whether
# Dawn finds a Vulkan device and why not, times one replica's step on WebGPU and on the CPU
# backend (test/bench/gpu-step.ts), and the same step natively in PyTorch where it exists.
# Everything lands in $OUT (the device tool's folder that comes back), or build/gpu-trip/out.
#   GPU_TRIP_QUICK=1  two timed steps and the small shares only: a check of the trip itself.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$here/out}
mkdir -p "$out"
work=$(mktemp -d)
tar -C "$work" -xJf "$here/payload.tar.xz"
export LD_LIBRARY_PATH="$work/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
quick=()
if [ "${GPU_TRIP_QUICK:-0}" = 1 ]; then quick=(--steps 2 --cnn-shares 32); fi
bench() { (cd "$work" && ./node bench.mjs "$@"); }

status=0
bench --diagnose 2>"$out/diagnose.err" | tee "$out/vulkan.txt"
if [ ! -s "$out/vulkan.txt" ]; then status=1; echo "the diagnosis failed:"; tail -5 "$out/diagnose.err"; fi
if grep -q '^Vulkan: ' "$out/vulkan.txt"; then
  bench --backend webgpu "${quick[@]}" --out "$out/gpu-webgpu.json" >"$out/gpu-webgpu.log" 2>&1 || { status=1; tail -5 "$out/gpu-webgpu.log"; }
fi
bench --backend cpu --cnn-shares 32 "${quick[@]}" --out "$out/gpu-cpu.json" >"$out/gpu-cpu.log" 2>&1 || { status=1; tail -5 "$out/gpu-cpu.log"; }
if python3 -c 'import torch' 2>/dev/null; then
  python3 "$work/native_step.py" --out "$out/native.json" ${GPU_TRIP_QUICK:+--steps 2} >"$out/native.log" 2>&1 || { status=1; tail -5 "$out/native.log"; }
else
  echo "no PyTorch here: the native step was not run" | tee "$out/native.log"
fi
cp "$here/commit.txt" "$out/" 2>/dev/null
ls -la "$out"
exit $status
