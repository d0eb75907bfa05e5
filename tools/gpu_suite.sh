#!/usr/bin/env bash
# tools/gpu_suite.sh: on a machine with a GPU, from the repository root: build, run the
# whole test suite (GPU tests included), then compute-sanitizer memcheck and racecheck
# on the GPU tests. Logs go to ${OUT:-gpu-out}/. Exit status: the test suite's.
#   OUT=gpu-out bash tools/gpu_suite.sh
set -u
out=${OUT:-gpu-out}
mkdir -p "$out"
build=${BUILD:-build-gpu}
arch=${CUDA_ARCH:-90}
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$arch"
  cmake --build "$build" -j "$(nproc)"
} > "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 2; }

ctest --test-dir "$build" --output-on-failure -j 4 > "$out/ctest.log" 2>&1
status=$?
grep -E "tests passed|Failed|Not Run|Skipped|\*\*\*" "$out/ctest.log" | tail -30

if [ "${SANITIZE:-1}" = 1 ] && command -v compute-sanitizer >/dev/null; then
  BUILD=$build OUT=$out bash "$(dirname "$0")/gpu_sanitize.sh"
fi
# The real-time sample at 1080p: frames per second, latency, and nothing allocated.
"$build/bin/realtime" pipelines/demo.json --frames 300 > "$out/realtime.log" 2>&1
"$build/bin/realtime" pipelines/duotone.json --param mix.opacity --frames 300 >> "$out/realtime.log" 2>&1
"$build/bin/pipefuse" info > "$out/info.log" 2>&1
exit $status
