#!/bin/bash
# tests/sdk/install_test.sh: the installed SDK end to end, as a plugin author who has never
# seen pipefuse's source would use it.
#
#   install_test.sh CMAKE GENERATOR BUILD_DIR SOURCE_DIR WORK_DIR
#
# 1. `cmake --install BUILD_DIR` into a temporary prefix: headers, library, command,
#    built-in plugins, CMake package, pkg-config file, guide and sample;
# 2. the sample plugin configured and built from the installed copy with
#    find_package(pipefuse) and pipefuse_add_plugin (under umask 002, which the helper
#    must undo for the engine to accept the plugin), its ctest (plugin check) run;
# 3. `pipefuse stages` names the plugin's file; `pipefuse check` shows the sample's
#    point stage fused with built-in ones; `pipefuse run` over the sample photos with
#    --backend cpu and with auto, through --plugin-path and PIPEFUSE_PLUGIN_PATH; the
#    reduce sample's table with both backends;
# 4. the skeleton built the same way and checked; then again with nothing but
#    pkg-config, sed and cc (CPU only), as a Makefile would;
# 5. an application built with find_package(pipefuse) and pipefuse::pipefuse, and one
#    with pkg-config, finding the built-in plugins from the installed library;
# 6. the plugin's own `cmake --install` puts it where the engine looks.
# No GPU is needed; where there is one, the plugin checks include their GPU parts.
set -u
CMAKE=$1 GEN=$2 BUILD=$3 SRC=$4 WORK=$5
W=$WORK/install
rm -rf "$W" && mkdir -p "$W" && chmod 755 "$W" || exit 1
unset PIPEFUSE_PLUGIN_PATH
. "$(dirname "$0")/testlib.sh"

P=$W/prefix
step install "$CMAKE" --install "$BUILD" --prefix "$P" || exit 1
L=$(cd "$P" && dirname "$(ls -d lib*/pkgconfig | head -1)") # lib, lib64 or lib/<triplet>
for f in bin/pipefuse include/pipefuse/pipefuse.h include/pipefuse/plugin.h include/pipefuse/point.h \
    include/pipefuse/cuda.cuh $L/libpipefuse.so $L/cmake/pipefuse/pipefuseConfig.cmake \
    $L/cmake/pipefuse/pipefuseConfigVersion.cmake $L/cmake/pipefuse/pipefuse_plugin.cmake \
    $L/pkgconfig/pipefuse.pc $L/pipefuse/plugins/color.so share/doc/pipefuse/plugins.md \
    share/doc/pipefuse/samples/plugin/CMakeLists.txt share/doc/pipefuse/samples/plugin/skeleton/my_plugin.c; do
    [ -e "$P/$f" ] || fail "not installed: $f"
done
[ "$failures" -eq 0 ] || exit 1
PF=$P/bin/pipefuse

# The ABI version, as the header defines it, in both packages.
ABI=$(sed -n 's/^#define[ \t]*PF_ABI_MAJOR[ \t]*\([0-9]*\).*/\1/p' "$P/include/pipefuse/plugin.h").$(
    sed -n 's/^#define[ \t]*PF_ABI_MINOR[ \t]*\([0-9]*\).*/\1/p' "$P/include/pipefuse/plugin.h")
case $ABI in [0-9]*.[0-9]*) ;; *) fail "cannot read the ABI version from plugin.h: '$ABI'" ;; esac
grep -qx "abi_version=$ABI" "$P/$L/pkgconfig/pipefuse.pc" ||
    fail "pipefuse.pc: no abi_version=$ABI ($(grep abi_version "$P/$L/pkgconfig/pipefuse.pc"))"
grep -qF "set(PIPEFUSE_ABI_VERSION \"$ABI\")" "$P/$L/cmake/pipefuse/pipefuseConfig.cmake" ||
    fail "pipefuseConfig.cmake: PIPEFUSE_ABI_VERSION is not $ABI"
SAMPLE=$P/share/doc/pipefuse/samples/plugin

# ---- the sample, with CMake, from the installed copy ---------------------------------------------
(umask 002 && step sample_configure "$CMAKE" -S "$SAMPLE" -B "$W/darkroom" -G "$GEN" \
    -DCMAKE_PREFIX_PATH="$P" -DCMAKE_BUILD_TYPE=Release) || exit 1
