#!/bin/bash
# bench/batch_gpu.sh: `pipefuse run` on the GPU against the CPU, the codec floor, pyvips
# and OpenCV, with the defaults, on three sets of photos and four pipelines, in one run.
#
#   bench/batch_gpu.sh [--pipefuse BIN] [--dir WORK] [--threads N] [--quick]
#                      [--timeout S] [--keep]
#
# Sets, made from samples/images by pipefuse itself (resize, --backend cpu) and kept in
# WORK between runs (hard links for the copies):
#   small  480 photos of about 0.25 MP (4 shapes of each of the 6 photos, 20 copies)
#   large  48 photos of 12 MP (4000x3000 and 3000x4000, 4 copies)
#   mixed  108 photos of 0.3 to 24 MP (7 sizes, more small than large)
#   big    one 48 MP photo (8000x6000)
# Pipelines: light (half size, brightness and contrast, gaussian sigma 1: written to
# WORK), pipelines/demo.json, pipelines/thumbnail.json, heavy (gaussians of sigma 6 and
# 12, unsharp, median3, sobel, blends: written to WORK).
# For each set: the codec floor (a copy pipeline: pipefuse's own decode and encode of
# the same files, same settings, --backend cpu), then for each pipeline `--backend cpu`
# and `--backend cuda` with the defaults, and pyvips and OpenCV doing the light pipeline
# with every core (bench/batch_gpu_peers.py). The big photo: the copy pipeline (its
# decode and encode alone, from the run's per-file summary), demo.json on cpu and cuda.
# Every step runs under a time limit (--timeout, default 240 s); a failure or a timeout
# is a row of the table and the others go on. Without a CUDA device the cuda rows say
# "no device"; without pyvips or OpenCV their rows say "not installed".
#
# Results in $OUT (default WORK/report): batch_gpu.md (the table), batch_gpu.tsv (raw),
# logs/ (each step's output). Columns: seconds (wall), files/s, the floor's seconds over
# the run's (1.0: at the codec's speed), peak host RSS in MB of the largest process
# (wait4's ru_maxrss, as GNU time's %M), peak device memory in MB (nvidia-smi's
# memory.used sampled every 0.2 s, less what was used before the step), and the run's
# per-file averages of decode, engine and encode milliseconds.
#
# SETS="small large", PIPES="light heavy" and RUNS="cpu auto" (environment) run only those
# sets (big among them: the 48 MP photo), pipelines and runs (floor, cpu, cuda, auto: the
# defaults, --backend auto; peers: pyvips and OpenCV).
# --quick: fewer and smaller files (48 small, 6 of 0.75 MP, 18 mixed to 3 MP, a 3 MP
# "big" photo): a smoke test of a few minutes on two cores.
# On the GPU machine (pyvips from the wheels, no internet):
#   python3 -m pip install --target /tmp/pyv --no-index --find-links .devdeps/wheels \
#       pyvips pyvips-binary
#   PYTHONPATH=/tmp/pyv OUT=bench-out bash bench/batch_gpu.sh --pipefuse build-gpu/bin/pipefuse
set -u
HERE=$(cd "$(dirname "$0")/.." && pwd)
PF=${PIPEFUSE:-$HERE/build/bin/pipefuse}
WORK=${TMPDIR:-/tmp}/pipefuse_batch_gpu
THREADS=$(nproc)
QUICK=0
STEP_TIMEOUT=240
KEEP=0
while [ $# -gt 0 ]; do
    case $1 in
    --pipefuse) PF=$2; shift 2 ;;
    --dir) WORK=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --quick) QUICK=1; shift ;;
    --timeout) STEP_TIMEOUT=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    -h | --help) sed -n '2,41p' "$0"; exit 0 ;;
    *) echo "batch_gpu.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
[ -x "$PF" ] || { echo "batch_gpu.sh: no pipefuse at $PF (build first, or --pipefuse BIN)" >&2; exit 2; }
PF=$(cd "$(dirname "$PF")" && pwd)/$(basename "$PF")
OUT=${OUT:-$WORK/report}
mkdir -p "$WORK" "$OUT/logs" || exit 1
OUT=$(cd "$OUT" && pwd)
T0=$(date +%s)

# ---- sets ----------------------------------------------------------------------------------
if [ "$QUICK" = 1 ]; then
    SMALL="500x500:2 578x433:2 433x578:2 612x408:2"
    LARGE="1000x750:1"
    MIXED="632x474:1 1000x750:1 2000x1500:1"
    BIG=2000x1500
    TAG=quick
else
    SMALL="500x500:20 578x433:20 433x578:20 612x408:20"
    LARGE="4000x3000:4 3000x4000:4"
    MIXED="632x474:6 1000x750:4 1414x1061:3 2000x1500:2 2828x2121:1 4000x3000:1 5657x4243:1"
    BIG=8000x6000
    TAG=full
