#!/bin/bash
# tests/cli/pipeline_files.sh: check, bench and stages over pipeline files written by
# hand, as docs/pipeline-format.md and the help texts describe them.
#
#   pipeline_files.sh PIPEFUSE HELPER SOURCE_DIR WORK_DIR
#
# What is said names what it is about and reads back as itself: a --size out of range
# says the range, a bound listed by `stages` is accepted when copied into a file, check
# shows each output's format, bench takes every pipeline the format allows and its --json
# stays JSON whatever the pipeline's path holds.
set -u
PF=$1 HELPER=$2 SRC=$3 WORK=$4
W=$WORK/pipeline_files
rm -rf "$W" && mkdir -p "$W" || exit 1
unset PIPEFUSE_PLUGIN_PATH
source "$(dirname "$0")/testlib.sh"
rc=0
P=$SRC/pipelines

# ---- --size: a value out of range says the range -----------------------------------------
for cmd in check bench; do
    for bad in 0x5 5x0 1048577x1; do
        pf "$cmd" --size "$bad" "$P/thumbnail.json"
        expect 2 "$cmd --size $bad"
        says "$W/stderr" "--size $bad: expected WIDTHxHEIGHT, each a whole number from 1 to 1048576" \
            "$cmd --size $bad"
    done
done

# ---- stages: a bound copied from the listing is a valid value ----------------------------
pf stages resize
expect 0 "stages resize"
bound=$(sed -n 's/^ *scale  *float .*\[\([^,]*\), .*/\1/p' "$W/stdout")
[ "$bound" = 0.0009765625 ] || fail "stages resize lists scale's minimum as '$bound', not 0.0009765625"
cat >"$W/bound.json" <<EOF
{"pipefuse": 1, "inputs": ["src"],
 "stages": [{"id": "tiny", "op": "resize", "params": {"scale": ${bound:-0}}}],
 "outputs": {"out": "tiny"}}
EOF
pf check "$W/bound.json" --size 4096x4096 -q
expect 0 "check of the listed minimum of resize.scale"

# ---- check: each output's format, as the file gives it -------------------------------------
cat >"$W/formats.json" <<'EOF'
{"pipefuse": 1, "inputs": ["src"],
 "stages": [{"id": "blur", "op": "gaussian"},
            {"id": "h", "op": "stats", "input": "src"}],
 "outputs": {"plain": "blur", "deep": {"from": "blur", "format": "rgb16"},
             "raw": "src", "table": {"from": "h", "format": "json"}, "any": "h"}}
EOF
pf check "$W/formats.json" --size 64x48 -q
expect 0 "check formats.json"
for line in "deep             <- blur             image 64x48, rgb16" \
    "plain            <- blur             image 64x48, auto" \
    "raw              <- src              image 64x48, auto" \
    "table            <- h                table 4 rows x 4 columns, json" \
    "any              <- h                table 4 rows x 4 columns, auto"; do
    says "$W/stdout" "$line" "check shows the output format"
done

# ---- check --dot FILE: a file that cannot be written says why ------------------------------
pf check "$W/formats.json" --size 8x8 --dot "$W/no/such/dir/g.dot" -q
expect 2 "check --dot into a missing folder"
says "$W/stderr" "--dot $W/no/such/dir/g.dot: cannot write: No such file or directory" \
    "check --dot names the reason"
pf check "$W/formats.json" --size 8x8 --dot /dev/full -q
expect 2 "check --dot /dev/full"
says "$W/stderr" "--dot /dev/full: cannot write: No space left on device" "check --dot /dev/full"

# ---- bench: every pipeline the format allows; --format named; --json is JSON ---------------
outs=""
for i in $(seq 0 19); do outs="$outs${outs:+, }\"o$i\": \"inv\""; done
cat >"$W/many_outputs.json" <<EOF
{"pipefuse": 1, "inputs": ["src"], "stages": [{"id": "inv", "op": "invert"}],
 "outputs": {$outs}}
EOF
ins='"i0"' stages='{"id": "s0", "op": "invert", "input": "i0"}'
for i in $(seq 1 11); do
    ins="$ins, \"i$i\""
    stages="$stages, {\"id\": \"s$i\", \"op\": \"add\", \"inputs\": [\"s$((i - 1))\", \"i$i\"]}"
done
cat >"$W/many_inputs.json" <<EOF
{"pipefuse": 1, "inputs": [$ins], "stages": [$stages], "outputs": {"out": "s11"}}
EOF
for f in many_outputs many_inputs; do
    pf bench "$W/$f.json" --size 16x16 --frames 3 --mode cpu -q
    expect 0 "bench $f.json"
    says "$W/stdout" "cpu  " "bench $f.json runs the CPU mode"
done
pf bench --format rgbx "$P/thumbnail.json"
expect 2 "bench --format rgbx"
says "$W/stderr" "--format rgbx: unknown format" "bench names the bad --format"
pf bench --size 8x8
expect 2 "bench without a pipeline"
says "$W/stderr" "no pipeline file given" "bench without a pipeline"

odd="$W/we\"ird\\dir"$'\t'"x"
mkdir -p "$odd" && cp "$W/formats.json" "$odd/p\"q.json"
pf bench "$odd/p\"q.json" --size 16x16 --frames 3 --json -q
expect 0 "bench --json of an odd path"
"$HELPER" json "$W/stdout" || fail "bench --json of a path with '\"', '\\' and a tab is not JSON"
says "$W/stdout" '\"q.json"' "bench --json escapes the path"

# ---- check --set: overrides checked and planned with, as run takes them ------------------
pf check "$P/demo.json" --size 64x64 --set glow.sigma=3 -q
expect 0 "check --set glow.sigma=3"
pf check "$P/demo.json" --size 64x64 --set glow.sigma=300
expect 2 "check --set glow.sigma=300"
says "$W/stderr" "glow.sigma: 300 is out of range [0, 64]" "check --set out of range"
pf check "$P/demo.json" --set nosuch.x=1
expect 2 "check --set nosuch.x=1"
says "$W/stderr" "no stage 'nosuch'" "check --set of no stage"
pf check "$P/demo.json" --set glowsigma
expect 2 "check --set without ="
says "$W/stderr" "--set glowsigma: expected ID.PARAM=VALUE" "check --set without ="

# ---- a directory given as the pipeline says so -------------------------------------------
pf check "$W"
expect 2 "check DIR"
says "$W/stderr" "is a directory, not a pipeline file" "check DIR"

if [ "$failures" != 0 ]; then
    echo "pipeline_files: $failures failure(s)" >&2
    exit 1
fi
echo "pipeline_files: ok"
