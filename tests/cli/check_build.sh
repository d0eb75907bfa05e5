#!/usr/bin/env bash
# tests/cli/check_build.sh PIPEFUSE WORKDIR: `pipefuse check --build` fills the kernel
# cache ahead of a run. Building the same plan and formats again compiles nothing; each
# format is its own kernel; an unknown format, and --build without NVRTC, are refused;
# without --build a missing NVRTC is a notice, not an error.
PF=$1
W=$2
. "$(dirname "$0")/testlib.sh"
rm -rf "$W" && mkdir -p "$W" || exit 1
export PIPEFUSE_CACHE_DIR=$W/cache
cat > "$W/chain.json" << 'JSON'
{"pipefuse": 1, "inputs": ["src"],
 "stages": [{"id": "b", "op": "brightness", "inputs": ["src"], "params": {"amount": 0.05}},
            {"id": "c", "op": "contrast", "inputs": ["b"], "params": {"amount": 1.2}},
            {"id": "e", "op": "box", "inputs": ["c"], "params": {"radius": 1}},
            {"id": "g", "op": "gamma", "inputs": ["e"], "params": {"gamma": 1.5}},
            {"id": "l", "op": "linear", "inputs": ["g"], "params": {"a": 0.9, "b": 0.05}}],
 "outputs": {"out": "l"}}
JSON

pf check "$W/chain.json" --format bogus
expect 2 "an unknown format"
says "$W/stderr" "unknown format" "an unknown format"
pf check "$W/chain.json" --format rgb8,
expect 0 "a trailing comma"

PIPEFUSE_NVRTC=off pf check "$W/chain.json" --build
expect 2 "--build without NVRTC"
says "$W/stderr" "NVRTC" "--build without NVRTC"
PIPEFUSE_NVRTC=off pf check "$W/chain.json"
expect 0 "check without NVRTC"
says "$W/stdout" "not compiled" "check without NVRTC"

pf check "$W/chain.json" --size 640x480
if grep -q "not compiled" "$W/stdout"; then
    echo "check_build: no NVRTC on this machine: the cache checks need it"
else
    rm -rf "$W/cache"
    # Two point units (before and after the box), three formats: six kernels.
    pf check "$W/chain.json" --size 640x480 --build --format rgb8,rgba8 --format gray16
    expect 0 "check --build"
    says "$W/stdout" "6 built" "check --build, three formats"
    says "$W/stdout" "6 compiled with NVRTC, 0 from the kernel cache" "check --build, cold"
    [ -n "$(ls -A "$W/cache" 2> /dev/null)" ] || fail "check --build left the kernel cache empty"
    pf check "$W/chain.json" --size 640x480 --build --format gray16,rgba8,rgb8
    expect 0 "check --build again"
    says "$W/stdout" "0 compiled with NVRTC, 6 from the kernel cache" "check --build, warm"
    pf check "$W/chain.json" --size 640x480 --build --format graya8
    says "$W/stdout" "2 compiled with NVRTC" "a new format"
    # A changed parameter is a value, not source: no new kernel.
    sed 's/"amount": 0.05/"amount": 0.25/' "$W/chain.json" > "$W/chain2.json"
    pf check "$W/chain2.json" --size 640x480 --build --format rgb8
    says "$W/stdout" "0 compiled with NVRTC, 2 from the kernel cache" "a parameter value"
fi

# Summing reduces: one fused with the point stage only it reads, one of an input; a
# histogram is not a plain sum. The plan says so with or without NVRTC here; with it,
# --build compiles the two sums' kernels in each format.
cat > "$W/sums.json" << 'JSON'
{"pipefuse": 1, "inputs": ["x"],
 "stages": [{"id": "a", "op": "linear", "inputs": ["x"], "params": {"a": 2.0, "b": 0.5}},
            {"id": "s", "op": "colsum", "inputs": ["a"]},
            {"id": "r", "op": "rowsum", "inputs": ["x"]},
            {"id": "h", "op": "histogram", "inputs": ["x"]}],
 "outputs": {"cols": "s", "rows": "r", "hist": "h"}}
JSON
pf check "$W/sums.json" --size 300x200
expect 0 "check of summing reduces"
says "$W/stdout" "fused into reduce s (colsum)" "a point stage fused into its sum"
says "$W/stdout" "R: s (colsum, sum by columns) in one kernel with a" "the fused column sum"
says "$W/stdout" "R: r (rowsum, sum by rows) in one kernel" "the row sum of an input"
grep -q "R: h " "$W/stdout" && fail "a histogram was shown as a fused sum"
sed 's/"outputs"/"options": {"fusion": false}, "outputs"/' "$W/sums.json" > "$W/sums_off.json"
pf check "$W/sums_off.json" --size 300x200
grep -q "fused reductions" "$W/stdout" && fail "fusion off still fuses reductions"
if ! grep -q "not compiled" "$W/stdout"; then
    pf check "$W/sums.json" --size 300x200 --build --format grayf,rgba16
    expect 0 "check --build of summing reduces"
    says "$W/stdout" "4 built" "two sums in two formats"
fi
[ "$failures" = 0 ] || exit 1
echo "check_build: ok"