fi
cat >"$WORK/resize.json" <<'EOF'
{"pipefuse": 1, "inputs": ["x"], "stages": [
  {"id": "size", "op": "resize", "inputs": ["x"], "params": {"width": 64, "height": 64, "mode": "bilinear"}}],
 "outputs": {"out": "size"}}
EOF
# sized WxH: the 6 photos at that size, made once, in WORK/src/WxH
sized() {
    local d=$WORK/src/$1
    [ -f "$d/.complete" ] && return 0
    rm -rf "$d" && mkdir -p "$d" || return 1
    "$PF" run "$WORK/resize.json" "$HERE"/samples/images/*.png -o "$d" --backend cpu -q \
        --set size.width="${1%x*}" --set size.height="${1#*x}" || return 1
    touch "$d/.complete"
}
# make_set NAME "WxH:COPIES ...": links COPIES copies of each photo at each size
make_set() {
    local d=$WORK/sets/$1
    [ -f "$d/.complete-$TAG" ] && return 0
    rm -rf "$d" && mkdir -p "$d" || return 1
    local spec
    for spec in $2; do
        local size=${spec%%:*} copies=${spec##*:}
        sized "$size" || return 1
        for src in "$WORK/src/$size"/*.png; do
            local b
            b=$(basename "$src" .png)
            for k in $(seq 1 "$copies"); do
                ln "$src" "$d/${b}_${size}_$k.png" 2>/dev/null || cp "$src" "$d/${b}_${size}_$k.png" || return 1
            done
        done
    done
    touch "$d/.complete-$TAG"
}
echo "batch_gpu: making the sets in $WORK/sets"
make_set small "$SMALL" && make_set large "$LARGE" && make_set mixed "$MIXED" || {
    echo "batch_gpu.sh: cannot make the sets" >&2
    exit 1
}
if [ ! -f "$WORK/sets/big/.complete-$TAG" ]; then
    rm -rf "$WORK/sets/big" && mkdir -p "$WORK/sets/big"
    "$PF" run "$WORK/resize.json" "$HERE/samples/images/astronaut.png" -o "$WORK/sets/big" --backend cpu -q \
        --set size.width="${BIG%x*}" --set size.height="${BIG#*x}" && touch "$WORK/sets/big/.complete-$TAG" || {
        echo "batch_gpu.sh: cannot make the big photo" >&2
        exit 1
    }
fi

# ---- pipelines -------------------------------------------------------------------------------
P=$WORK/pipelines
mkdir -p "$P"
cat >"$P/copy.json" <<'EOF'
{"pipefuse": 1, "inputs": ["x"], "stages": [
  {"id": "copy", "op": "linear", "inputs": ["x"], "params": {"a": 1, "b": 0}}],
 "outputs": {"out": "copy"}}
EOF
# light: brightness 0.03 then contrast 1.1 about 0.5 is x * 1.1 - 0.017 in [0, 1], so
# the peers' linear map is a = 1.1, b = -0.017 * 255 = -4.335 on 8-bit samples
cat >"$P/light.json" <<'EOF'
{"pipefuse": 1, "name": "light", "inputs": ["photo"], "stages": [
  {"id": "half", "op": "resize", "params": {"scale": 0.5, "mode": "area"}},
  {"id": "bright", "op": "brightness", "params": {"amount": 0.03}},
  {"id": "punch", "op": "contrast", "params": {"amount": 1.1}},
  {"id": "blur", "op": "gaussian", "params": {"sigma": 1.0}}],
 "outputs": {"out": "blur"}}
EOF
cat >"$P/heavy.json" <<'EOF'
{"pipefuse": 1, "name": "heavy", "inputs": ["photo"], "stages": [
  {"id": "soft", "op": "gaussian", "inputs": ["photo"], "params": {"sigma": 6.0}},
  {"id": "wide", "op": "gaussian", "inputs": ["photo"], "params": {"sigma": 12.0}},
  {"id": "glow", "op": "blend", "inputs": ["soft", "wide"], "params": {"opacity": 0.5}},
  {"id": "sharp", "op": "unsharp", "inputs": ["photo"], "params": {"sigma": 2.0, "amount": 0.8}},
  {"id": "clean", "op": "median3", "inputs": ["sharp"]},
  {"id": "edges", "op": "sobel", "inputs": ["clean"]},
  {"id": "mix", "op": "blend", "inputs": ["clean", "glow"], "params": {"opacity": 0.3}},
  {"id": "out", "op": "add", "inputs": ["mix", "edges"], "params": {"scale": 0.2}}],
 "outputs": {"out": "out"}}
EOF
cp "$HERE/pipelines/demo.json" "$HERE/pipelines/thumbnail.json" "$P/"

# ---- measuring one step ---------------------------------------------------------------------
# measure.py LOG TIMEOUT GPU CMD...: runs CMD in its own process group with its output in
# LOG, killed (TERM, then KILL) past TIMEOUT seconds; prints "seconds rc rss_kb gpu_mb".
cat >"$WORK/measure.py" <<'EOF'
import os, resource, shutil, signal, subprocess, sys, threading, time
log, limit, gpu, cmd = sys.argv[1], float(sys.argv[2]), sys.argv[3] == "1", sys.argv[4:]
smi = shutil.which("nvidia-smi") if gpu else None
def used():
    try:
        out = subprocess.run([smi, "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=5).stdout.split()
        return max(int(x) for x in out)
    except Exception:
        return None
base = used() if smi else None
peak = [base]
done = threading.Event()
def sample():
    while not done.wait(0.2):
        u = used()
        if u is not None and (peak[0] is None or u > peak[0]):
            peak[0] = u
t = threading.Thread(target=sample, daemon=True) if base is not None else None
if t:
    t.start()
t0 = time.monotonic()
with open(log, "wb") as f:
    try:
        p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
    except OSError as e:
        f.write(("cannot start: %s\n" % e).encode())
        print("0 127 - -")
        sys.exit(0)
    try:
        rc = p.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGTERM)
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        f.write(("\nbatch_gpu: killed after %g s\n" % limit).encode())
        rc = 124
secs = time.monotonic() - t0
done.set()
if t:
    t.join()
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
gpu_mb = "-" if base is None or peak[0] is None else str(peak[0] - base)
print("%.3f %d %d %s" % (secs, rc, rss, gpu_mb))
EOF

# want RUN: whether RUNS (environment: floor cpu cuda auto peers; default all) names it
want() { case " ${RUNS:-floor cpu cuda auto peers} " in *" $1 "*) return 0 ;; esac; return 1; }
HAS_GPU=0
"$PF" info 2>/dev/null | grep -q 'compute capability' && HAS_GPU=1
TSV=$OUT/batch_gpu.tsv
printf 'set\tpipeline\trun\tfiles\tseconds\tfiles_per_s\tvs_floor\trss_mb\tgpu_mb\tdecode_ms\tengine_ms\tencode_ms\tstatus\n' >"$TSV"
FLOOR=
# row SET PIPELINE RUN FILES SECONDS RSS_KB GPU_MB LOG STATUS: one line of the TSV
row() {
    local fps=- vs=- rss=- dec=- eng=- enc=-
    if [ "$9" = ok ]; then
        fps=$(awk "BEGIN { printf \"%.1f\", $4 / $5 }")
        [ -n "$FLOOR" ] && vs=$(awk "BEGIN { printf \"%.2f\", $FLOOR / $5 }")
    fi
    [ "$6" != - ] && rss=$(awk "BEGIN { printf \"%.0f\", $6 / 1024 }")
    # pipefuse's summary: "per file, on average: decode X ms, engine Y ms (...), encode and write Z ms"
    local per
    per=$(grep -h 'per file, on average' "$8" 2>/dev/null | tail -1)
    if [ -n "$per" ]; then
        dec=$(sed -n 's/.*decode \([0-9.]*\) ms.*/\1/p' <<<"$per")
        eng=$(sed -n 's/.*engine \([0-9.]*\) ms.*/\1/p' <<<"$per")
        enc=$(sed -n 's/.*encode and write \([0-9.]*\) ms.*/\1/p' <<<"$per")
    fi
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "$fps" "$vs" \
        "$rss" "$7" "${dec:--}" "${eng:--}" "${enc:--}" "$9" >>"$TSV"
    printf '  %-6s %-10s %-6s %8s s  %s\n' "$1" "$2" "$3" "$5" "$9"
}
# step SET PIPELINE RUN GPU CMD...: runs CMD into a fresh output folder, records a row
step() {
    local set=$1 pipe=$2 run=$3 gpu=$4
    shift 4
    local log=$OUT/logs/$set-$pipe-$run.log files
    files=$(find "$WORK/sets/$set" -name '*.png' | wc -l)
    rm -rf "$WORK/out" && mkdir -p "$WORK/out"
    local r secs rc rss gmb status=ok
    r=$(python3 "$WORK/measure.py" "$log" "$STEP_TIMEOUT" "$gpu" "$@")
    read -r secs rc rss gmb <<<"$r"
    local outs
    outs=$(find "$WORK/out" -name '*.png' | wc -l)
    if [ "$rc" = 124 ]; then
        status="timeout ($STEP_TIMEOUT s)"
    elif [ "$rc" = 3 ] && [ "$pipe" = light ] && [ "$run" != cpu ] && [ "$run" != cuda ]; then
        status="not installed"
    elif [ "$rc" != 0 ]; then
        status="failed (exit $rc): $(grep -v '^\[' "$log" | tail -1 | tr '\t' ' ' | cut -c1-120)"
    elif [ "$outs" -lt "$files" ]; then
        status="failed: $outs of $files outputs"
    fi
    [ "$status" = ok ] || rss=-
    [ "$status" = "not installed" ] && secs=-
    row "$set" "$pipe" "$run" "$files" "$secs" "${rss:--}" "${gmb:--}" "$log" "$status"
    [ "$run" = floor ] && [ "$status" = ok ] && FLOOR=$secs
    return 0
}
no_device() {
    row "$1" "$2" cuda "$(find "$WORK/sets/$1" -name '*.png' | wc -l)" - - - /dev/null "no device"
}

