#!/bin/bash
# tests/sdk/broken_test.sh: `pipefuse plugin check` on plugins broken on purpose (see
# broken/: one fault each) must fail with a message that names the fault and says what
# to fix; and its command line.
#
#   broken_test.sh PIPEFUSE BROKEN_DIR GOOD_PLUGIN WORK_DIR
#
# gpu_mismatch differs between CPU and GPU only: with a CUDA device the check must fail
# on "CPU against GPU"; without one it must pass with that check reported as skipped.
set -u
PF=$1 DIR=$(cd "$2" && pwd -P) GOOD=$3 WORK=$4
W=$WORK/broken
rm -rf "$W" && mkdir -p "$W" && chmod 755 "$W" || exit 1
unset PIPEFUSE_PLUGIN_PATH
. "$(dirname "$0")/testlib.sh"

# check NAME ARGS...: run NAME `pipefuse plugin check ARGS`.
check() {
    local name=$1
    shift
    run "$name" "$PF" plugin check "$@"
}

# broken NAME TEXT...: the check of broken/NAME.so fails (exit 1) saying each TEXT.
broken() {
    local name=$1
    shift
    check "$name" "$DIR/$name.so"
    expect "$name" 1
    says "$name" "result: FAIL"
    for t in "$@"; do
        says "$name" "$t"
    done
}

broken wrong_abi "FAIL  built for plugin ABI 2.0; this pipefuse supports ABI 1.0" \
    "fix: rebuild the plugin against this pipefuse's headers"
broken bad_default "FAIL  sdk_bad_default.gain: default 25 is outside its range [0, 10]" \
    "FAIL  the engine refuses it: $DIR/bad_default.so" "skip  stage runs: the plugin does not load"
broken undocumented "FAIL  sdk_undocumented: no doc string" \
    "FAIL  sdk_undocumented.gain: no doc string"
broken name_clash "stage name 'vignette' is already taken by the built-in plugin color" \
    "fix: rename the stage"
broken stateful "FAIL  deterministic:" "keep no state between calls"
broken region_ignorer "FAIL  regions (default params): writes outside its region" \
    "fix: write only the rows a->region.y0 .. a->region.y1 - 1"
broken wide_radius "FAIL  reads beyond its declared radius 1"
# Radii up to PF_MAX_RADIUS are checked on an image sized for them; above, refused.
broken deep_radius "FAIL  reads beyond its declared radius 30"
# rows_in (ABI 1.6) must name every input row a band of output rows reads
broken short_rows "FAIL  rows_in (default params): output row" \
    "fix: make rows_in name every input row that the output rows read"
grep -q "not checked" "$W/deep_radius.out" && fail "deep_radius: a check reported as not done"
broken huge_radius "FAIL  sdk_huge_radius: with its default params: these params make radius() return 300; a stencil's radius must be 0 to 256 (PF_MAX_RADIUS)" \
    "fix: return the farthest distance the stage reads" \
    "FAIL  the engine refuses it: $DIR/huge_radius.so: sdk_huge_radius: with its default params: these params make radius() return 300"
broken swapped_range "FAIL  sdk_swapped_range.gain: min 10 is above max 0" "PF_NO_MIN / PF_NO_MAX"
# reduce_sum (ABI 1.3): a value the engine does not know is refused; a sum whose table is
# not a sum's loads in the engine, and plugin check fails the declaration.
broken bad_reduce_sum "FAIL  sdk_bad_reduce_sum: declares reduce_sum 3; this engine knows 0, PF_REDUCE_SUM_COLUMNS (1) and PF_REDUCE_SUM_ROWS (2)" \
    "fix: declare 0, PF_REDUCE_SUM_COLUMNS or PF_REDUCE_SUM_ROWS" \
    "FAIL  the engine refuses it: $DIR/bad_reduce_sum.so: sdk_bad_reduce_sum: declares reduce_sum 3"
broken sum_shape "FAIL  sdk_sum_shape: declares a sum by columns, but with its default params a 67x45 input gets a 1x1 table (partial_len 1), not 4x67 (partial_len 268)" \
    "fix: return the table a sum fills" "ok    loads next to the built-in plugins"
# Several faults in one stage: plugin check lists each with its fix; the engine refuses
# the plugin naming the first error only.
broken many_faults "FAIL  sdk_many_faults: no doc string" \
    "FAIL  sdk_many_faults: takes 0 inputs; 1 to 8 are allowed" \
    "FAIL  sdk_many_faults.gain: default 25 is outside its range [0, 10]" \
    "FAIL  sdk_many_faults: declares out_channels 5; 0 to 4 are allowed" \
    "FAIL  sdk_many_faults: declares reduce_sum 2 on a point stage; only reduce stages may" \
    "FAIL  the engine refuses it: $DIR/many_faults.so: sdk_many_faults: takes 0 inputs; 1 to 8 are allowed"
grep -F "the engine refuses it" "$W/many_faults.out" | grep -qE "default 25|out_channels|reduce_sum" &&
    fail "many_faults: the engine's message names more than the first error"
