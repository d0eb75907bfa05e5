#!/bin/bash
# bench/batch_bench.sh: batch PNG throughput of `pipefuse run` against the codec floor
# and libvips, on one folder of mixed sizes.
#
#   bench/batch_bench.sh [--pipefuse BIN] [--dir WORK] [--threads N] [--files N] [--keep]
#
# 1. Writes WORK/in: at least 500 PNGs made from samples/images, each photo resized by
#    pipefuse to 1.1, 1.5, 2.2, 3.5 and 6.5 times its size (about 0.3 to 12 megapixels),
#    more small files than large (40, 20, 12, 8, 4 copies per photo and size).
# 2. Runs, over the same files and thread count (--threads, default every core):
#    - codec floor: pipefuse run with a pipeline whose output is its input (decode, one
#      copy, encode; pipefuse's own PNG settings), on the CPU;
#    - pipefuse run pipelines/demo.json on the CPU;
#    - the same on the GPU, when `pipefuse info` lists a CUDA device;
#    - vips (libvips-tools), when installed: per file, the closest operations to demo.json
#      (linear for brightness and contrast, colourspace-free saturation skipped,
#      gaussblur sigma 4, the same zlib level), N files at a time with xargs -P.
# 3. Prints a table: seconds, files/s, input megapixels/s, MB/s of PNG read, peak
#    resident memory (GNU time), and each run against the codec floor.
set -u
HERE=$(cd "$(dirname "$0")/.." && pwd)
PF=${PIPEFUSE:-$HERE/build/bin/pipefuse}
WORK=${TMPDIR:-/tmp}/pipefuse_batch_bench
THREADS=$(nproc)
KEEP=0
SCALE=1 # copies per photo and size are multiplied by this (--files sets it)
# calc EXPR DIGITS: arithmetic with awk (bc is not on every machine)
calc() { awk "BEGIN { printf \"%.$2f\", $1 }"; }
while [ $# -gt 0 ]; do
    case $1 in
    --pipefuse) PF=$2; shift 2 ;;
    --dir) WORK=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --files) SCALE=$(( ($2 + 503) / 504 )); shift 2 ;;
    --keep) KEEP=1; shift ;;
    -h | --help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "batch_bench.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
[ -x "$PF" ] || { echo "batch_bench.sh: no pipefuse at $PF (build first, or --pipefuse BIN)" >&2; exit 2; }
TIME=/usr/bin/time
[ -x "$TIME" ] || TIME=
mkdir -p "$WORK" || exit 1

# ---- 1. the folder ---------------------------------------------------------------------
IN=$WORK/in
if [ ! -f "$IN/.complete-$SCALE" ]; then
    rm -rf "$IN" "$WORK/sizes"
    mkdir -p "$IN" "$WORK/sizes"
    cat >"$WORK/resize.json" <<'EOF'
{"pipefuse": 1, "inputs": ["x"], "stages": [
  {"id": "size", "op": "resize", "inputs": ["x"], "params": {"scale": 1.0, "mode": "bilinear"}}],
 "outputs": {"out": "size"}}