PFR=("$PF" --threads "$THREADS" run)
# the per-file times come after the summary, with --verbose where the CLI has it
"$PF" run --help 2>&1 | grep -q -- '--verbose' && PFR+=(--verbose)
echo "batch_gpu: $(nproc) cores, --threads $THREADS, cuda device: $([ $HAS_GPU = 1 ] && echo yes || echo no)"
for set in ${SETS:-small large mixed}; do
    [ "$set" = big ] && continue
    FLOOR=
    want floor && step "$set" copy floor 0 "${PFR[@]}" "$P/copy.json" "$WORK/sets/$set" -o "$WORK/out" --backend cpu
    for pipe in ${PIPES:-light demo thumbnail heavy}; do
        want cpu && step "$set" "$pipe" cpu 0 "${PFR[@]}" "$P/$pipe.json" "$WORK/sets/$set" -o "$WORK/out" --backend cpu
        if [ $HAS_GPU = 1 ]; then
            want cuda && step "$set" "$pipe" cuda 1 "${PFR[@]}" "$P/$pipe.json" "$WORK/sets/$set" -o "$WORK/out" --backend cuda
        else
            want cuda && no_device "$set" "$pipe"
        fi
        # the defaults: --backend auto's choice, whatever it is
        want auto && step "$set" "$pipe" auto "$HAS_GPU" "${PFR[@]}" "$P/$pipe.json" "$WORK/sets/$set" -o "$WORK/out"
    done
    want peers || continue
    for lib in vips cv2; do
        step "$set" light "$lib" 0 python3 "$HERE/bench/batch_gpu_peers.py" "$lib" "$WORK/sets/$set" "$WORK/out" \
            --threads "$THREADS" --zlib 1 --scale 0.5 --a 1.1 --b -4.335 --sigma 1.0
    done
