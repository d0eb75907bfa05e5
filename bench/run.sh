#!/usr/bin/env bash
# bench/run.sh: the whole benchmark suite in one call, on the GPU machine, from the repo root.
#
#   source .devdeps/env.sh; OUT=bench-out bash bench/run.sh
#
# Builds build-gpu (Release, sm_90, no tests) unless build-gpu/bin/pipefuse exists (then
# only an incremental `cmake --build`, a no-op when it is up to date), builds
# the standalone CUDA baselines (bench/copy_bw.cu, bench/article_naive.cu, bench/hand_chain.cu,
# bench/launch_floor.cu), writes the
# generated pipeline files, runs every benchmark and writes under ${OUT:-bench-out}/:
#   json/NAME.json     raw results (pipefuse bench --json, the baselines, PyTorch)
#   logs/NAME.log      stderr of each command, and the `pipefuse check` plans
#   manifest.tsv       name, exit status, seconds and the exact command of every run
#   benchmarks.md      the markdown section for docs/benchmarks.md (bench/report.py)
# A benchmark that fails is reported as failed in benchmarks.md; the others go on.
#
# Environment: OUT, BUILD (default build-gpu), REPEATS (pipefuse runs per figure, default
# 3; the figure is the median), SKIP_TORCH=1, SKIP_COMPILE=1 (no torch.compile),
# SKIP_1000=1 (no 1000-stage chain: NVRTC takes 2 to 4 minutes to compile its fused
# kernel, which it does in the background while the other benchmarks run), DEADLINE_S
# (default 235: seconds after the start, build included, past which repeats are cut
# and the remaining optional steps are skipped, so the whole call stays near 4 minutes;
# what was skipped is said in the log and in benchmarks.md). benchmarks.md is rewritten
# after every step, so even a run cut short leaves one.
set -u
cd "$(dirname "$0")/.." || exit 2

OUT=${OUT:-bench-out}
BUILD=${BUILD:-build-gpu}
REPEATS=${REPEATS:-3}
DEADLINE_S=${DEADLINE_S:-235}
PF=$BUILD/bin/pipefuse
P=$OUT/pipelines
mkdir -p "$OUT/json" "$OUT/logs" "$P" "$OUT/bin" || exit 2
MANIFEST=$OUT/manifest.tsv
: > "$MANIFEST"
T_START=$(date +%s)
export PYTHONUNBUFFERED=1

say() { printf '[%s +%3ss] %s\n' "$(date +%T)" "$(($(date +%s) - T_START))" "$*"; }
left() { echo $((DEADLINE_S - ($(date +%s) - T_START))); }
# skipped NAME WHY: a step left out for time, for the report.
skipped() {
    printf '%s\t%s\t0\t%s\n' "$1" "skipped" "$2" >> "$MANIFEST"
    say "  skipped $1: $2"
}
report() {
    python3 bench/report.py "$OUT" > "$OUT/benchmarks.md.tmp" 2> "$OUT/logs/report.log" &&
        mv "$OUT/benchmarks.md.tmp" "$OUT/benchmarks.md" ||
        say "report.py failed: $(tail -c 600 "$OUT/logs/report.log")"
}

# run_to NAME TIMEOUT CMD...: stdout to json/NAME.json, stderr to logs/NAME.log; the
# command (without the timeout wrapper) and its status go to the manifest.
run_to() {
    local name=$1 to=$2 rc t0 t1
    shift 2
    t0=$(date +%s.%N)
    timeout -k 5 "$to" "$@" > "$OUT/json/$name.json" 2> "$OUT/logs/$name.log"
    rc=$?
    t1=$(date +%s.%N)
    [ $rc -eq 124 ] || [ $rc -eq 137 ] && echo "bench/run.sh: timed out after ${to} s" >> "$OUT/logs/$name.log"
    printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$(awk "BEGIN{printf \"%.1f\", $t1 - $t0}")" "$*" >> "$MANIFEST"
    return $rc
}

