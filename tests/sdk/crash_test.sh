#!/bin/bash
# tests/sdk/crash_test.sh: plugin code that crashes in the pipefuse process itself (not in
# run's worker, which isolates frames): a plugin's entry point, and a stage's params
# check on a value a pipeline sets. Each command says what it was doing, names the likely
# cause and the way to find the plugin, exits 2, and writes no output; run's worker is
# not reached. The same plugin with good params runs.
#
#   crash_test.sh PIPEFUSE SDK_BUILD_DIR WORK_DIR PNG
set -u
PF=$1 B=$(cd "$2" && pwd -P) WORK=$3 PNG=$4
W=$WORK/crash
rm -rf "$W" && mkdir -p "$W" || exit 1
unset PIPEFUSE_PLUGIN_PATH
. "$(dirname "$0")/testlib.sh"
# a sanitizer reports the crash its own way; the guard is off in such builds
if nm -D "$PF" 2>/dev/null | grep -qE '__(asan|tsan)_init'; then
    echo "SKIP: $PF is built with a sanitizer, which owns the crash"
    exit 77
fi

# says_crash NAME DOING: the crash report of run NAME, exit 2.
says_crash() {
    expect "$1" 2
    says "$1" "pipefuse: crashed (SIGSEGV) while $2"
    says "$1" "pipefuse plugin check PLUGIN.so"
}

run entry_stages "$PF" --plugin-path "$B/crash_entry" stages
says_crash entry_stages "loading plugins (the built-in directory, --plugin-path $B/crash_entry, then PIPEFUSE_PLUGIN_PATH)"
run entry_check "$PF" --plugin-path "$B/crash_entry" check "$W/none.json" --size 8x8
says_crash entry_check "loading plugins"
# an entry point that calls abort() or exit(): said the same way, status 2, not the
# plugin's own status or a bare core dump
run entry_abort "$PF" --plugin-path "$B/abort_entry" stages
expect entry_abort 2
says entry_abort "pipefuse: crashed (SIGABRT: abort() called) while loading plugins"
run entry_exit "$PF" --plugin-path "$B/exit_entry" stages
expect entry_exit 2
says entry_exit "pipefuse: exit() called while loading plugins"
says entry_exit "pipefuse plugin check PLUGIN.so"

mk() { # mk FILE GAIN
    printf '{"pipefuse": 1, "inputs": ["src"], "stages": [{"id": "g", "op": "sdk_crash_check", "inputs": ["src"], "params": {"gain": %s}}], "outputs": {"out": "g"}}\n' "$2" >"$1"
}
mk "$W/bad.json" 7
mk "$W/good.json" 2
run check_bad "$PF" --plugin-path "$B/crash_check" check "$W/bad.json" --size 8x8
says_crash check_bad "loading $W/bad.json"
run run_bad "$PF" --plugin-path "$B/crash_check" run "$W/bad.json" "$PNG" -o "$W/out_bad" --backend cpu
says_crash run_bad "loading $W/bad.json"
[ -n "$(ls -A "$W/out_bad" 2>/dev/null)" ] && fail "run_bad: wrote output" && ls -l "$W/out_bad" >&2
run bench_bad "$PF" --plugin-path "$B/crash_check" bench "$W/bad.json" --size 8x8 --frames 3 --mode cpu
says_crash bench_bad "loading $W/bad.json"
mk "$W/deep.json" 9.5 # the check overflows the stack: reported from the handler's own
run check_deep "$PF" --plugin-path "$B/crash_check" check "$W/deep.json" --size 8x8
says_crash check_deep "loading $W/deep.json"
run run_good "$PF" --plugin-path "$B/crash_check" run "$W/good.json" "$PNG" -o "$W/out_good" --backend cpu -q
expect run_good 0
[ -s "$W/out_good/$(basename "$PNG")" ] || fail "run_good: no output"
finish crash_test.sh
