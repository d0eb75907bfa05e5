#!/bin/bash
# tests/sdk/author_test.sh: a plugin author's fusable stages, proved by `plugin check` on a
# machine without a GPU.
#
#   author_test.sh CMAKE BUILD_DIR WORK_DIR
#
# pipefuse is installed into a temporary prefix; the installed sample plugin, which has a
# stage of each kind that fuses (a point op, a 3x3 stencil declaring stencil_fn, a
# separable stencil declaring separable_fn, a summing reduce declaring reduce_sum), is
# built outside the tree with nothing but pkg-config and cc, as a Makefile would, and
# `plugin check` passes it with each fused form compiled for the host and compared with
# the stage's own CPU code (and, where NVRTC is, the generated kernels compiled). Then
# the mistakes authors make, one per copy of the sample, each fail it with their message:
#   a stencil_fn that disagrees with run_cpu;
#   a reduce_sum on a table that is not a plain sum (a per-row mean) and declares no
#   reduce_finish; a reduce_finish that the stage's own combine does not apply;
#   a stencil_fn naming a missing function, or one of another signature;
#   printf in a stencil function's header;
#   a separable stencil whose run_cpu normalises its taps otherwise than the engine;
# and a stencil_fn on a stage of radius 2, which the engine ignores, is a warning.
# A kernel kept with --dump-kernels compiles with nvcc from the installed headers alone
# (where nvcc is).
set -u
CMAKE=$1 BUILD=$2 WORK=$3
W=$WORK/author
rm -rf "$W" && mkdir -p "$W" && chmod 755 "$W" || exit 1
unset PIPEFUSE_PLUGIN_PATH
. "$(dirname "$0")/testlib.sh"
# temporary files (plugin check's host compiles, the sources of kernels NVRTC refused)
# stay in the work directory
mkdir -p "$W/tmp" && export TMPDIR=$W/tmp

P=$W/prefix
step install "$CMAKE" --install "$BUILD" --prefix "$P" || exit 1
L=$(cd "$P" && dirname "$(ls -d lib*/pkgconfig | head -1)")
PF=$P/bin/pipefuse
SAMPLE=$P/share/doc/pipefuse/samples/plugin
for f in include/pipefuse/fused_rt.h include/pipefuse/premultiply.h include/pipefuse/separable_rt.h \
    include/pipefuse/ops/filter3x3_ops.h "${SAMPLE#"$P"/}/soften.h"; do
    [ -e "$P/$f" ] || fail "not installed: $f"
done
export PKG_CONFIG_PATH=$P/$L/pkgconfig
CFLAGS=$(pkg-config --cflags pipefuse) || { fail "pkg-config --cflags pipefuse"; exit 1; }