EOF
    set -- 1.1:40 1.5:20 2.2:12 3.5:8 6.5:4
    for sc in "$@"; do
        f=${sc%%:*}
        "$PF" run "$WORK/resize.json" "$HERE"/samples/images/*.png -o "$WORK/sizes/$f" \
            --set size.scale="$f" --backend cpu -q || exit 1
    done
    n=0
    for sc in "$@"; do
        f=${sc%%:*} copies=$((${sc##*:} * SCALE))
        for src in "$WORK/sizes/$f"/*.png; do
            b=$(basename "$src" .png)
            for k in $(seq 1 "$copies"); do
                ln "$src" "$IN/${b}_x${f}_$k.png" 2>/dev/null || cp "$src" "$IN/${b}_x${f}_$k.png"
                n=$((n + 1))
            done
        done
    done
    touch "$IN/.complete-$SCALE"
fi
FILES=$(ls "$IN"/*.png | wc -l)
MB=$(find "$IN" -name '*.png' -printf '%s\n' | awk '{ t += $1 } END { printf "%.0f", t / 1e6 }')
MPIX=$(python3 - "$IN" <<'EOF' 2>/dev/null
import os, struct, sys
t = 0
for n in os.listdir(sys.argv[1]):
    if n.endswith('.png'):
        with open(os.path.join(sys.argv[1], n), 'rb') as f:
            h = f.read(24)
        w, h = struct.unpack('>II', h[16:24])
        t += w * h
print('%.1f' % (t / 1e6))
EOF
)
echo "batch: $FILES PNG files, $MB MB, ${MPIX:-?} megapixels, in $IN; $THREADS threads"

# ---- 2. the runs -------------------------------------------------------------------------
cat >"$WORK/copy.json" <<'EOF'
{"pipefuse": 1, "inputs": ["x"], "stages": [], "outputs": {"out": "x"}}
EOF
if ! "$PF" check "$WORK/copy.json" >/dev/null 2>&1; then # no stages allowed: one linear a=1
    cat >"$WORK/copy.json" <<'EOF'
{"pipefuse": 1, "inputs": ["x"], "stages": [
  {"id": "copy", "op": "linear", "inputs": ["x"], "params": {"a": 1, "b": 0}}],
 "outputs": {"out": "copy"}}
EOF
fi

RESULTS=$WORK/results.tsv
: >"$RESULTS"
# run NAME COMMAND...: times it, records seconds and peak RSS (KB)
run() {
    local name=$1
    shift
    rm -rf "$WORK/out"
    mkdir -p "$WORK/out"
    local t0 t1 rss=-
    t0=$(date +%s.%N)
    if [ -n "$TIME" ]; then
        "$TIME" -f '%M' -o "$WORK/rss" "$@" >"$WORK/$name.log" 2>&1
    else
        "$@" >"$WORK/$name.log" 2>&1
    fi
    local rc=$?
    t1=$(date +%s.%N)
    [ -n "$TIME" ] && rss=$(tail -1 "$WORK/rss")
    local outs
    outs=$(find "$WORK/out" -name '*.png' | wc -l)
    local secs
    secs=$(calc "$t1 - $t0" 3)
    printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$secs" "$rss" "$rc" "$outs" >>"$RESULTS"
    echo "  $name: $secs s, exit $rc, $outs outputs"
}

PFT=("$PF" --threads "$THREADS")
run "codec floor (pipefuse, cpu)" "${PFT[@]}" run "$WORK/copy.json" "$IN" -o "$WORK/out" -q --backend cpu
run "pipefuse demo.json cpu" "${PFT[@]}" run "$HERE/pipelines/demo.json" "$IN" -o "$WORK/out" -q --backend cpu
if "$PF" info 2>/dev/null | grep -q 'compute capability'; then
    run "codec floor (pipefuse, cuda)" "${PFT[@]}" run "$WORK/copy.json" "$IN" -o "$WORK/out" -q --backend cuda
    run "pipefuse demo.json cuda" "${PFT[@]}" run "$HERE/pipelines/demo.json" "$IN" -o "$WORK/out" -q --backend cuda
else
    echo "  pipefuse demo.json cuda: no CUDA device, not run"
fi
if command -v vips >/dev/null; then
    # brightness 0.04 and contrast 1.15 as one linear map, gaussian sigma 4, PNG at zlib 2
    cat >"$WORK/vips1.sh" <<'EOF'
#!/bin/bash
f=$1 out=$2/$(basename "$1")
t=$(mktemp -u /tmp/vbXXXXXX)
vips linear "$f" "$t.v" 1.15 -13.2 --uchar && vips gaussblur "$t.v" "$t.g.v" 4 &&
    vips pngsave "$t.g.v" "$out" --compression 2
rc=$?
rm -f "$t.v" "$t.g.v"
exit $rc
EOF
    chmod +x "$WORK/vips1.sh"
    run "vips (linear, gaussblur)" bash -c "ls '$IN'/*.png | VIPS_CONCURRENCY=1 xargs -P $THREADS -n 1 -I{} '$WORK/vips1.sh' {} '$WORK/out'"
else
    echo "  vips: not installed (apt-get install libvips-tools), not run"
fi

# ---- 3. the table --------------------------------------------------------------------------
echo
echo "$(date -u +%Y-%m-%d) $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), $FILES files, $MB MB, ${MPIX:-?} Mpixel, --threads $THREADS"
printf '%-30s %8s %8s %8s %8s %9s %8s %s\n' run seconds files/s Mpix/s MB/s peak_MB vs_floor exit
floor=$(head -1 "$RESULTS" | cut -f2)
while IFS=$'\t' read -r name secs rss rc outs; do
    fps=$(calc "$FILES / $secs" 1)
    mps=$([ -n "$MPIX" ] && calc "$MPIX / $secs" 1 || echo -)
    mbs=$(calc "$MB / $secs" 1)
    peak=$([ "$rss" != - ] && calc "$rss / 1024" 0 || echo -)
    vs=$(calc "$floor / $secs" 2)
    printf '%-30s %8.2f %8s %8s %8s %9s %8s %s\n' "$name" "$secs" "$fps" "$mps" "$mbs" "$peak" "$vs" "$rc"
done <"$RESULTS"
echo "(vs_floor: the codec floor's time over this run's: 1.0 runs at the codec's speed)"
[ "$KEEP" = 1 ] || rm -rf "$WORK/out"
