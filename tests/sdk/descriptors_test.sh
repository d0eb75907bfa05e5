#!/bin/bash
# tests/sdk/descriptors_test.sh: descriptor rules and plugin check reports met while
# writing plugins (see descriptors/), each a defect once:
# - a bool row written by hand (`.def = 1`, no bounds) loads: a bool has no range;
# - a float default of infinity (in a range open above) is refused, naming the field;
# - a stage without a name is named by its place and field (stages[1].name), by plugin
#   check and by the engine's warning;
# - a false PF_STAGE_PER_CHANNEL claim (channels mixed, or the position read) fails plugin
#   check; an honest one passes;
# - plugin check names the file it was given, never the private link it loads it through.
#
#   descriptors_test.sh PIPEFUSE SDK_BUILD_DIR WORK_DIR
set -u
PF=$1 B=$(cd "$2" && pwd -P) WORK=$3
D=$B/descriptors
W=$WORK/descriptors
rm -rf "$W" && mkdir -p "$W/tmp" && chmod 755 "$W" "$W/tmp" || exit 1
unset PIPEFUSE_PLUGIN_PATH
export TMPDIR=$W/tmp
. "$(dirname "$0")/testlib.sh"

# check NAME FILE ARGS...: `pipefuse plugin check FILE ARGS...`, output in $W/NAME.out.
check() {
    local name=$1
    shift
    run "$name" "$PF" plugin check "$@"
    grep -qF "$TMPDIR/pipefuse-check-" "$W/$name.out" &&
        fail "$name: the report names the private link, not the plugin file" && show "$W/$name.out"
}

check bool_default "$D/bool_default.so"
expect bool_default 0
says bool_default "ok    sdk_bool_default: point, 1 input, 2 parameters"
says bool_default "ok    loads next to the built-in plugins"
grep -qF "outside its range" "$W/bool_default.out" && fail "bool_default: a bool row range-checked"
run bool_stages "$PF" --plugin-path "$D" stages sdk_bool_default
expect bool_stages 0
says bool_stages "default true"

check inf_default "$D/inf_default.so"
expect inf_default 1
says inf_default "FAIL  sdk_inf_default.gain: default inf is not a finite number (stages[0].params[0].def)"
says inf_default "FAIL  the engine refuses it: $D/inf_default.so: sdk_inf_default.gain: default inf is not a finite number (stages[0].params[0].def)"
grep -qF "PF_PARSE" "$W/inf_default.out" && fail "inf_default: reported as a JSON parse error"

check unnamed "$D/unnamed_stage.so"
expect unnamed 1
says unnamed "FAIL  stage name 'NULL' is not an identifier (stages[1].name)"
says unnamed "FAIL  the engine refuses it: $D/unnamed_stage.so: stage name 'NULL' is not an identifier (stages[1].name)"
# Every other command works, and its warning names the file, the stage and the field.
run unnamed_stages "$PF" --plugin-path "$D" stages
expect unnamed_stages 0
says unnamed_stages "$D/unnamed_stage.so: stage name 'NULL' is not an identifier (stages[1].name); skipped"
says unnamed_stages "$D/inf_default.so: sdk_inf_default.gain: default inf is not a finite number (stages[0].params[0].def); skipped"

check per_channel "$D/false_per_channel.so"
expect per_channel 1
says per_channel "FAIL  per channel (default params): declares PF_STAGE_PER_CHANNEL, but channel"
says per_channel "when only the inputs' other channels do"
says per_channel "but the same input pixel gives another output at"
says per_channel "fix: drop PF_STAGE_PER_CHANNEL from .flags"
check per_channel_ok "$D/false_per_channel.so" --stage sdk_pc_gain
expect per_channel_ok 0
says per_channel_ok "ok    per channel (default params)"
says per_channel_ok "ok    per channel (random params)"

# Messages that come from the engine (an NVRTC failure names the stage's plugin file,
# -v shows the engine's notices) name the file given, not the link in TMPDIR.
check link_nvrtc "$B/broken/cxx_only.so" -v
expect link_nvrtc 1
if grep -qF "does not compile with NVRTC" "$W/link_nvrtc.out"; then
    says link_nvrtc "(op sdk_cxx_only of $B/broken/cxx_only.so)"
else
    echo "descriptors: no NVRTC here; the NVRTC message's file name is not checked"
fi
check link_stencil "$B/broken/crasher.so" -v
expect link_stencil 1
[ -z "$(ls -A "$TMPDIR")" ] || fail "plugin check left $(ls -A "$TMPDIR") in TMPDIR"

finish descriptors_test.sh
