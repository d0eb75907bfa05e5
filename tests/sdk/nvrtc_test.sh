#!/bin/bash
# tests/sdk/nvrtc_test.sh: `pipefuse check` compiles the fused kernels a CUDA run would,
# with NVRTC and without a GPU, and says where an op fails.
#
#   nvrtc_test.sh PIPEFUSE SDK_BUILD_DIR WORK_DIR
#
# - twins/: two plugins made from the skeleton (guard MY_OPS_H, macro MY_FACTOR and
#   helper my_mix in both, each with a stage "tint") fuse into one kernel that compiles;
# - broken/cxx_only: an op header that is C but not C++: check fails with NVRTC's message
#   at the header's own line, naming that stage and no other;
# - --dump-kernels to a missing directory fails and writes nothing.
# Exit 77 (skipped) where NVRTC is not available.
set -u
PF=$1 B=$(cd "$2" && pwd -P) WORK=$3
W=$WORK/nvrtc
rm -rf "$W" && mkdir -p "$W" && chmod 755 "$W" || exit 1
unset PIPEFUSE_PLUGIN_PATH
. "$(dirname "$0")/testlib.sh"

printf '{"pipefuse": 1, "inputs": ["x"], "stages": [{"id": "a", "op": "twin_a.tint", "params": {"amount": 0.2}}, {"id": "b", "op": "twin_b.tint", "params": {"amount": -0.1}}, {"id": "c", "op": "contrast"}], "outputs": {"o": "c"}}\n' >"$W/twins.json"

# Without NVRTC too: a missing dump directory is an error and nothing is claimed; a CPU
# run asked to dump kernels says that it makes none.
run dump_missing "$PF" --plugin-path "$B/twins" check "$W/twins.json" --dump-kernels "$W/nonexistent"
expect dump_missing 2
says dump_missing "--dump-kernels $W/nonexistent: no such directory"
grep -q "generated into" "$W/dump_missing.out" && fail "dump_missing: claims kernels were generated"
mkdir -p "$W/cpu-dump"
run cpu_dump "$PF" --plugin-path "$B/twins" run "$W/twins.json" "$(dirname "$0")/../data/pngsuite/basn2c08.png" \
    -o "$W/cpu-out" --backend cpu --dump-kernels "$W/cpu-dump"
expect cpu_dump 0
says cpu_dump "the CPU backend generates no kernels, so nothing is written there"

run twins "$PF" --plugin-path "$B/twins" check "$W/twins.json" --size 64x48
if grep -q "fused kernels: not compiled" "$W/twins.out"; then
    echo "NVRTC is not available here: skipped ($(grep 'not compiled' "$W/twins.out"))"
    exit 77
fi
expect twins 0
says twins "a + b + c"
says twins "fused kernels: 1 built"
# The same name in two plugins: a warning naming both, and each reachable by plugin.name.
says twins "stage 'tint' is defined by $B/twins/twin_a.so and by $B/twins/twin_b.so"
says twins "write 'twin_b.tint' for the second"

# The kernel's source: both headers, their guard and macro undefined around each.
mkdir -p "$W/dump"
step dump "$PF" --plugin-path "$B/twins" check "$W/twins.json" --size 64x48 --dump-kernels "$W/dump"
says dump "generated into $W/dump"
K=$(ls "$W"/dump/*.cu 2>/dev/null | head -1)
[ -n "$K" ] || fail "no kernel source in $W/dump"
[ -n "$K" ] && [ "$(grep -c '^#undef MY_OPS_H' "$K")" -ge 4 ] || fail "the guard MY_OPS_H is not undefined around both headers"
[ -n "$K" ] && grep -q 'twin_a_ops.h"' "$K" && grep -q 'twin_b_ops.h"' "$K" ||
    fail "the kernel source has no #line naming the op headers"

# An op header NVRTC cannot compile: the author's header and line, that stage only.
mkdir -p "$W/cxx" && chmod 755 "$W/cxx" && cp "$B/broken/cxx_only.so" "$W/cxx/" || exit 1
printf '{"pipefuse": 1, "inputs": ["x"], "stages": [{"id": "pre", "op": "brightness"}, {"id": "bad", "op": "sdk_cxx_only"}, {"id": "post", "op": "linear"}], "outputs": {"o": "post"}}\n' >"$W/cxx.json"
run cxx "$PF" --plugin-path "$W/cxx" check "$W/cxx.json" --size 64x48
expect cxx 2
says cxx "stage 'bad' (op sdk_cxx_only of $W/cxx/cxx_only.so): its op header does not compile with NVRTC"
says cxx "cxx_only_ops.h(15): error"
grep -q "stage 'pre'\|stage 'post'" "$W/cxx.out" && fail "cxx: a stage that compiles is blamed"

# plugin check reports it the same way.
run cxx_check "$PF" plugin check "$W/cxx/cxx_only.so"
expect cxx_check 1
says cxx_check "FAIL  NVRTC cannot compile the fused kernel of brightness -> sdk_cxx_only -> linear -> multiply"
says cxx_check "cxx_only_ops.h(15): error"

finish nvrtc_test
