#!/bin/bash
# tests/sdk/safety_test.sh: where plugins may come from, as a plugin author meets it.
# Plugins load only from the search path (the built-in directory, --plugin-path,
# PIPEFUSE_PLUGIN_PATH), never from a pipeline file; a directory or a file that other
# users can write to is refused with a message naming it and its mode; `pipefuse stages`
# says which file each stage came from.
#
#   safety_test.sh PIPEFUSE PLUGIN WORK_DIR
#
# PLUGIN is a good plugin (the skeleton: stages my_gain and my_blur3).
set -u
PF=$1 GOOD=$2 WORK=$3
W=$WORK/safety
rm -rf "$W" && mkdir -p "$W/plugs" && chmod 755 "$W" "$W/plugs" || exit 1
cp "$GOOD" "$W/plugs/myplugin.so" && chmod 755 "$W/plugs/myplugin.so" || exit 1
unset PIPEFUSE_PLUGIN_PATH
. "$(dirname "$0")/testlib.sh"

# ---- stages name the file they came from ------------------------------------------------
run stages "$PF" --plugin-path "$W/plugs" stages
expect stages 0
says stages "my_gain  (point, 1 input, fusable)  from myplugin: $W/plugs/myplugin.so"
says stages "my_blur3  (stencil, 1 input)  from myplugin: $W/plugs/myplugin.so"
grep -Eq "^brightness  \(.*\)  from color: /.*/color\.so$" "$W/stages.out" ||
    fail "stages: brightness does not name color.so"
PIPEFUSE_PLUGIN_PATH="$W/plugs" run stages_env "$PF" stages my_gain
expect stages_env 0
says stages_env "from myplugin: $W/plugs/myplugin.so"

# ---- only the search path ----------------------------------------------------------------------
printf '{"pipefuse": 1, "inputs": ["x"], "stages": [{"id": "g", "op": "my_gain"}], "outputs": {"o": "g"}}\n' >"$W/uses.json"
run not_on_path "$PF" check "$W/uses.json" --size 8x8
expect not_on_path 2
says not_on_path "my_gain"
run on_path "$PF" --plugin-path "$W/plugs" check "$W/uses.json" --size 8x8
expect on_path 0
printf '{"pipefuse": 1, "plugins": ["%s"], "inputs": ["x"], "stages": [{"id": "g", "op": "my_gain"}], "outputs": {"o": "g"}}\n' "$W/plugs/myplugin.so" >"$W/names_lib.json"
run names_lib "$PF" check "$W/names_lib.json" --size 8x8
expect names_lib 2
says names_lib "search path"

# ---- directories and files others can write to are refused ------------------------------------
for mode in 775 757 777; do
    chmod "$mode" "$W/plugs"
    run "dir_$mode" "$PF" --plugin-path "$W/plugs" stages
    expect "dir_$mode" 2
    says "dir_$mode" "plugin directory $W/plugs: refusing a directory that other users can write to (mode $mode)"
    PIPEFUSE_PLUGIN_PATH="$W/plugs" run "dir_env_$mode" "$PF" stages
    expect "dir_env_$mode" 2
done
chmod 755 "$W/plugs"
for mode in 775 664 646 666; do
    chmod "$mode" "$W/plugs/myplugin.so"
    run "file_$mode" "$PF" --plugin-path "$W/plugs" stages
    expect "file_$mode" 2
    says "file_$mode" "$W/plugs/myplugin.so: refusing a plugin that other users can write to (mode $mode)"
done
chmod 755 "$W/plugs/myplugin.so"
run restored "$PF" --plugin-path "$W/plugs" stages my_gain
expect restored 0

# ---- the plugin's point stage fuses with built-in ones ----------------------------------------------
printf '{"pipefuse": 1, "inputs": ["x"], "stages": [{"id": "a", "op": "brightness", "params": {"amount": 0.1}}, {"id": "g", "op": "my_gain", "params": {"gain": 0.8}}, {"id": "c", "op": "contrast"}], "outputs": {"o": "c"}}\n' >"$W/fused.json"
run fused "$PF" --plugin-path "$W/plugs" check "$W/fused.json" --size 16x8
expect fused 0
says fused "a + g + c"

finish safety_test