(umask 002 && step sample_build "$CMAKE" --build "$W/darkroom") || exit 1
PLUG=$W/darkroom/pipefuse-plugins
[ -f "$PLUG/darkroom.so" ] || { fail "no $PLUG/darkroom.so"; exit 1; }
[ "$(stat -c %a "$PLUG")" = 755 ] || fail "plugin directory mode $(stat -c %a "$PLUG"), expected 755"
[ "$(stat -c %a "$PLUG/darkroom.so")" = 755 ] || fail "plugin mode $(stat -c %a "$PLUG/darkroom.so")"
if grep -q "CUDA" "$W/sample_build.out"; then echo "sample: CUDA parts built"; else echo "sample: CPU only (no CUDA compiler)"; fi

step stages "$PF" --plugin-path "$PLUG" stages
says stages "spotlight  (point, 1 input, fusable)  from darkroom: $PLUG/darkroom.so"
says stages "emboss  (stencil, 1 input)  from darkroom: $PLUG/darkroom.so"

step plugin_check "$PF" plugin check "$PLUG/darkroom.so"
says plugin_check "result: PASS"
says plugin_check "fusion: brightness -> spotlight -> linear -> multiply is one launch unit"
step sample_ctest "$CMAKE" -E chdir "$W/darkroom" ctest --output-on-failure
says sample_ctest "darkroom_plugin_check"

step check "$PF" --plugin-path "$PLUG" check "$SAMPLE/darkroom.json" --size 64x48
says check "G0: lift + spot + punch   (3 point stages, one kernel)"