done
case " ${SETS:-big} " in *" big "*) ;; *) SKIP_BIG=1 ;; esac
[ "${SKIP_BIG:-0}" = 1 ] || {
FLOOR=
step big copy floor 0 "${PFR[@]}" "$P/copy.json" "$WORK/sets/big" -o "$WORK/out" --backend cpu
step big demo cpu 0 "${PFR[@]}" "$P/demo.json" "$WORK/sets/big" -o "$WORK/out" --backend cpu
if [ $HAS_GPU = 1 ]; then
    step big demo cuda 1 "${PFR[@]}" "$P/demo.json" "$WORK/sets/big" -o "$WORK/out" --backend cuda
else
    no_device big demo
fi
}

# ---- the table ---------------------------------------------------------------------------------
{
    echo "## Batch on the GPU ($(date -u +%Y-%m-%d), $TAG)"
    echo
    echo "$(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), --threads $THREADS;" \
        "GPU: $(command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name --format=csv,noheader | head -1 || echo none);" \
        "$($PF --version 2>/dev/null | head -1)"
    echo
    echo "| set | pipeline | run | files | seconds | files/s | vs floor | host MB | device MB | decode ms | engine ms | encode ms | status |"
    echo "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    tail -n +2 "$TSV" | while IFS=$'\t' read -r s p r f sec fps vs rss g dec eng enc st; do
        echo "| $s | $p | $r | $f | $sec | $fps | $vs | $rss | $g | $dec | $eng | $enc | $st |"
    done
    echo
    echo "vs floor: the codec floor's seconds (copy pipeline, same files, --backend cpu) over the run's."
    echo "host MB: peak RSS of the largest process; device MB: peak nvidia-smi memory.used during the step"
    echo "less before it. decode/engine/encode ms: pipefuse's per-file averages (each on its own thread)."
    echo "Total wall time of this benchmark: $(($(date +%s) - T0)) s."
} >"$OUT/batch_gpu.md"
cat "$OUT/batch_gpu.md"
[ "$KEEP" = 1 ] || rm -rf "$WORK/out"
