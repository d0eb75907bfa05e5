#!/bin/bash
# bench/cli_memory.sh: peak resident memory of `pipefuse run`, against stated targets.
#
#   bash bench/cli_memory.sh PIPEFUSE [WORK_DIR]
#
# Cases (GNU time's maximum resident set size of the command and its children):
#   batch-500-short   500 small PNGs (64x48 RGB) through pipelines/demo.json (an image
#                     and a table per input), -o a short path
#   batch-2000-long   2,000 of them, -o a path of about 1,000 bytes
#   photo-48mp        one 8000x6000 RGB photo through pipelines/thumbnail.json (a resize:
#                     whole frames)
#   photo-48mp-point  the same photo through a point-only pipeline (brightness), in bands
#   photo-48mp-stencil  the same through pipelines/sharpen.json (unsharp, levels), in bands
#   photo-48mp-point-whole, photo-48mp-stencil-whole  the last two with --band-rows off,
#                     for the before/after figures (no target)
# Targets:
#   a batch's peak does not grow with the number of files or the length of -o: 2,000
#   files with a long -o within 16 MB of 500 with a short one, and under 128 MB;
#   one 48-megapixel photo through a point or a stencil pipeline under 150 MB: banded
#   from decode to encode (docs/batch.md), a few bands of rows are held, not the
#   photo's 144 MB nor a 768 MB float RGBA frame per intermediate (whole frames took 285
#   and 1,787 MB); through the thumbnail pipeline (a resize needs the whole frame) under
#   1,024 MB (the decoded photo and one float RGBA frame fit; two such frames do not).
# Prints one line per case and a verdict per target; exits 1 when a target is missed
# (a benchmark, not a ctest test: it takes a minute and needs 2 GB of memory).
set -u
PF=${1:?usage: cli_memory.sh PIPEFUSE [WORK_DIR]}
WORK=${2:-$(mktemp -d)}
SRC=$(cd "$(dirname "$0")/.." && pwd)
TIME=/usr/bin/time
[ -x "$TIME" ] || { echo "GNU time (/usr/bin/time) is needed" >&2; exit 2; }
mkdir -p "$WORK" || exit 2

# peak NAME ARGS...: runs pipefuse ARGS under GNU time; prints and records the peak in MB
declare -A MB
peak() {
    local name=$1
    shift
    if ! "$TIME" -f '%M %e' -o "$WORK/$name.rss" "$PF" "$@" >"$WORK/$name.log" 2>&1; then
        echo "$name: pipefuse failed, see $WORK/$name.log" >&2
        MB[$name]=-1
        return
    fi
    local kb secs
    read -r kb secs < <(tail -1 "$WORK/$name.rss")
    MB[$name]=$((kb / 1024))
    printf '%-28s %6d MB peak %8s s\n' "$name" "${MB[$name]}" "$secs"
}

# inputs: a small PNG copied 2,000 times, and a 48-megapixel photo made by pipefuse
cat >"$WORK/small.json" <<'EOF'
{"pipefuse": 1, "inputs": ["p"], "stages": [{"id": "s", "op": "resize", "params": {"width": 64, "height": 48}}], "outputs": {"o": "s"}}
EOF
cat >"$WORK/big.json" <<'EOF'
{"pipefuse": 1, "inputs": ["p"], "stages": [{"id": "s", "op": "resize", "params": {"width": 8000, "height": 6000, "mode": "nearest"}}], "outputs": {"o": "s"}}
EOF
cat >"$WORK/point.json" <<'EOF'
{"pipefuse": 1, "inputs": ["p"], "stages": [{"id": "b", "op": "brightness", "params": {"amount": 0.05}}], "outputs": {"o": "b"}}
EOF
"$PF" run "$WORK/small.json" "$SRC/samples/images/chelsea.png" -o "$WORK/gen" -q --backend cpu &&
    "$PF" run "$WORK/big.json" "$SRC/samples/images/chelsea.png" -o "$WORK/gen48" -q --backend cpu ||
    { echo "cannot make the inputs" >&2; exit 2; }
rm -rf "$WORK/in500" "$WORK/in2000"
mkdir -p "$WORK/in500" "$WORK/in2000"
for i in $(seq -w 1 2000); do
    cp "$WORK/gen/chelsea.png" "$WORK/in2000/photo_$i.png"
    [ "$i" -le 500 ] && cp "$WORK/gen/chelsea.png" "$WORK/in500/photo_$i.png"
done
long=$WORK/out_long
while [ ${#long} -lt 1000 ]; do long=$long/$(printf 'd%.0s' $(seq 1 100)); done

peak batch-500-short run "$SRC/pipelines/demo.json" "$WORK/in500" -o "$WORK/o" -q --backend cpu
peak batch-2000-long run "$SRC/pipelines/demo.json" "$WORK/in2000" -o "$long" -q --backend cpu
peak photo-48mp run "$SRC/pipelines/thumbnail.json" "$WORK/gen48/chelsea.png" -o "$WORK/o48" -q --backend cpu
peak photo-48mp-point run "$WORK/point.json" "$WORK/gen48/chelsea.png" -o "$WORK/o48p" -q --backend cpu
peak photo-48mp-stencil run "$SRC/pipelines/sharpen.json" "$WORK/gen48/chelsea.png" -o "$WORK/o48s" -q \
    --backend cpu
peak photo-48mp-point-whole run "$WORK/point.json" "$WORK/gen48/chelsea.png" -o "$WORK/o48pw" -q \
    --backend cpu --band-rows off
peak photo-48mp-stencil-whole run "$SRC/pipelines/sharpen.json" "$WORK/gen48/chelsea.png" \
    -o "$WORK/o48sw" -q --backend cpu --band-rows off

missed=0
verdict() { # WHAT OK
    if [ "$2" = 1 ]; then echo "target met:    $1"; else echo "target MISSED: $1"; missed=1; fi
}
a=${MB[batch-500-short]} b=${MB[batch-2000-long]} c=${MB[photo-48mp]}
verdict "2,000 files with a long -o ($b MB) within 16 MB of 500 with a short one ($a MB)" \
    $([ "$a" -ge 0 ] && [ "$b" -ge 0 ] && [ $((b - a)) -le 16 ] && echo 1 || echo 0)
verdict "2,000 files under 128 MB ($b MB)" $([ "$b" -ge 0 ] && [ "$b" -lt 128 ] && echo 1 || echo 0)
verdict "one 48-megapixel photo under 1,024 MB ($c MB)" $([ "$c" -ge 0 ] && [ "$c" -lt 1024 ] && echo 1 || echo 0)
for k in point stencil; do
    d=${MB[photo-48mp-$k]}
    verdict "the same photo through a $k pipeline, in bands, under 150 MB ($d MB; whole frames: ${MB[photo-48mp-$k-whole]} MB)" \
        $([ "$d" -ge 0 ] && [ "$d" -lt 150 ] && echo 1 || echo 0)
    cmp -s "$WORK/o48${k:0:1}/chelsea.png" "$WORK/o48${k:0:1}w/chelsea.png" ||
        { echo "target MISSED: $k: the banded output differs from the whole-frame one"; missed=1; }
done
exit $missed