n=$(sed -n '/^descriptor$/,/^engine$/p' "$W/many_faults.out" | grep -c "^        fix: ")
[ "$n" -ge 5 ] || fail "many_faults: $n fix lines for five faults"
broken dotted_name "FAIL  plugin name 'dotted.name' has a '.' (pipelines write plugin.stage)" \
    "FAIL  the engine refuses it: $DIR/dotted_name.so: plugin name 'dotted.name' has a '.'"
broken prints "FAIL  sdk_prints: the op header (point_source) calls printf() (line 15), which a fused function may not use"
broken calls_exit "FAIL  the plugin called exit() during: stage sdk_calls_exit"
broken crasher "FAIL  the plugin crashed (SIGSEGV) during: stage sdk_crasher"

# The region ignorer's values are right: its CPU runs and determinism pass.
says region_ignorer "ok    CPU runs"
says region_ignorer "ok    deterministic"

# CPU and GPU disagree: only a GPU can tell.
check gpu_mismatch "$DIR/gpu_mismatch.so"
says gpu_mismatch "ok    point rows (default params)"
if grep -qF "skip  CPU against GPU: skipped (no CUDA device)" "$W/gpu_mismatch.out"; then
    expect gpu_mismatch 0
    says gpu_mismatch "GPU checks were skipped"
    says gpu_mismatch "result: PASS"
    echo "gpu_mismatch: no CUDA device here, CPU against GPU reported as skipped"
elif grep -qF "skip  CPU against GPU: skipped (the stage has no CUDA implementation)" "$W/gpu_mismatch.out"; then
    expect gpu_mismatch 0
    echo "gpu_mismatch: built without CUDA, CPU against GPU reported as skipped"
else
    expect gpu_mismatch 1
    says gpu_mismatch "FAIL  CPU against GPU"
    says gpu_mismatch "fix: make the CUDA code compute what the CPU code does"
    echo "gpu_mismatch: CPU against GPU failed, as it must"
fi

# A file other users can write to is not loaded at all.
mkdir -p "$W/open" && chmod 755 "$W/open" && cp "$GOOD" "$W/open/good.so" || fail "cannot copy $GOOD"
chmod 664 "$W/open/good.so"
check open_file "$W/open/good.so"
expect open_file 1
says open_file "refusing a plugin that other users can write to (mode 664"
says open_file "does not load it"
chmod 755 "$W/open/good.so" && chmod 777 "$W/open"
check open_dir "$W/open/good.so"
expect open_dir 1
says open_dir "refusing a directory that other users can write to (mode 777"
# A directory above it that others can write to (not sticky): refused, as the engine does.
mkdir -p "$W/open/deep" && cp "$W/open/good.so" "$W/open/deep/good.so" && chmod 755 "$W/open/deep" ||
    fail "cannot copy into $W/open/deep"
check open_parent "$W/open/deep/good.so"
expect open_parent 1
says open_parent "other users can write to $W/open above it (mode 777"
chmod 755 "$W/open"
check good "$W/open/good.so"
expect good 0
says good "result: PASS"

# A pipeline naming a stage of a refused plugin hears that, with the refusal, and is not
# pointed at a loaded stage of a similar name.
mkdir -p "$W/refused" && chmod 755 "$W/refused" && cp "$DIR/bad_default.so" "$W/refused/" &&
    chmod 755 "$W/refused/bad_default.so" || fail "cannot set up $W/refused"
for op in sdk_bad_default bad_default.sdk_bad_default; do
    printf '{"pipefuse": 1, "inputs": ["x"], "stages": [{"id": "a", "op": "%s", "inputs": ["x"]}], "outputs": {"o": "a"}}\n' \
        "$op" >"$W/refused_$op.json"
    run "refused_$op" "$PF" --plugin-path "$W/refused" check "$W/refused_$op.json"
    expect "refused_$op" 2
    says "refused_$op" "unknown op '$op': it is a stage of plugin 'bad_default', which was not loaded: $W/refused/bad_default.so: sdk_bad_default.gain: default 25 is outside its range [0, 10]"
    grep -q "did you mean" "$W/refused_$op.out" && fail "refused_$op: a suggestion for a stage of a refused plugin"
done

# The command line.
check missing "$W/nonexistent.so"
expect missing 2
run usage "$PF" plugin
expect usage 2
says usage "usage: pipefuse plugin check"
run unknown "$PF" plugin frobnicate
expect unknown 2
says unknown "unknown subcommand 'frobnicate'"
run nofile "$PF" plugin check
expect nofile 2
check help --help
expect help 0
says help "Exit status"
check badopt "$W/open/good.so" --tolerance lots
expect badopt 2
check stage_only "$W/open/good.so" --stage my_gain
expect stage_only 0
grep -q "^stage my_blur3" "$W/stage_only.out" && fail "--stage my_gain also checked my_blur3"
check no_stage "$W/open/good.so" --stage nosuch
expect no_stage 1
says no_stage "--stage nosuch: the plugin has no stage of that name"
run mainhelp "$PF" --help
expect mainhelp 0
says mainhelp "plugin check LIB.so"

finish broken_test
