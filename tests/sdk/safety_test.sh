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

# ---- directories and files others can write to are refused -------------------------------------
# Refused means skipped with a warning that says why: `stages` still works (and lists
# nothing from there), and a pipeline that needs one of its stages fails with the reason.
for mode in 775 757 777; do
    chmod "$mode" "$W/plugs"
    run "dir_$mode" "$PF" --plugin-path "$W/plugs" stages
    expect "dir_$mode" 0
    says "dir_$mode" "plugin directory $W/plugs: refusing a directory that other users can write to (mode $mode); skipped"
    grep -q "^my_gain " "$W/dir_$mode.out" && fail "dir_$mode: my_gain listed from a refused directory"
    PIPEFUSE_PLUGIN_PATH="$W/plugs" run "dir_env_$mode" "$PF" check "$W/uses.json" --size 8x8
    expect "dir_env_$mode" 2
    says "dir_env_$mode" "unknown op 'my_gain'"
    says "dir_env_$mode" "not loaded:"
    says "dir_env_$mode" "plugin directory $W/plugs: refusing a directory that other users can write to (mode $mode)"
done
chmod 755 "$W/plugs"
for mode in 775 664 646 666; do
    chmod "$mode" "$W/plugs/myplugin.so"
    run "file_$mode" "$PF" --plugin-path "$W/plugs" stages
    expect "file_$mode" 0
    says "file_$mode" "$W/plugs/myplugin.so: refusing a plugin that other users can write to (mode $mode); skipped"
    run "file_use_$mode" "$PF" --plugin-path "$W/plugs" check "$W/uses.json" --size 8x8
    expect "file_use_$mode" 2
    says "file_use_$mode" "$W/plugs/myplugin.so: refusing a plugin that other users can write to (mode $mode)"
done
chmod 755 "$W/plugs/myplugin.so"
run restored "$PF" --plugin-path "$W/plugs" stages my_gain
expect restored 0

# A directory above the plugin directory that others can write to (and that is not
# sticky, as /tmp is) could have the plugin directory swapped: refused too.
mkdir -p "$W/open/plugs" && cp "$W/plugs/myplugin.so" "$W/open/plugs/" && chmod 755 "$W/open/plugs"
chmod 777 "$W/open"
run parent_open "$PF" --plugin-path "$W/open/plugs" check "$W/uses.json" --size 8x8
expect parent_open 2
says parent_open "plugin directory $W/open/plugs: refusing it, as other users can write to $W/open above it (mode 777"
chmod 1777 "$W/open"
run parent_sticky "$PF" --plugin-path "$W/open/plugs" check "$W/uses.json" --size 8x8
expect parent_sticky 0
chmod 755 "$W/open"

# PIPEFUSE_PLUGIN_PATH names directories by absolute path only.
cd "$W" || exit 1
PIPEFUSE_PLUGIN_PATH=plugs run relative "$PF" check "$W/uses.json" --size 8x8
cd - >/dev/null || exit 1
expect relative 2
says relative "PIPEFUSE_PLUGIN_PATH: refusing the relative directory 'plugs'"

# An unknown op says where plugins come from.
run no_plugin "$PF" check "$W/uses.json" --size 8x8
expect no_plugin 2
says no_plugin "--plugin-path"

# ---- the plugin's point stage fuses with built-in ones ----------------------------------------------
printf '{"pipefuse": 1, "inputs": ["x"], "stages": [{"id": "a", "op": "brightness", "params": {"amount": 0.1}}, {"id": "g", "op": "my_gain", "params": {"gain": 0.8}}, {"id": "c", "op": "contrast"}], "outputs": {"o": "c"}}\n' >"$W/fused.json"
run fused "$PF" --plugin-path "$W/plugs" check "$W/fused.json" --size 16x8
expect fused 0
says fused "a + g + c"

finish safety_test
