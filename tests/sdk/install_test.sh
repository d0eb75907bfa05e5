#!/bin/bash
# tests/sdk/install_test.sh: the installed SDK end to end, as a plugin author who has never
# seen pipefuse's source would use it.
#
#   install_test.sh CMAKE GENERATOR BUILD_DIR SOURCE_DIR WORK_DIR
#
# 1. `cmake --install BUILD_DIR` into a temporary prefix under umask 002: headers,
#    library, command, built-in plugins, CMake package, pkg-config file, README and every
#    guide of docs/ (each relative link of theirs resolves in the installed tree), the
#    sample; no directory group- or world-writable, and the installed command loads the
#    built-in plugins;
# 2. the sample plugin configured and built from the installed copy with
#    find_package(pipefuse) and pipefuse_add_plugin (under umask 002, which the helper
#    must undo for the engine to accept the plugin), its ctest (plugin check) run;
# 3. `pipefuse stages` names the plugin's file; `pipefuse check` shows the sample's
#    point stage fused with built-in ones; `pipefuse run` over the sample photos with
#    --backend cpu and with auto, through --plugin-path and PIPEFUSE_PLUGIN_PATH; the
#    reduce sample's table with both backends;
# 4. the skeleton through docs/plugins.md's "In an hour" walkthrough, command by command
#    (its my.json run over a folder of photos); then again with nothing but pkg-config,
#    sed and cc (CPU only), as a Makefile would;
# 5. an application built with find_package(pipefuse) and pipefuse::pipefuse (every
#    variable pipefuseConfig.cmake documents is set), and one with pkg-config, finding
#    the built-in plugins from the installed library;
# 6. the plugin's own `cmake --install` under umask 002 puts it where the engine looks,
#    in directories only their owner can write to; installed into pipefuse's own prefix,
#    it loads as a built-in plugin and `plugin check` of the build leaves the installed
#    copy out instead of failing on its stage names.
# No GPU is needed; where there is one, the plugin checks include their GPU parts.
set -u
CMAKE=$1 GEN=$2 BUILD=$3 SRC=$4 WORK=$5
W=$WORK/install
rm -rf "$W" && mkdir -p "$W" && chmod 755 "$W" || exit 1
unset PIPEFUSE_PLUGIN_PATH
. "$(dirname "$0")/testlib.sh"

P=$W/prefix
(umask 002 && step install "$CMAKE" --install "$BUILD" --prefix "$P") || exit 1
L=$(cd "$P" && dirname "$(ls -d lib*/pkgconfig | head -1)") # lib, lib64 or lib/<triplet>
for f in bin/pipefuse include/pipefuse/pipefuse.h include/pipefuse/plugin.h include/pipefuse/point.h \
    include/pipefuse/cuda.cuh $L/libpipefuse.so $L/cmake/pipefuse/pipefuseConfig.cmake \
    $L/cmake/pipefuse/pipefuseConfigVersion.cmake $L/cmake/pipefuse/pipefuse_plugin.cmake \
    $L/pkgconfig/pipefuse.pc $L/pipefuse/plugins/color.so share/doc/pipefuse/README.md \
    share/doc/pipefuse/samples/plugin/CMakeLists.txt share/doc/pipefuse/samples/plugin/skeleton/my_plugin.c \
    share/doc/pipefuse/samples/plugin/skeleton/my.json share/man/man1/pipefuse.1; do
    [ -e "$P/$f" ] || fail "not installed: $f"
done
[ "$failures" -eq 0 ] || exit 1
PF=$P/bin/pipefuse

# umask 002: still no directory that the group or others can write to, so the engine
# takes the built-in plugins.
WRITABLE=$(find "$P" -type d -perm /022)
[ -z "$WRITABLE" ] || fail "installed under umask 002, writable by group or others: $WRITABLE"
step builtin_stages "$PF" stages
says builtin_stages "gaussian  (stencil"
grep -q "refusing" "$W/builtin_stages.out" && fail "the installed pipefuse refuses its plugins"
step builtin_run "$PF" run "$P/share/pipefuse/pipelines/demo.json" "$SRC/samples/images/coffee.png" \
    -o "$W/out-builtin" -q
[ -s "$W/out-builtin/coffee.png" ] || fail "the installed pipefuse ran demo.json to no output"

