#!/bin/bash
# tests/sdk/gpu_fused_test.sh: the sample plugin's fused forms on a CUDA device, by
# `plugin check` (CPU against the engine's generated kernels and the stage's own, fused
# against unfused, banded against whole, graph replay against eager launches): the
# emboss's stencil_fn, the soften's separable passes and the profile's summing reduce
# with its reduce_finish (row means finished on the device).
#
#   gpu_fused_test.sh PIPEFUSE PLUGIN WORK_DIR
#
# Exit 77 (skipped) without a CUDA device: every GPU check must have run, and passed.
set -u
PF=$1 PLUGIN=$2 WORK=$3
W=$WORK/gpu_fused
rm -rf "$W" && mkdir -p "$W" || exit 1
unset PIPEFUSE_PLUGIN_PATH
. "$(dirname "$0")/testlib.sh"

# a CPU-only build (the sanitizer presets) runs nothing on a device
if "$PF" info 2>/dev/null | grep -q '^cuda: *not built'; then
    echo "gpu_fused_test: $PF is built without CUDA; skipped"
    exit 77
fi
for stage in emboss soften profile; do
    run "$stage" "$PF" plugin check "$PLUGIN" --stage "$stage"
    if grep -q "skipped (no CUDA device)" "$W/$stage.out"; then
        echo "gpu_fused_test: no CUDA device; skipped"
        exit 77
    fi
    expect "$stage" 0
    says "$stage" "result: PASS"
    says "$stage" "ok    CPU against GPU (within the tolerance)"
    says "$stage" "ok    fused against unfused on the GPU (within the tolerance)"
    says "$stage" "ok    GPU determinism"
    # the stage ran as the engine's generated kernel in the chain (and so on the GPU)
    says "$stage" "ok    fusion: in brightness -> $stage"
done
finish gpu_fused_test