valid_json() { python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$1" 2> /dev/null; }

# Modes of a pipefuse bench JSON that report an error (other than no device).
errored_modes() {
    python3 - "$1" << 'EOF' 2> /dev/null
import json, sys
d = json.load(open(sys.argv[1]))
print(" ".join(m["mode"] for m in d.get("modes", []) if "error" in m and m["error"] != "no CUDA device"))
EOF
}

# pf_bench NAME TIMEOUT REPS BENCH-ARGS...: `pipefuse bench ARGS --json`, REPS times
# (fewer when the deadline is near). With RMODE=MODE set, runs after the first time only
# that mode (the figure a target is about), to save time. When the first run does not
# give JSON (a crash), or gives modes with errors, those modes are run again one per
# process (NAME.r1.MODE.json), so one failing mode cannot take the others down with it.
# bench/report.py takes, per mode, the median over every run that has it.
pf_bench() {
    local name=$1 to=$2 reps=$3 r m bad
    shift 3
    for r in $(seq 1 "$reps"); do
        if [ "$r" -gt 1 ] && [ "$(left)" -lt 90 ]; then
            say "  $name: $((r - 1)) run(s) only (deadline near)"
            break
        fi
        if [ "$r" -gt 1 ] && [ -n "${RMODE:-}" ]; then
            run_to "$name.r$r" "$to" "$PF" bench "$@" --mode "$RMODE" --json
            continue
        fi
        run_to "$name.r$r" "$to" "$PF" bench "$@" --json
        local rc=$?
        if ! valid_json "$OUT/json/$name.r$r.json"; then
            say "  $name run $r: no JSON (exit $rc): $(tail -c 300 "$OUT/logs/$name.r$r.log" | tr '\n' ' ')"
            if [ "$r" -eq 1 ] && ! printf '%s\n' "$@" | grep -qx -- --mode; then
                say "  $name: running each mode in its own process"
                for m in cpu cuda-eager-unfused cuda-eager-fused cuda-graph-unfused cuda-graph-fused; do
                    run_to "$name.r1.$m" "$to" "$PF" bench "$@" --mode "$m" --json ||
                        say "    $name $m: exit $? $(tail -c 200 "$OUT/logs/$name.r1.$m.log" | tr '\n' ' ')"
                done
            fi
            return 1
        fi
        if [ "$r" -eq 1 ]; then
            bad=$(errored_modes "$OUT/json/$name.r1.json")
            if [ -n "$bad" ]; then
                say "  $name: modes with errors: $bad; running each in its own process"
                for m in $bad; do
                    run_to "$name.r1.$m" "$to" "$PF" bench "$@" --mode "$m" --json ||
                        say "    $name $m: exit $? $(tail -c 200 "$OUT/logs/$name.r1.$m.log" | tr '\n' ' ')"
                done
            fi
        fi
    done
    return 0
}

# ---- Build ---------------------------------------------------------------------------------
say "bench/run.sh: OUT=$OUT BUILD=$BUILD REPEATS=$REPEATS"
{
    date -u +%Y-%m-%dT%H:%M:%SZ
    if [ -n "${PIPEFUSE_COMMIT:-}" ]; then
        echo "$PIPEFUSE_COMMIT"
        echo "?"
    elif git rev-parse --short HEAD > /dev/null 2>&1; then
        git rev-parse --short HEAD
        git status --porcelain 2> /dev/null | wc -l
    else
        echo "unknown (no git here; set PIPEFUSE_COMMIT)"
        echo "?"
    fi
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv,noheader 2> /dev/null || echo "nvidia-smi unavailable"
    nvcc --version 2> /dev/null | tail -1
    nproc
} > "$OUT/env.txt"
if [ ! -x "$PF" ]; then
    say "building $BUILD"
    if ! { cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
        -DPIPEFUSE_TESTS=OFF && cmake --build "$BUILD"; } > "$OUT/logs/build.log" 2>&1; then
        say "build failed: tail of $OUT/logs/build.log:"
        tail -30 "$OUT/logs/build.log"
    fi
else
    cmake --build "$BUILD" > "$OUT/logs/build.log" 2>&1 ||
        say "incremental build of $BUILD failed (running the existing binaries): $(tail -c 300 "$OUT/logs/build.log")"
fi
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
for prog in copy_bw article_naive hand_chain launch_floor; do
    "$NVCC" -O3 -arch=sm_90 "bench/$prog.cu" -o "$OUT/bin/$prog" > "$OUT/logs/nvcc_$prog.log" 2>&1 ||
        say "nvcc bench/$prog.cu failed: $(tail -c 300 "$OUT/logs/nvcc_$prog.log")"
done
"$PF" info > "$OUT/logs/info.log" 2>&1 || say "pipefuse info failed: $(tail -c 300 "$OUT/logs/info.log")"
say "built ($(grep -m1 -i 'devices' "$OUT/logs/info.log" 2> /dev/null))"

# ---- Pipelines -----------------------------------------------------------------------------
for k in 1 4 8 10 16 100 1000; do
    python3 bench/gen_chain.py chain "$k" -o "$P/chain$k.json"
done
python3 bench/gen_chain.py mixed -o "$P/mixed.json"

# The 1000-stage chain's fused kernel: compile it now, in the background, into the disk
# kernel cache that the later `pipefuse bench` reads (the same source, options and arch).
PREWARM_PID=
if [ "${SKIP_1000:-0}" != 1 ]; then
    mkdir -p "$OUT/kernels"
    PREWARM_T0=$(date +%s)
    timeout -k 5 300 "$PF" check "$P/chain1000.json" --size 256x256 --dump-kernels "$OUT/kernels" \
        --arch 90 > "$OUT/logs/prewarm_chain1000.check.txt" 2> "$OUT/logs/prewarm_chain1000.log" &
    PREWARM_PID=$!
fi

# ---- Baselines -----------------------------------------------------------------------------
say "copy bandwidth"
run_to copy_bw 60 "$OUT/bin/copy_bw" || say "  copy_bw failed: $(tail -c 300 "$OUT/logs/copy_bw.log")"
say "frame floor (a one-kernel frame, launched as pipefuse launches it)"
run_to launch_floor 120 "$OUT/bin/launch_floor" || say "  launch_floor failed: $(tail -c 300 "$OUT/logs/launch_floor.log")"
say "point chains fused by hand"
run_to hand_chain 60 "$OUT/bin/hand_chain" || say "  hand_chain failed: $(tail -c 300 "$OUT/logs/hand_chain.log")"
say "article, naive CUDA"
run_to article_naive 120 "$OUT/bin/article_naive" || say "  article_naive failed: $(tail -c 300 "$OUT/logs/article_naive.log")"

# ---- pipefuse ------------------------------------------------------------------------------
say "article, pipefuse"
pf_bench article 120 "$REPEATS" pipelines/article.json --size 1024x1024 --format grayf --frames 1000
"$PF" check pipelines/article.json --size 1024x1024 > "$OUT/logs/article.check.txt" 2>&1

for k in 10 100; do
    say "256x256 RGBA8, $k stages"
    pf_bench "small_chain$k" 120 "$REPEATS" "$P/chain$k.json" --size 256x256 --frames 500
done
report

for k in 1 4 8 16; do
    say "3840x2160 RGBA8, $k stages"
    RMODE=cuda-graph-fused pf_bench "chain4k_$k" 120 "$REPEATS" "$P/chain$k.json" --size 3840x2160 --frames 200
    "$PF" check "$P/chain$k.json" --size 3840x2160 > "$OUT/logs/chain4k_$k.check.txt" 2>&1
done

say "3840x2160 mixed pipeline"
RMODE=cuda-graph-fused pf_bench mixed4k 150 "$REPEATS" "$P/mixed.json" --size 3840x2160 --frames 100
"$PF" check "$P/mixed.json" --size 3840x2160 > "$OUT/logs/mixed4k.check.txt" 2>&1
report

# ---- PyTorch eager and CUDA Graphs ----------------------------------------------------------
# min(CAP, time left - RESERVE) seconds, at least 0
budget_for() { local t=$(($(left) - $2)); [ "$t" -gt "$1" ] && t=$1; [ "$t" -lt 0 ] && t=0; echo "$t"; }
if [ "${SKIP_TORCH:-0}" != 1 ]; then
    say "PyTorch eager and CUDA Graphs"
    cases=(--case "small_chain10=$P/chain10.json:256x256:eager+graph"
        --case "small_chain100=$P/chain100.json:256x256:eager+graph")
    for k in 1 4 8 16; do cases+=(--case "chain4k_$k=$P/chain$k.json:3840x2160:eager+graph"); done
    cases+=(--case "mixed4k=$P/mixed.json:3840x2160:eager+graph")
    to=$(budget_for 120 40)
    [ "$to" -lt 30 ] && to=30
    run_to torch "$to" python3 bench/torch_bench.py "${cases[@]}" -o "$OUT/json/torch.json" ||
        say "  torch_bench: exit $?: $(tail -c 300 "$OUT/logs/torch.log" | tr '\n' ' ')"
    report
fi

# ---- torch.compile ---------------------------------------------------------------------------
if [ "${SKIP_TORCH:-0}" != 1 ] && [ "${SKIP_COMPILE:-0}" != 1 ]; then
    to=$(budget_for 100 70)
    if [ "$to" -ge 30 ]; then
        say "PyTorch torch.compile (at most $to s)"
        cases=(--case "chain4k_8=$P/chain8.json:3840x2160:compile"
            --case "mixed4k=$P/mixed.json:3840x2160:compile")
        for k in 1 4 16; do cases+=(--case "chain4k_$k=$P/chain$k.json:3840x2160:compile"); done
        run_to torch_compile "$to" python3 bench/torch_bench.py "${cases[@]}" -o "$OUT/json/torch_compile.json" ||
            say "  torch_bench compile: exit $?: $(tail -c 300 "$OUT/logs/torch_compile.log" | tr '\n' ' ')"
    else
        skipped torch_compile "$(left) s left before the deadline"
    fi
    report
fi

# ---- Split ---------------------------------------------------------------------------------
# Budgets for 1, 4, 16, 64 bands of the longest unit. The planner splits a unit into
# ceil(predicted / (budget / 2)) bands, so a budget of 2 T / (N - 0.5), T the longest
# unit's predicted time, gives it N bands. The plans (bands per unit) are kept in logs/.
# Unsplit and 16 bands (the target) first; one run each, a second while there is time.
say "8192x8192 split"
"$PF" check "$P/mixed.json" --size 8192x8192 --max-launch-ms 1000000 > "$OUT/logs/split_probe.check.txt" 2>&1
TMAX=$(python3 -c '
import re, sys
t = [float(m) for m in re.findall(r"bands \d+ \(~([0-9.]+) ms each\)", open(sys.argv[1]).read())]
print(max(t) if t else "")' "$OUT/logs/split_probe.check.txt" 2> /dev/null)
split_run() { # split_run NAME FILE REPS
    if [ "$(left)" -lt 15 ]; then
        skipped "$1" "$(left) s left before the deadline"
        return
    fi
    RMODE= pf_bench "$1" 60 "$3" "$2" --size 8192x8192 --mode cuda-graph-fused --frames 20
}
split_run split_unsplit "$P/mixed.json" 1
if [ -n "$TMAX" ]; then
    for n in 1 4 16 64; do
        budget=$(python3 -c "print('%.6g' % (2 * $TMAX / ($n - 0.5)))")
        python3 bench/gen_chain.py mixed --max-launch-ms "$budget" -o "$P/mixed_split$n.json"
        "$PF" check "$P/mixed_split$n.json" --size 8192x8192 > "$OUT/logs/split_b$n.check.txt" 2>&1
    done
    split_run split_b16 "$P/mixed_split16.json" 1
    split_run split_b4 "$P/mixed_split4.json" 1
    split_run split_b64 "$P/mixed_split64.json" 1
    split_run split_b1 "$P/mixed_split1.json" 1
    if [ "$REPEATS" -gt 1 ] && [ "$(left)" -gt 60 ]; then # a second run of the pair the target compares
        run_to split_unsplit.r2 60 "$PF" bench "$P/mixed.json" --size 8192x8192 --mode cuda-graph-fused --frames 20 --json
        run_to split_b16.r2 60 "$PF" bench "$P/mixed_split16.json" --size 8192x8192 --mode cuda-graph-fused --frames 20 --json
    fi
else
    say "  cannot read the predicted unit times from logs/split_probe.check.txt: split skipped"
fi
report

# ---- The arithmetic check ---------------------------------------------------------------------
if [ "${SKIP_TORCH:-0}" != 1 ]; then
    say "same arithmetic: pipefuse run against PyTorch"
    to=$(budget_for 60 10)
    [ "$to" -lt 20 ] && to=20
    run_to verify "$to" python3 bench/torch_bench.py --verify "$P/chain10.json" --verify "$P/mixed.json" \
        --pipefuse "$PF" --size 256x256 --workdir "$OUT/verify" ||
        say "  verify: exit $?: $(tail -c 300 "$OUT/logs/verify.log" | tr '\n' ' ')"
fi

# ---- Submit cost at 1000 stages ------------------------------------------------------------
if [ -n "$PREWARM_PID" ]; then
    say "256x256 RGBA8, 1000 stages"
    # One process per mode, unfused first. The fused modes need the kernel that the
    # background compile puts into the cache: wait for it while there is time.
    for m in cuda-graph-unfused cuda-eager-unfused; do
        to=$(budget_for 60 0)
        [ "$to" -lt 20 ] && to=20
        run_to "small_chain1000.r1.$m" "$to" "$PF" bench "$P/chain1000.json" --size 256x256 \
            --frames 100 --mode "$m" --json ||
            say "  $m: exit $? $(tail -c 200 "$OUT/logs/small_chain1000.r1.$m.log" | tr '\n' ' ')"
    done
    # the kernel may take NVRTC about 4 minutes there: wait past the deadline by up to 25 s
    while kill -0 "$PREWARM_PID" 2> /dev/null && [ "$(left)" -gt -25 ]; do sleep 1; done
    if kill -0 "$PREWARM_PID" 2> /dev/null; then
        kill "$PREWARM_PID" 2> /dev/null
        wait "$PREWARM_PID" 2> /dev/null
        printf '%s\t%s\t%s\t%s\n' prewarm_chain1000 killed "$(($(date +%s) - PREWARM_T0))" \
            "$PF check $P/chain1000.json --size 256x256 --dump-kernels $OUT/kernels --arch 90" >> "$MANIFEST"
        skipped small_chain1000.fused "the NVRTC compile of the 1000-stage fused kernel had not finished after $(($(date +%s) - PREWARM_T0)) s"
    else
        wait "$PREWARM_PID"
        rc=$?
        printf '%s\t%s\t%s\t%s\n' prewarm_chain1000 "$rc" "$(($(date +%s) - PREWARM_T0))" \
            "$PF check $P/chain1000.json --size 256x256 --dump-kernels $OUT/kernels --arch 90" >> "$MANIFEST"
        say "  fused kernel compiled (exit $rc) in $(($(date +%s) - PREWARM_T0)) s"
        for m in cuda-graph-fused cuda-eager-fused; do
            to=$(budget_for 60 0)
            [ "$to" -lt 15 ] && to=15
            run_to "small_chain1000.r1.$m" "$to" "$PF" bench "$P/chain1000.json" --size 256x256 \
                --frames 100 --mode "$m" --json ||
                say "  $m: exit $? $(tail -c 200 "$OUT/logs/small_chain1000.r1.$m.log" | tr '\n' ' ')"
        done
    fi
fi

# ---- Report --------------------------------------------------------------------------------
report
# Everything raw in one archive too, for tools that bring back only a few files.
tar -czf "$OUT/results.tar.gz" -C "$OUT" env.txt manifest.tsv json logs pipelines 2> /dev/null
say "done: $OUT/benchmarks.md"
exit 0