# build NAME [SED-SCRIPT FILE]...: the sample copied to $W/NAME, each FILE edited with its
# sed script (which must change it), then built CPU-only into $W/NAME/plugins/darkroom.so.
build() {
    local name=$1 d=$W/$1
    shift
    mkdir -p "$d/plugins" && cp "$SAMPLE"/*.c "$SAMPLE"/*.h "$d/" && chmod 755 "$d" "$d/plugins" || return 1
    while [ $# -ge 2 ]; do
        cp "$d/$2" "$d/$2.orig"
        sed -i "$1" "$d/$2"
        cmp -s "$d/$2" "$d/$2.orig" && { fail "$name: the edit '$1' changed nothing in $2 (the sample changed?)"; return 1; }
        shift 2
    done
    local h
    for h in spotlight_ops emboss soften profile; do # POINT_OPS, embedded as pipefuse_add_plugin does
        {
            printf 'const char pf_src_%s[] =\n"#line 1 \\"%s\\"\\n"\n' "$h" "$d/$h.h"
            sed 's/\\/\\\\/g; s/"/\\"/g; s/^/"/; s/$/\\n"/' "$d/$h.h"
            printf ';\n'
        } >"$d/${h}_src.c"
    done
    step "build_$name" cc -std=c11 -O2 -fPIC -shared -fvisibility=hidden $CFLAGS -I"$d" "$d/darkroom.c" \
        "$d/spotlight_ops_src.c" "$d/emboss_src.c" "$d/soften_src.c" "$d/profile_src.c" \
        -o "$d/plugins/darkroom.so" -lm
}

# ---- the sample as installed: every fused form proved -----------------------------------
if build good; then
    run good "$PF" plugin check "$W/good/plugins/darkroom.so"
    expect good 0
    says good "result: PASS"
    says good "ok    point_fn spotlight, compiled for the host, computes what point_row does"
    says good "ok    stencil_fn emboss_fused, compiled for the host, computes what run_cpu does"
    says good "ok    separable_fn soften_taps, compiled for the host, computes what run_cpu does"
    says good "ok    reduce_finish profile_finish, compiled for the host, of the input's sums by rows is the table"
    says good "ok    fusion: in brightness -> emboss -> linear the GPU runs emboss as the engine's kernel"
    says good "ok    fusion: in brightness -> profile the GPU runs profile as the engine's kernel"
    if grep -qF "skip  NVRTC compile" "$W/good.out"; then
        echo "author: NVRTC not found here: the generated kernels were not compiled"
    else
        says good "ok    NVRTC compiles the generated kernels of brightness -> emboss -> linear"
        says good "ok    NVRTC compiles the generated kernels of brightness -> soften -> linear"
        says good "ok    NVRTC compiles the generated kernels of brightness -> profile"
        # a dumped kernel compiles from the SDK alone
        mkdir -p "$W/dump"
        step dump "$PF" plugin check "$W/good/plugins/darkroom.so" --stage emboss --dump-kernels "$W/dump"
        if command -v nvcc >/dev/null 2>&1; then
            for k in "$W"/dump/*.cu; do
                step "nvcc_$(basename "$k" .cu)" nvcc -arch=sm_90 -I"$P/include" -c "$k" -o "$k.o"
            done
        fi
    fi
    grep -q "FAIL" "$W/good.out" && fail "the installed sample fails a check"
fi

# ---- what pipefuse check prints of them ------------------------------------------------------
# brightness -> soften -> profile, and an emboss of the input: the brightness runs in the
# separable's row pass, the profile in a generated sum of its result, the emboss in its
# 3x3 kernel: four GPU launches (two passes, a sum, a stencil) for four launch units; with
# a stencil_fn of radius 2 the emboss is listed as not fused, with why, and runs its own
# kernel between the conversions of its input and output.
printf '{"pipefuse": 1, "inputs": ["x"], "stages": [{"id": "b", "op": "brightness", "inputs": ["x"]},
 {"id": "s", "op": "soften", "inputs": ["b"]}, {"id": "p", "op": "profile", "inputs": ["s"]},
 {"id": "e", "op": "emboss", "inputs": ["x"]}], "outputs": {"o": "s", "t": "p", "r": "e"}}\n' >"$W/plan.json"
if [ -f "$W/good/plugins/darkroom.so" ]; then
    run plan "$PF" --plugin-path "$W/good/plugins" check "$W/plan.json" --size 64x48
    expect plan 0
    says plan "S: s (soften, separable soften_taps) in two kernels (rows, then columns) with b on the rows it stages"
    says plan "R: p (profile, sum by rows, finished by profile_finish) in one kernel"
    says plan "S: e (emboss, 3x3 emboss_fused) in one kernel"
    says plan "launch units per frame: 4 (4 without fusion), GPU kernel launches per frame: 4,"
fi

# check NAME STAGE STATUS TEXT...: plugin check of $W/NAME's plugin, stage STAGE only,
# exits with STATUS and says every TEXT.
check() {
    local name=$1 stage=$2 status=$3
    shift 3
    run "check_$name" "$PF" plugin check "$W/$name/plugins/darkroom.so" --stage "$stage"
    expect "check_$name" "$status"
    local t
    for t in "$@"; do
        says "check_$name" "$t"
    done
}

# ---- the mistakes, one a plugin ----------------------------------------------------------
# run_cpu lighting from +x whatever the angle: not what stencil_fn computes
build disagree 's/out\[x\] = emboss_fused(p, n);/out[x] = emboss_pixel(p, n, 1.0f, 0.0f);/' darkroom.c &&
    check disagree emboss 1 "FAIL  emboss: stencil_fn 'emboss_fused' disagrees with run_cpu on 67x45 random images" \
        "fix: run_cpu and run_cuda must compute what emboss_fused computes"

# the table of row means declared a plain sum (no reduce_finish)
build mean 's/^    .reduce_finish = "profile_finish",$//' darkroom.c &&
    check mean profile 1 "FAIL  profile: reduce_sum says the table is the input's sum by rows, but with default params it is not" \
        "(the table is the sum divided by 67: a mean?)" "fix: declare reduce_sum only where every entry is the plain sum" \
        "or a function of it that reduce_finish names"

# a reduce_finish that combine does not apply: the CPU's table is the sums
build unfinished 's/result\[i\] = profile_finish(p, v, (int)(i \/ 4), (int)(i % 4), in->width, in->height);/result[i] = v;/' darkroom.c &&
    check unfinished profile 1 "FAIL  profile: reduce_finish 'profile_finish' of the input's sums by rows is not the table (default params)" \
        "fix: run_cpu with combine (and run_cuda with combine) must give reduce_finish of each entry's sum"

# a stencil_fn no function has (the name is mentioned in the header, inside emboss_fused)
build missing 's/\.stencil_fn = "emboss_fused"/.stencil_fn = "emboss_fuse"/' darkroom.c &&
    check missing emboss 1 "FAIL  emboss: stencil_fn 'emboss_fuse' does not compile for the host as \`pf_float4 emboss_fuse(const T *params, const pf_float4 *n)\` (T = emboss_params)" \
        "emboss_fuse" "fix: define \`PF_POINT_FN pf_float4 emboss_fuse(const T *params, const pf_float4 *n)\`"

# a function of another signature
build signature 's/\.stencil_fn = "emboss_fused"/.stencil_fn = "emboss_pixel"/' darkroom.c &&
    check signature emboss 1 "FAIL  emboss: stencil_fn 'emboss_pixel' does not compile for the host as" \
        "incompatible pointer type"

# printf in the stencil function's header (darkroom.c includes stdio.h before it, so the
# plugin itself builds)
build prints 's/^    emboss_direction(p, &dx, &dy);$/    emboss_direction(p, \&dx, \&dy);\n    printf("px\\n");/' emboss.h &&
    check prints emboss 1 "FAIL  emboss: stencil_fn's header (point_source) calls printf() (line" \
        "which a fused function may not use"

# run_cpu weighting every tap as the centre one (a box where separable_fn says a tent)
build taps 's/soften_taps(p, i, &t\[i\], &pm);/soften_taps(p, 0, \&t[i], \&pm);/' darkroom.c &&
    check taps soften 1 "FAIL  soften: separable_fn 'soften_taps' disagrees with run_cpu on 67x45 random images" \
        "fix: run_cpu must compute the engine's two passes with soften_taps's taps"

# stencil_fn on a stage of radius 2: ignored by the engine, so a warning, and a pass
build radius2 's/^    return 1;$/    return 2;/' darkroom.c &&
    check radius2 emboss 0 "warn  emboss: declares stencil_fn, but with its default params radius() returns 2" \
        "declares stencil_fn but has radius 2 (not 1)" "result: PASS" &&
    run plan_radius2 "$PF" --plugin-path "$W/radius2/plugins" check "$W/plan.json" --size 64x48 &&
    says plan_radius2 "declared but not fused (1):" &&
    says plan_radius2 "e (emboss): declares stencil_fn, not fused: stage 'e' (emboss) declares stencil_fn but has radius 2 (not 1); its own run_cuda runs"

finish author_test