# Every guide of docs/, and README's links to them working from the installed README.
DOC=$P/share/doc/pipefuse
for f in "$SRC"/docs/*.md; do
    [ -s "$DOC/docs/$(basename "$f")" ] || fail "not installed: docs/$(basename "$f")"
done
# Every relative link of the installed README and guides points to an installed file:
# docs/NAME.md beside it, and pipelines/ and engine/include/ rewritten to where those are.
for md in "$DOC/README.md" "$DOC"/docs/*.md; do
    while IFS= read -r link; do
        case $link in http://* | https://* | mailto:* | '#'* | '') continue ;; esac
        [ -e "$(dirname "$md")/${link%%#*}" ] ||
            fail "the installed ${md#"$DOC/"} links to $link, which is not in the installed tree"
    done < <(grep -o '\]([^)]*)' "$md" | sed 's/^](//; s/)$//' | sort -u)
done

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
# how each of the sample's stages fuses
says stages "fusion: fuses with the point stages beside it into one kernel (point op spotlight)"
says stages "fusion: a generated 3x3 kernel (stencil_fn emboss_fused, where the radius is 1)"
says stages "fusion: two generated passes (separable_fn soften_taps, radius up to 16)"
says stages "fusion: a generated sum by rows that runs the point stages producing its input"
says stages "fusion: none: its own kernels (run_cuda)"

step plugin_check "$PF" plugin check "$PLUG/darkroom.so"
says plugin_check "result: PASS"
says plugin_check "fusion: brightness -> spotlight -> linear -> multiply is one launch unit"
step sample_ctest "$CMAKE" -E chdir "$W/darkroom" ctest --output-on-failure
says sample_ctest "darkroom_plugin_check"

step check "$PF" --plugin-path "$PLUG" check "$SAMPLE/darkroom.json" --size 64x48
# the sample's point stages and its emboss (stencil_fn) in the emboss's one kernel
says check "G0: lift + spot + punch   (3 point stages, fused into stencil relief (emboss)"
says check "S: relief (emboss, 3x3 emboss_fused) in one kernel with lift + spot + punch on its tile, then mix on its result"
says check "GPU kernel launches per frame: 1,"

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

# ---- the skeleton, through docs/plugins.md's walkthrough -------------------------------------------------
# The "In an hour" commands as written (the generator, and compile_commands.json for the
# checks below, added); photos/ a folder of PNG files. No build type: the helper still
# optimises and compiles C11 without GNU extensions.
mkdir -p "$W/walk" || exit 1
PREFIX=$P
(
    cd "$W/walk" || exit 1
    step walk_copy cp -r $PREFIX/share/doc/pipefuse/samples/plugin/skeleton myplugin && cd myplugin &&
        step skeleton_configure "$CMAKE" -S . -B build -DCMAKE_PREFIX_PATH=$PREFIX -G "$GEN" \
            -DCMAKE_EXPORT_COMPILE_COMMANDS=ON &&
        step skeleton_build "$CMAKE" --build build &&
        step skeleton_check $PREFIX/bin/pipefuse plugin check build/pipefuse-plugins/myplugin.so &&
        step walk_stages $PREFIX/bin/pipefuse --plugin-path build/pipefuse-plugins stages my_gain &&
        mkdir photos && cp "$SRC/samples/images/coffee.png" photos/ &&
        step walk_run $PREFIX/bin/pipefuse --plugin-path build/pipefuse-plugins run my.json photos/ -o out/
    exit $failures
) || fail "the walkthrough of docs/plugins.md stopped"
says walk_stages "my_gain  (point, 1 input, fusable)  from myplugin"
[ -s "$W/walk/myplugin/out/coffee.png" ] || fail "walkthrough: run my.json photos/ -o out/ wrote no out/coffee.png"
grep -qF 'run my.json photos/ -o out/' "$SRC/docs/plugins.md" || fail "docs/plugins.md's walkthrough changed: update this test"
says skeleton_configure "plugins are built with -O2"
CC_LINE=$(grep '"command"' "$W/walk/myplugin/build/compile_commands.json" | grep 'my_plugin\.c')
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
if(NOT PIPEFUSE_VERSION STREQUAL pipefuse_VERSION OR NOT PIPEFUSE_VERSION MATCHES "^[0-9]+\\.[0-9]+\\.[0-9]+$")
  message(FATAL_ERROR "PIPEFUSE_VERSION is '${PIPEFUSE_VERSION}', pipefuse_VERSION '${pipefuse_VERSION}'")
endif()
foreach(v ${DOCUMENTED})
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "pipefuseConfig.cmake documents ${v} but does not set it")
  endif()
endforeach()
add_executable(app app.c)
target_link_libraries(app PRIVATE pipefuse::pipefuse)
CM
# A sanitizer build of pipefuse needs its applications built with the sanitizer too.
SAN=
ldd "$P/$L/libpipefuse.so" 2>/dev/null | grep -q libasan && SAN="-fsanitize=address,undefined"
# The variables the installed pipefuseConfig.cmake lists in its header.
DOCUMENTED=$(sed -n '/^# Variables:/,/^[^#]/p' "$P/$L/cmake/pipefuse/pipefuseConfig.cmake" |
    grep -o 'PIPEFUSE_[A-Z_]*' | sort -u | tr '\n' ';')
case $DOCUMENTED in *PIPEFUSE_VERSION*) ;; *) fail "pipefuseConfig.cmake documents no PIPEFUSE_VERSION: $DOCUMENTED" ;; esac
step app_configure "$CMAKE" -S "$W/app" -B "$W/app/build" -G "$GEN" -DCMAKE_PREFIX_PATH="$P" \
    "-DDOCUMENTED=$DOCUMENTED" \
    -DCMAKE_C_FLAGS="$SAN" -DCMAKE_EXE_LINKER_FLAGS="$SAN" &&
    step app_build "$CMAKE" --build "$W/app/build" &&
    step app_run env -u PIPEFUSE_PLUGIN_PATH "$W/app/build/app" && says app_run "app: pipefuse"
LIBDIR=$(pkg-config --variable=libdir pipefuse)
step pc_app cc -std=c11 $SAN $CFLAGS "$W/app/app.c" -o "$W/app/pc-app" $(pkg-config --libs pipefuse) \
    -Wl,-rpath,"$LIBDIR" && step pc_app_run "$W/app/pc-app" && says pc_app_run "app: pipefuse"

# ---- the plugin's own install ---------------------------------------------------------------------------
# Under umask 002: the directories it creates, and the plugin, writable by their owner only.
(umask 002 && step plugin_install "$CMAKE" --install "$W/darkroom" --prefix "$W/userprefix") &&
    [ "$(stat -c %a "$W"/userprefix/lib*/pipefuse/plugins/darkroom.so)" = 755 ] ||
    fail "the sample's install: $W/userprefix/lib*/pipefuse/plugins/darkroom.so missing or writable by others"
