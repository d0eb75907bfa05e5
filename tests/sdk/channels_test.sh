#!/bin/bash
# tests/sdk/channels_test.sh: a stage that declares its output needs colour
# (pf_stage_desc.out_channels, colour/sepia.c) makes an "auto" output of a gray photo RGB
# and of gray+alpha RGBA, through later stages too; a declared format is kept; without
# such a stage the output follows the input.
#
#   channels_test.sh PIPEFUSE SDK_BUILD_DIR PNG_DIR WORK_DIR
set -u
PF=$1 B=$(cd "$2" && pwd -P) PNG=$3 WORK=$4
W=$WORK/channels
rm -rf "$W" && mkdir -p "$W" && chmod 755 "$W" || exit 1
unset PIPEFUSE_PLUGIN_PATH
. "$(dirname "$0")/testlib.sh"

# colour_type FILE: the PNG colour type of FILE (0 gray, 2 RGB, 4 gray+alpha, 6 RGBA); a
# palette (auto's smallest lossless form for few colours) as what it reads back as: RGB,
# or RGBA with a tRNS chunk.
colour_type() {
    local t
    t=$(od -An -tu1 -j25 -N1 "$1" 2>/dev/null | tr -d ' ')
    if [ "$t" = 3 ]; then
        if grep -qa tRNS "$1"; then t=6; else t=2; fi
    fi
    echo "$t"
}

printf '{"pipefuse": 1, "inputs": ["x"], "stages": [{"id": "s", "op": "photofx.sepia"}, {"id": "b", "op": "brightness", "inputs": ["s"], "params": {"amount": 0.02}}], "outputs": {"o": "b"}}\n' >"$W/sepia.json"
printf '{"pipefuse": 1, "inputs": ["x"], "stages": [{"id": "s", "op": "sepia"}], "outputs": {"o": {"from": "s", "format": "gray8"}}}\n' >"$W/declared.json"
printf '{"pipefuse": 1, "inputs": ["x"], "stages": [{"id": "b", "op": "brightness"}], "outputs": {"o": "b"}}\n' >"$W/plain.json"

# case NAME PIPELINE INPUT WANT: the output of INPUT through PIPELINE has colour type WANT.
case_() {
    local name=$1 json=$2 in=$3 want=$4
    step "$name" "$PF" --plugin-path "$B/colour" run "$W/$json" "$PNG/$in" -o "$W/$name" --backend cpu -q
    local got
    got=$(colour_type "$W/$name/$in")
    [ "$got" = "$want" ] || fail "$name: $in through $json has PNG colour type '$got', expected $want"
}
case_ gray_sepia sepia.json basn0g08.png 2
case_ graya_sepia sepia.json basn4a08.png 6
case_ rgb_sepia sepia.json basn2c08.png 2
case_ gray_declared declared.json basn0g08.png 0
case_ gray_plain plain.json basn0g08.png 0

finish channels_test
