#!/usr/bin/env bash
# tools/gpu_sanitize.sh: compute-sanitizer memcheck on every GPU test of BUILD (or those in
# MEMCHECK_TESTS) and racecheck on RACECHECK_TESTS, each run as ctest would (at most
# SAN_TIMEOUT seconds, default 600), with
# PF_TEST_QUICK=1. Logs: $OUT/sanitizer.log, one line a test in $OUT/sanitizer-summary.log.
#   BUILD=build-gpu OUT=gpu-out bash tools/gpu_sanitize.sh
set -u
out=${OUT:-gpu-out}
mkdir -p "$out"
build=${BUILD:-build-gpu}
command -v compute-sanitizer >/dev/null || { echo "no compute-sanitizer"; exit 2; }
{
  # memcheck on every GPU test; racecheck (slow) where kernels share memory. Each test
  # runs as ctest would (its command and environment, from ctest's JSON listing), so a
  # test named other than its binary (test_stage_modes_gpu, test_watchdog_gpu) or one
  # that is a script runs what it is. (test_engine_lost traps on purpose: memcheck
  # would report its trap.)
  ctest --test-dir "$build" -L gpu --show-only=json-v1 > "$out/gpu_tests.json"
  gpu_cmd() { # NAME: two lines, the environment (K=V...) and the command of gpu test NAME
    python3 - "$out/gpu_tests.json" "$1" << 'PY'
import json, shlex, sys
for t in json.load(open(sys.argv[1]))["tests"]:
    if t["name"] != sys.argv[2]:
        continue
    env = [p["value"] for p in t.get("properties", []) if p["name"] == "ENVIRONMENT"]
    print(" ".join(shlex.quote(x) for x in (env[0] if env else [])))
    print(" ".join(shlex.quote(x) for x in t["command"]))
PY
  }
  gpu_tests=$(python3 -c 'import json,sys; print(" ".join(t["name"] for t in json.load(open(sys.argv[1]))["tests"]))' \
              "$out/gpu_tests.json" | tr ' ' '\n' | grep -v '^test_engine_lost$')
  for tool in memcheck racecheck; do
    tests=${MEMCHECK_TESTS:-$gpu_tests}
    [ $tool = racecheck ] && tests=${RACECHECK_TESTS-test_stage_kernels test_fused_reduce}
    for t in $tests; do
      { read -r envs; read -r cmd; } < <(gpu_cmd "$t")
      [ -n "${cmd:-}" ] || { echo "$tool $t: no such gpu test" | tee -a "$out/sanitizer-summary.log"; continue; }
      echo "== $tool $t: $envs $cmd" >> "$out/sanitizer.log"
      eval "env PF_TEST_QUICK=1 $envs timeout ${SAN_TIMEOUT:-600} compute-sanitizer --tool $tool --error-exitcode 9 \
        --target-processes all $cmd" >> "$out/sanitizer.log" 2>&1
      rc=$?
      cmd=
      echo "$tool $t: exit $rc" | tee -a "$out/sanitizer-summary.log"
    done
  done
}
