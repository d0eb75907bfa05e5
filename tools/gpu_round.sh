#!/usr/bin/env bash
# tools/gpu_round.sh: on the GPU machine, from the repository root: build into build-gpu
# (kept when the machine is warm), then the steps named on the command line, each with
# its log under $OUT. Steps: suite (ctest -j 16, whole suite), rerun (failed tests again,
# one at a time), sanitize (tools/gpu_suite.sh's sanitizer part), and any other word is
# run as a shell command. Times in $OUT/times.log.
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
t0=$(date +%s)
stamp() { echo "$(( $(date +%s) - t0 )) s: $*" >> "$out/times.log"; }
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 &&
  cmake --build build-gpu -j "$(nproc)"; } > "$out/build.log" 2>&1 || { tail -60 "$out/build.log"; exit 2; }
stamp build
for step in "$@"; do
  case $step in
  suite)
    ctest --test-dir build-gpu --output-on-failure -j 16 --timeout ${SUITE_TIMEOUT:-300} > "$out/ctest.log" 2>&1
    stamp "suite rc $?"
    grep -E "tests passed|\(Failed\)|\(Timeout\)|Not Run|\(Skipped\)|\*\*\*" "$out/ctest.log" | tail -40 ;;
  rerun)
    for t in $(sed -n 's/^[[:space:]]*[0-9]* - \([A-Za-z0-9_]*\) (\(Failed\|Timeout\|Exception\).*/\1/p' "$out/ctest.log"); do
      ctest --test-dir build-gpu --output-on-failure -R "^$t\$" > "$out/rerun-$t.log" 2>&1
      echo "rerun $t: rc $?"; stamp "rerun $t"
    done ;;
  *) bash -c "$step" > "$out/step-$(echo "$step" | tr -c 'A-Za-z0-9' _ | cut -c1-40).log" 2>&1
     echo "step '$step': rc $?"; stamp "$step" ;;
  esac
done
cat "$out/times.log"