for backend in cpu auto; do
    step "run_$backend" "$PF" --plugin-path "$PLUG" run "$SAMPLE/darkroom.json" "$SRC/samples/images" \
        -o "$W/out-$backend" --backend "$backend" -q
    for img in "$SRC"/samples/images/*.png; do
        [ -s "$W/out-$backend/$(basename "$img")" ] || fail "run --backend $backend: no output for $(basename "$img")"
    done
done
# The reduce sample: a CSV table per photo, the same counts on every backend.
says stages "zones  (reduce, 1 input)  from darkroom: $PLUG/darkroom.so"
for backend in cpu auto; do
    step "zones_$backend" "$PF" --plugin-path "$PLUG" run "$SAMPLE/zones.json" "$SRC/samples/images/coffee.png" \
        -o "$W/zones-$backend" --backend "$backend" -q
done
Z=$W/zones-cpu/coffee.zones.csv
[ "$(head -1 "$Z" 2>/dev/null)" = "row,pixels,mean_luma" ] && [ "$(wc -l <"$Z")" -ge 6 ] ||
    fail "zones: $Z is not a table of 6 zones"
cmp -s <(cut -d, -f1,2 "$Z") <(cut -d, -f1,2 "$W/zones-auto/coffee.zones.csv" 2>/dev/null) ||
    fail "zones: the pixel counts differ between --backend cpu and auto"
PIPEFUSE_PLUGIN_PATH=$PLUG step run_env "$PF" run "$SAMPLE/darkroom.json" "$SRC/samples/images/coffee.png" -o "$W/out-env" -q
[ -s "$W/out-env/coffee.png" ] || fail "run through PIPEFUSE_PLUGIN_PATH: no output"
cmp -s "$W/out-cpu/coffee.png" "$W/out-env/coffee.png" || fail "the CPU runs through --plugin-path and PIPEFUSE_PLUGIN_PATH differ"

# ---- the skeleton, with CMake ---------------------------------------------------------------------------
# No build type: the helper still optimises and compiles C11 without GNU extensions.
step skeleton_configure "$CMAKE" -S "$SAMPLE/skeleton" -B "$W/skeleton" -G "$GEN" -DCMAKE_PREFIX_PATH="$P" \
    -DCMAKE_EXPORT_COMPILE_COMMANDS=ON &&
    step skeleton_build "$CMAKE" --build "$W/skeleton" &&
    step skeleton_check "$PF" plugin check "$W/skeleton/pipefuse-plugins/myplugin.so"
says skeleton_configure "plugins are built with -O2"
CC_LINE=$(grep '"command"' "$W/skeleton/compile_commands.json" | grep 'my_plugin\.c')
case $CC_LINE in *" -O2 "*) ;; *) fail "skeleton without a build type: my_plugin.c not compiled with -O2: $CC_LINE" ;; esac
case $CC_LINE in *"-std=c11 "*) ;; *) fail "skeleton: my_plugin.c not compiled with -std=c11: $CC_LINE" ;; esac

# ---- the skeleton with pkg-config, sed and cc (CPU only) ---------------------------------------------
export PKG_CONFIG_PATH=$P/$L/pkgconfig
CFLAGS=$(pkg-config --cflags pipefuse) || fail "pkg-config --cflags pipefuse"
mkdir -p "$W/pc-plugin" && chmod 755 "$W/pc-plugin"
{
    printf 'const char pf_src_my_ops[] =\n'
    sed 's/\\/\\\\/g; s/"/\\"/g; s/^/"/; s/$/\\n"/' "$SAMPLE/skeleton/my_ops.h"
    printf ';\n'
} >"$W/my_ops_src.c"
# The skeleton compiles without a warning under -Wall -Wextra, as authors will build it.
if step pc_plugin cc -std=c11 -O2 -Wall -Wextra -Werror -fPIC -shared -fvisibility=hidden $CFLAGS -I"$SAMPLE/skeleton" \
    "$SAMPLE/skeleton/my_plugin.c" "$W/my_ops_src.c" -o "$W/pc-plugin/myplugin.so" -lm &&
    step pc_plugin_check "$PF" plugin check "$W/pc-plugin/myplugin.so"; then
    # Without NVRTC on the machine the compile is reported as skipped.
    grep -qF "skip  NVRTC compile" "$W/pc_plugin_check.out" ||
        says pc_plugin_check "NVRTC compiles the fused kernel of brightness -> my_gain -> linear -> multiply"
fi

# ---- applications -------------------------------------------------------------------------------------------
mkdir -p "$W/app"
cat >"$W/app/app.c" <<'C'
#include <stdio.h>
#include <pipefuse/pipefuse.h>
int main(void)
{
    pf_engine *e = NULL;
    int rc = pf_engine_create(NULL, &e);
    if (rc != PF_OK || pf_version() != PF_VERSION_NUMBER || !pf_engine_find_stage(e, "gaussian")) {
        fprintf(stderr, "app: %s\n", e ? pf_engine_errmsg(e) : pf_status_str(rc));
        pf_engine_destroy(e);
        return 1;
    }
    printf("app: pipefuse %s, %d stages\n", pf_version_string(), pf_engine_stage_count(e));
    pf_engine_destroy(e);
    return 0;
}
C
cat >"$W/app/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.24)
project(app LANGUAGES C)
find_package(pipefuse 0.1 REQUIRED)
if(NOT PIPEFUSE_ABI_VERSION MATCHES "^[0-9]+\\.[0-9]+$")
  message(FATAL_ERROR "PIPEFUSE_ABI_VERSION is '${PIPEFUSE_ABI_VERSION}'")
endif()
add_executable(app app.c)
target_link_libraries(app PRIVATE pipefuse::pipefuse)
CM
# A sanitizer build of pipefuse needs its applications built with the sanitizer too.
SAN=
ldd "$P/$L/libpipefuse.so" 2>/dev/null | grep -q libasan && SAN="-fsanitize=address,undefined"
step app_configure "$CMAKE" -S "$W/app" -B "$W/app/build" -G "$GEN" -DCMAKE_PREFIX_PATH="$P" \
    -DCMAKE_C_FLAGS="$SAN" -DCMAKE_EXE_LINKER_FLAGS="$SAN" &&
    step app_build "$CMAKE" --build "$W/app/build" &&
    step app_run env -u PIPEFUSE_PLUGIN_PATH "$W/app/build/app" && says app_run "app: pipefuse"
LIBDIR=$(pkg-config --variable=libdir pipefuse)
step pc_app cc -std=c11 $SAN $CFLAGS "$W/app/app.c" -o "$W/app/pc-app" $(pkg-config --libs pipefuse) \
    -Wl,-rpath,"$LIBDIR" && step pc_app_run "$W/app/pc-app" && says pc_app_run "app: pipefuse"

# ---- the plugin's own install ---------------------------------------------------------------------------
step plugin_install "$CMAKE" --install "$W/darkroom" --prefix "$W/userprefix" &&
    [ "$(stat -c %a "$W"/userprefix/lib*/pipefuse/plugins/darkroom.so)" = 755 ] ||
    fail "the sample's install: $W/userprefix/lib*/pipefuse/plugins/darkroom.so missing or writable by others"

finish install_test