WRITABLE=$(find "$W/userprefix" -type d -perm /022)
[ -z "$WRITABLE" ] || fail "the sample installed under umask 002: writable by group or others: $WRITABLE"
step user_stages "$PF" --plugin-path "$(echo "$W"/userprefix/lib*/pipefuse/plugins)" stages spotlight
grep -q "refusing" "$W/user_stages.out" && fail "the engine refuses the sample's installed plugin directory"

# Into pipefuse's own prefix, as docs/plugins.md says: a built-in plugin from then on, and
# `plugin check` of the rebuilt plugin is not a clash with its installed copy.
(umask 002 && step plugin_install_builtin "$CMAKE" --install "$W/darkroom" --prefix "$P") || exit 1
step installed_stages "$PF" stages spotlight
says installed_stages "spotlight  (point, 1 input, fusable)  from darkroom: $P/$L/pipefuse/plugins/darkroom.so"
run recheck "$PF" plugin check "$PLUG/darkroom.so"
expect recheck 0
says recheck "result: PASS"
says recheck "$P/$L/pipefuse/plugins/darkroom.so is an installed copy of this plugin"
grep -q "already taken" "$W/recheck.out" && fail "plugin check: the installed copy clashes with the plugin"
step recheck_ctest "$CMAKE" -E chdir "$W/darkroom" ctest --output-on-failure
# The installed copy itself is checked in place, as a built-in plugin.
run installed_check "$PF" plugin check "$P/$L/pipefuse/plugins/darkroom.so"
expect installed_check 0
says installed_check "loads: it is one of the built-in plugins"

finish install_test
