#!/usr/bin/env bash
# bench/realtime_bench.sh: host-frame loops against the PCIe floor (docs/realtime.md),
# on the GPU machine, from the repo root:
#
#   BUILD=build-rt OUT=rt-out bash bench/realtime_bench.sh
#
# For 1920x1080 and 3840x2160 RGBA8, a one-stage `invert` pipeline and
# pipelines/demo.json, with pageable, pinned and device frames: samples/realtime with 3
# frames in flight (per-frame time), and again with 2 in flight (latency p50/p99);
# per size one run of the baselines (pinned upload, download, both overlapped: the PCIe
# floor; host memcpy of the frame on one thread and at best). Writes OUT/runs.jsonl
# (one JSON object per run), OUT/logs/ and OUT/realtime.md (the table, with the
# targets checked), all from this one run. Builds BUILD (Release) if it has no
# bin/realtime. FRAMES (default 300) frames per run.
set -u
cd "$(dirname "$0")/.." || exit 2
BUILD=${BUILD:-build-rt}
OUT=${OUT:-rt-out}
FRAMES=${FRAMES:-300}
mkdir -p "$OUT/logs" || exit 2
if [ ! -x "$BUILD/bin/realtime" ]; then
    cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release > "$OUT/logs/build.log" 2>&1 &&
        cmake --build "$BUILD" >> "$OUT/logs/build.log" 2>&1 ||
        { echo "build failed: see $OUT/logs/build.log"; exit 2; }
fi
RT=$BUILD/bin/realtime
: > "$OUT/runs.jsonl"
status=0
run() { # run NAME ARGS...: one JSON line, or a note of the failure
    local name=$1
    shift
    if timeout -k 5 300 "$RT" "$@" --json > "$OUT/logs/$name.json" 2> "$OUT/logs/$name.log"; then
        cat "$OUT/logs/$name.json" >> "$OUT/runs.jsonl"
    else
        echo "failed: $RT $* (see $OUT/logs/$name.log)"
        printf '{"failed": true, "name": "%s"}\n' "$name" >> "$OUT/runs.jsonl"
        status=1
    fi
}
date -u +"date: %Y-%m-%d %H:%M UTC" > "$OUT/meta.txt"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> "$OUT/meta.txt" 2>&1
git log -1 --format='commit: %h %s' >> "$OUT/meta.txt" 2>&1
for size in 1920x1080 3840x2160; do
    run "floor-$size" --stage invert --backend cuda --size "$size" --frames 50 --device --floor
    for pipe in invert demo; do
        if [ "$pipe" = invert ]; then what=(--stage invert); else what=(pipelines/demo.json); fi
        for mode in pageable pinned device; do
            flag=()
            [ "$mode" != pageable ] && flag=(--"$mode")
            run "$pipe-$size-$mode-k3" "${what[@]}" --backend cuda --size "$size" \
                --frames "$FRAMES" --in-flight 3 "${flag[@]}"
            run "$pipe-$size-$mode-k2" "${what[@]}" --backend cuda --size "$size" \
                --frames "$FRAMES" --in-flight 2 "${flag[@]}"
        done
    done
done
python3 bench/realtime_report.py "$OUT" > "$OUT/realtime.md" || status=1
cat "$OUT/realtime.md"
exit $status
