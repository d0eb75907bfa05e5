#!/bin/bash
# tests/cli/band_test.sh: pipefuse run over large images in bands of rows (docs/batch.md).
#
#   band_test.sh SECTION PIPEFUSE CLI_HELPER SOURCE_DIR WORK_DIR [PLUGIN_DIR]
#
# identity  the same pipelines run whole (--band-rows off) and in bands of 1, 5 and 16
#           rows give the same files byte for byte: point chains, stencil chains (the
#           halo), several outputs, 8/16-bit gray, gray+alpha, RGB, RGBA, palette and tRNS
#           inputs, 1/2/4-bit gray, interlaced inputs (read whole), metadata before and
#           after the image data, --strip, two files at once; pipelines with resample
#           stages and position-dependent ops in strips of output rows (pipefuse/bands.h):
#           a resize of every kind, a crop and pad, a turn by any angle, a vignette; one
#           whose rows run up the image (a vertical flip) and one with a table output say
#           they run whole, and still run
# errors    a file cut short or corrupt in the middle of its image data fails naming the
#           row, leaves no output and no temporary, and the other files of the batch
#           are written; --max-memory counts a band, not the whole image, and auto bands
#           a file that would be over it whole (frames of bands, and strips), failing it
#           only below one band's need
# gpu       identity with --backend cuda (bands are frames on the GPU); 77 without a GPU
# memory    the peak resident memory of a 12-megapixel photo through a point and a
#           stencil pipeline stays under 64 MB in bands (GNU time; skipped without it),
#           and is over it with --band-rows off (the point pipeline: so the bound bites);
#           four of them at once through half size, a grade and a blur (strips) under
#           150 MB, where one whole frame is over it
set -u
SECTION=$1
PF=$2
HELPER=$3
SRC=$4
W=$5/band_$SECTION
PLUGINS=${6:-} # the posops test plugin's folder
rm -rf "$W"
mkdir -p "$W"
. "$(dirname "$0")/testlib.sh"

# same A B WHAT: every file under A is under B with the same bytes, and no more files.
same() {
    local a=$1 b=$2 what=$3 n=0
    [ "$(cd "$a" && find . -type f | sort)" = "$(cd "$b" && find . -type f | sort)" ] ||
        fail "$what: the files differ: $(cd "$a" && find . -type f | sort | tr '\n' ' ') against $(cd "$b" && find . -type f | sort | tr '\n' ' ')"
    while IFS= read -r f; do
        n=$((n + 1))
        cmp -s "$a/$f" "$b/$f" || fail "$what: $f differs from the whole-frame run"
    done < <(cd "$a" && find . -type f -name '*.png')
    [ "$n" -gt 0 ] || fail "$what: no outputs in $a"
}

# sanitized WHAT: the last run's stderr holds no sanitizer report (the worker goes on
# after a ThreadSanitizer warning, so the exit status alone does not tell).
sanitized() {
    grep -qE "WARNING: ThreadSanitizer|ERROR: AddressSanitizer|runtime error:" "$W/stderr" &&
        fail "$1: a sanitizer report: $(grep -m1 -E 'SUMMARY|runtime error' "$W/stderr")"
    return 0
}

pipeline() { # NAME STAGES OUTPUTS
    printf '{"pipefuse": 1, "inputs": ["photo"], "stages": [%s], "outputs": {%s}}\n' "$2" "$3" \
        >"$W/$1.json"
}

case $SECTION in
identity | gpu)
    BACKEND=cpu
    if [ "$SECTION" = gpu ]; then
        BACKEND=cuda
        "$HELPER" image "$W/probe.png" 16 16 3 8 || fail "cli_helper image"
        pf run "$SRC/pipelines/sharpen.json" "$W/probe.png" -o "$W/probe" --backend cuda
        if [ "$rc" = 2 ] && grep -q -- "--backend cuda" "$W/stderr"; then
            echo "no usable GPU: skipped"
            exit 77
        fi
    fi
    pf() { # every run of this section on the backend under test
        "$PF" "$@" --backend "$BACKEND" >"$W/stdout" 2>"$W/stderr"
        rc=$?
        sanitized "pipefuse $*"
    }
    mkdir -p "$W/in"
    "$HELPER" pngs "$W/in" || fail "cli_helper pngs"
    for f in rgb8:301:257:3:8 gray8:120:97:1:8 rgba16:77:130:4:16 graya16:64:64:2:16 \
        rgb16:90:61:3:16 gray16b:50:200:1:16; do
        IFS=: read -r name w h c b <<<"$f"
        "$HELPER" image "$W/in/$name.png" "$w" "$h" "$c" "$b" || fail "cli_helper image $name"
    done
    for f in basn0g01 basn0g02 basn0g04 basn3p01 basn3p04 basn3p08 ftbbn3p08 ftbrn2c08 \
        ftbwn0g16 basn4a16 basn6a08; do
        cp "$SRC/tests/data/pngsuite/$f.png" "$W/in/" || fail "missing PngSuite $f"
    done
    # interlaced (Adam7): read whole, whatever --band-rows says
    for f in ibasn2c08 ibasn0g16 ibasn3p08 ibasn6a16 interlaced/ibasn0g04; do
        cp "$SRC/tests/data/pngsuite/$f.png" "$W/in/" || fail "missing PngSuite $f"
    done
    # metadata: sRGB and text before the image data, zTXt and tEXt after it
    python3 - "$W/in/rgb8.png" "$W/in/meta.png" <<'EOF' || fail "cannot write meta.png"
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
def chunk(t, d):
    return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
out, p, seen = data[:8], 8, False
while p < len(data):
    n, t = struct.unpack(">I4s", data[p:p + 8])
    c = data[p:p + 12 + n]
    if t == b"IDAT" and not seen:
        out += chunk(b"sRGB", b"\0") + chunk(b"tEXt", b"Title\0before")
        seen = True
    if t == b"IEND":
        out += chunk(b"zTXt", b"Comment\0\0" + zlib.compress(b"after the image data"))
        out += chunk(b"tEXt", b"Author\0after")
    out += c
    p += 12 + n
open(sys.argv[2], "wb").write(out)
EOF
    pipeline point '{"id": "b", "op": "brightness", "params": {"amount": 0.07}}, {"id": "l", "op": "levels", "params": {"in_low": 0.1, "in_high": 0.9, "gamma": 1.3}}' '"out": "l"'
    pipeline stencil '{"id": "g", "op": "gaussian", "params": {"sigma": 1.5}}, {"id": "u", "op": "unsharp", "params": {"sigma": 1, "amount": 0.8}}, {"id": "x", "op": "box", "params": {"radius": 2}}, {"id": "m", "op": "median3"}, {"id": "s", "op": "sobel"}, {"id": "c", "op": "contrast", "params": {"amount": 1.5}}' '"out": "c"'
    pipeline multi '{"id": "g", "op": "gaussian", "params": {"sigma": 2}}, {"id": "i", "op": "invert"}, {"id": "s", "op": "sobel", "inputs": ["g"]}, {"id": "t", "op": "threshold", "inputs": ["photo"]}' \
        '"blur": "g", "neg": "i", "edges": {"from": "s", "format": "rgb16"}, "mask": "t", "same": "photo"'
    pipeline resize '{"id": "r", "op": "resize", "params": {"width": 40, "height": 30}}' '"out": "r"'
    pipeline vignette '{"id": "b", "op": "brightness", "params": {"amount": 0.1}}, {"id": "v", "op": "vignette"}' '"out": "v"'
    pipeline half '{"id": "r", "op": "resize", "params": {"scale": 0.5}}, {"id": "b", "op": "brightness", "params": {"amount": 0.05}}, {"id": "g", "op": "gaussian", "params": {"sigma": 1.5}}' '"out": "g"'
    pipeline lanczos '{"id": "s", "op": "sobel"}, {"id": "r", "op": "resize", "params": {"width": 123, "mode": "lanczos3"}}, {"id": "v", "op": "vignette"}' '"out": "v", "gray": {"from": "v", "format": "gray8"}'
    pipeline crop_pad '{"id": "c", "op": "crop", "params": {"width_pct": 70, "height_pct": 60, "gravity": "center"}}, {"id": "p", "op": "pad", "params": {"top": 9, "bottom": 2, "left": 3}}, {"id": "m", "op": "median3"}' '"out": "m"'
    pipeline rotate '{"id": "t", "op": "rotate", "params": {"degrees": 7}}, {"id": "a", "op": "resize", "params": {"scale": 0.37, "mode": "area"}}' '"out": "a"'
    pipeline flipv '{"id": "f", "op": "flip", "params": {"axis": "vertical"}}, {"id": "r", "op": "resize", "params": {"scale": 0.5}}' '"out": "r"'
    pipeline hist '{"id": "r", "op": "resize", "params": {"scale": 0.5}}, {"id": "h", "op": "histogram"}' '"small": "r", "hist": "h"'
    # the reader by rows gives pf_png_read_meta's rows, format and metadata
    for f in "$SRC"/tests/data/pngsuite/*.png "$SRC"/tests/data/pngsuite/interlaced/*.png "$W/in/meta.png"; do
        for rows in 1 7; do
            "$HELPER" rows "$f" "$rows" >/dev/null || fail "pf_png_rows, $rows at a time: $f"
        done
    done
    [ "$("$HELPER" rows "$SRC/tests/data/pngsuite/ibasn2c08.png" 4)" = interlaced ] ||
        fail "pf_png_rows: an interlaced file is not refused"
    # the halo: radii summed along a chain, the largest over branches; what keeps it whole
    halo() { # PIPELINE EXPECTED
        local got
        got=$("$HELPER" halo "$W/$1.json" 2>"$W/halo.err")
        case $got in "$2"*) ;; *) fail "$1: '$got', expected '$2'" ;; esac
    }
    pipeline chain '{"id": "x", "op": "box", "params": {"radius": 2}}, {"id": "m", "op": "median3"}, {"id": "s", "op": "sobel"}' '"out": "s"'
    pipeline branches '{"id": "x", "op": "box", "params": {"radius": 3}, "inputs": ["photo"]}, {"id": "s", "op": "sobel", "inputs": ["photo"]}, {"id": "b", "op": "blend", "inputs": ["x", "s"]}' '"out": "b"'
    pipeline unused '{"id": "r", "op": "resize", "params": {"width": 8, "height": 8}}, {"id": "b", "op": "brightness", "inputs": ["photo"]}' '"out": "b"'
    pipeline table '{"id": "h", "op": "histogram"}' '"out": "h"'
    halo chain "halo 4"
    halo branches "halo 3"
    halo unused "halo 0"
    halo point "halo 0"
    halo table "whole: stage h (op histogram) reduces"
    halo resize "whole: stage r (op resize) resamples"
    halo vignette "whole: stage v (op vignette) may read the pixel's position"
    # what the source text of an op says: the position named only in comments bands; read
    # directly, through a helper or a macro, or with no source text, it does not
    if [ -n "$PLUGINS" ]; then
        for op in none direct helper macro nosrc flagged; do
            pipeline "pos_$op" "{\"id\": \"o\", \"op\": \"pos_$op\"}" '"out": "o"'
        done
        export PIPEFUSE_PLUGIN_PATH=$PLUGINS
        halo pos_none "halo 0"
        halo pos_direct "whole: stage o (op pos_direct) may read the pixel's position"
        halo pos_helper "whole: stage o (op pos_helper) may read the pixel's position"
        halo pos_macro "whole: stage o (op pos_macro) may read the pixel's position"
        halo pos_nosrc "whole: stage o (op pos_nosrc) may read the pixel's position (no source text tells)"
        halo pos_flagged "halo 0"
        unset PIPEFUSE_PLUGIN_PATH
        # (the posops ops are CPU only: the band decision does not depend on the backend)
        for op in none direct; do
            [ "$BACKEND" = cpu ] || continue
            pf run "$W/pos_$op.json" "$W/in/rgb8.png" -o "$W/pos_$op.off" --band-rows off \
                --plugin-path "$PLUGINS"
            expect 0 "pos_$op, whole"
            pf run "$W/pos_$op.json" "$W/in/rgb8.png" -o "$W/pos_$op.4" --band-rows 4 \
                --plugin-path "$PLUGINS" -v
            expect 0 "pos_$op, --band-rows 4"
            same "$W/pos_$op.off" "$W/pos_$op.4" "pos_$op, --band-rows 4"
        done
        # in strips: every pixel computed where it is in the whole image
        [ "$BACKEND" = cpu ] && says "$W/stderr" "run in bands of rows" "pos_direct, --band-rows 4"
    else
        fail "no plugin folder given: the position tests did not run"
    fi
    for p in point stencil multi resize vignette half lanczos crop_pad rotate flipv hist; do
        pf run "$W/$p.json" "$W/in" -o "$W/$p.off" --band-rows off -v
        expect 0 "$p, whole frames"
        grep -q "in bands of rows" "$W/stderr" && fail "$p, --band-rows off: files run in bands"
        for rows in 1 5 16; do
            pf run "$W/$p.json" "$W/in" -o "$W/$p.$rows" --band-rows "$rows" -v
            expect 0 "$p, --band-rows $rows"
            case $p:$BACKEND in
            flipv:* | hist:*)
                says "$W/stderr" "images run whole" "$p, --band-rows $rows"
                grep -q "in bands of rows" "$W/stderr" && fail "$p, --band-rows $rows: banded"
                ;;
            resize:cuda | vignette:cuda | half:cuda | lanczos:cuda | crop_pad:cuda | rotate:cuda)
                # strips run on the CPU: on the GPU such pipelines run whole frames, and say so
                says "$W/stderr" "images run whole: on the GPU" "$p, --band-rows $rows"
                grep -q "in bands of rows" "$W/stderr" && fail "$p, --band-rows $rows: banded"
                ;;
            *) says "$W/stderr" "run in bands of rows" "$p, --band-rows $rows" ;;
            esac
            # a halo twice the band's rows or more: the rows computed over and over said
            if [ "$p:$BACKEND:$rows" = stencil:cpu:1 ]; then
                says "$W/stderr" "times the rows of the image; --band-rows" "$p, --band-rows 1"
            fi
            same "$W/$p.off" "$W/$p.$rows" "$p, --band-rows $rows"
        done
    done
    # pipefuse check says what strips hold, where a pipeline can run in them
    "$PF" check "$W/half.json" --size 4000x3000 >"$W/stdout" 2>"$W/stderr" || fail "check half"
    says "$W/stdout" "in strips (pipefuse run's large images, on the CPU):" "check half"
    "$PF" check "$W/hist.json" --size 400x300 >"$W/stdout" 2>"$W/stderr" || fail "check hist"
    grep -q "in strips" "$W/stdout" && fail "check hist: a reduce stage's pipeline in strips"
    pf run "$W/flipv.json" "$W/in/rgb8.png" -o "$W/flipv.again" --band-rows 8
    if [ "$BACKEND" = cpu ]; then
        says "$W/stderr" "the rows a band reads run up the image" "flipv, --band-rows 8"
    else
        says "$W/stderr" "images run whole: on the GPU" "flipv, --band-rows 8"
    fi
    pf run "$W/hist.json" "$W/in/rgb8.png" -o "$W/hist.again" --band-rows 8
    says "$W/stderr" "the pipeline has table outputs" "hist, --band-rows 8"
    # two inputs: the second (--input, the same size) is cut into the same bands
    pf run "$W/stencil.json" "$W/in/rgb8.png" -o "$W/second" --band-rows off
    expect 0 "a second input: making it"
    printf '%s\n' '{"pipefuse": 1, "inputs": ["a", "b"], "stages": [
        {"id": "g", "op": "gaussian", "inputs": ["b"], "params": {"sigma": 1}},
        {"id": "fade", "op": "blend", "inputs": ["a", "g"], "params": {"opacity": 0.3}},
        {"id": "diff", "op": "difference", "inputs": ["a", "b"]},
        {"id": "m", "op": "median3", "inputs": ["diff"]}],
        "outputs": {"fade": "fade", "diff": "m"}}' >"$W/two.json"
    pf run "$W/two.json" "$W/in/rgb8.png" --input "b=$W/second/rgb8.png" -o "$W/two.off" \
        --band-rows off
    expect 0 "two inputs, whole"
    for rows in 1 7; do
        pf run "$W/two.json" "$W/in/rgb8.png" --input "b=$W/second/rgb8.png" -o "$W/two.$rows" \
            --band-rows "$rows" -v
        expect 0 "two inputs, --band-rows $rows"
        says "$W/stderr" "run in bands of rows" "two inputs, --band-rows $rows"
        same "$W/two.off" "$W/two.$rows" "two inputs, --band-rows $rows"
    done
    # the metadata after the image data is written before it, as for whole frames
    python3 - "$W/point.5/meta.png" <<'EOF' || fail "point.5/meta.png: metadata lost or misplaced"
import struct, sys
d, p, names = open(sys.argv[1], "rb").read(), 8, []
while p < len(d):
    n, t = struct.unpack(">I4s", d[p:p + 8])
    names.append(t.decode())
    p += 12 + n
i = names.index("IDAT")
assert [t for t in names[:i] if t in ("sRGB", "tEXt", "zTXt")] == ["sRGB", "tEXt", "zTXt", "tEXt"], names
EOF
    # --strip, the environment variable, and one lane per file
    pf run "$W/stencil.json" "$W/in" -o "$W/strip.off" --band-rows off --strip
    expect 0 "--strip, whole"
    PIPEFUSE_BAND_ROWS=3 "$PF" run "$W/stencil.json" "$W/in" -o "$W/strip.3" --strip --jobs 2 -v \
        --backend "$BACKEND" >"$W/stdout" 2>"$W/stderr"
    rc=$?
    expect 0 "PIPEFUSE_BAND_ROWS=3 --strip --jobs 2"
    says "$W/stderr" "run in bands of rows" "PIPEFUSE_BAND_ROWS=3"
    same "$W/strip.off" "$W/strip.3" "PIPEFUSE_BAND_ROWS=3 --strip"
    PIPEFUSE_BAND_ROWS=many "$PF" run "$W/point.json" "$W/in" -o "$W/bad" >"$W/stdout" 2>"$W/stderr"
    rc=$?
    expect 2 "PIPEFUSE_BAND_ROWS=many"
    says "$W/stderr" "PIPEFUSE_BAND_ROWS must be auto, off or a number of rows" "PIPEFUSE_BAND_ROWS=many"
    pf run "$W/point.json" "$W/in" -o "$W/bad" --band-rows 0
    expect 2 "--band-rows 0"
    ;;
errors)
    mkdir -p "$W/in" "$W/out"
    "$HELPER" image "$W/in/good.png" 200 150 3 8 || fail "cli_helper image"
    "$HELPER" image "$W/big.png" 300 400 3 8 || fail "cli_helper image"
    "$HELPER" truncate "$W/big.png" "$W/in/cut.png" || fail "cli_helper truncate"
    # a bit flipped in the middle of the image data: a CRC error or corrupt deflate data
    python3 - "$W/big.png" "$W/in/flipped.png" <<'EOF' || fail "cannot write flipped.png"
import sys
import struct, zlib
d = bytearray(open(sys.argv[1], "rb").read())
d[len(d) // 2] ^= 0x10
open(sys.argv[2], "wb").write(bytes(d))
# the same with text after the image data: found by the decode that reads the metadata
t = b"tEXt" + b"Note\0late"
late = d[:-12] + struct.pack(">I", len(t) - 4) + t + struct.pack(">I", zlib.crc32(t)) + d[-12:]
open(sys.argv[2].replace("flipped", "late"), "wb").write(bytes(late))
EOF
    pipeline point '{"id": "b", "op": "brightness", "params": {"amount": 0.07}}' '"out": "b"'
    pf run "$W/point.json" "$W/in" -o "$W/out" --band-rows 8
    expect 1 "cut and corrupt files in bands"
    sanitized "cut and corrupt files in bands"
    says "$W/stderr" "cut.png: FAILED: truncated PNG" "cut.png"
    grep -E "cut.png: FAILED: .*\(reading row [0-9]+ of 400\)" "$W/stderr" >/dev/null ||
        fail "cut.png: the row is not named: $(grep cut.png "$W/stderr")"
    grep -E "flipped.png: FAILED: .*row [0-9]+ of 400" "$W/stderr" >/dev/null ||
        fail "flipped.png: the row is not named: $(grep flipped.png "$W/stderr")"
    grep -E "late.png: FAILED: .*row [0-9]+ of 400" "$W/stderr" >/dev/null ||
        fail "late.png: the row is not named: $(grep late.png "$W/stderr")"
    [ -e "$W/out/late.png" ] && fail "late.png: an output was written"
    [ -e "$W/out/cut.png" ] && fail "cut.png: an output was written"
    [ -e "$W/out/flipped.png" ] && fail "flipped.png: an output was written"
    exists "$W/out/good.png"
    left=$(ls -A "$W/out" | grep -v '^good.png$' | grep -vxF .pipefuse-manifest)
    [ -z "$left" ] || fail "left in the output folder: $left"
    # --max-memory counts a band, not the whole image: 2000x1500 RGB needs some 24 MB
    # whole, over a budget of 16 MB that its bands fit in
    mkdir -p "$W/mem"
    "$HELPER" image "$W/mem/wide.png" 2000 1500 3 8 || fail "cli_helper image"
    pf run "$W/point.json" "$W/mem/wide.png" -o "$W/mem/whole" --band-rows off --max-memory 16M
    expect 1 "--max-memory 16M, whole"
    says "$W/stderr" "over --max-memory" "--max-memory 16M, whole"
    pf run "$W/point.json" "$W/mem/wide.png" -o "$W/mem/bands" --band-rows 32 --max-memory 16M
    expect 0 "--max-memory 16M, in bands"
    exists "$W/mem/bands/wide.png"
    # --band-rows auto (the default) bands a file whose whole-frame run is over
    # --max-memory, in bands small enough for it, where it used to fail whole: the
    # unsharp mask of a 512x512 photo needs some 40 MB whole
    "$HELPER" image "$W/mem/sq.png" 512 512 3 8 || fail "cli_helper image"
    pf run "$SRC/pipelines/sharpen.json" "$W/mem/sq.png" -o "$W/mem/sq_whole" --band-rows off
    expect 0 "sharpen, whole, no budget"
    pf run "$SRC/pipelines/sharpen.json" "$W/mem/sq.png" -o "$W/mem/sq_auto" --max-memory 10M -v
    expect 0 "sharpen, auto, --max-memory 10M"
    says "$W/stderr" "run in bands of rows" "sharpen, auto, --max-memory 10M"
    same "$W/mem/sq_whole" "$W/mem/sq_auto" "sharpen in bands under --max-memory 10M"
    # the same for strips: half size and a blur of the 2000x1500 photo needs some 60 MB
    # whole; under --max-memory 8M it runs in strips, below one strip's need it fails
    pipeline half '{"id": "r", "op": "resize", "params": {"scale": 0.5}}, {"id": "g", "op": "gaussian", "params": {"sigma": 2}}' '"out": "g"'
    pf run "$W/half.json" "$W/mem/wide.png" -o "$W/mem/half_whole" --band-rows off
    expect 0 "half, whole, no budget"
    pf run "$W/half.json" "$W/mem/wide.png" -o "$W/mem/half_whole_16" --band-rows off --max-memory 16M
    expect 1 "half, whole, --max-memory 16M"
    pf run "$W/half.json" "$W/mem/wide.png" -o "$W/mem/half_auto" --max-memory 8M -v
    expect 0 "half, auto, --max-memory 8M"
    says "$W/stderr" "run in bands of rows" "half, auto, --max-memory 8M"
    same "$W/mem/half_whole" "$W/mem/half_auto" "half in strips under --max-memory 8M"
    pf run "$W/half.json" "$W/mem/wide.png" -o "$W/mem/half_tiny" --max-memory 1M
    expect 1 "half, auto, --max-memory 1M"
    says "$W/stderr" "over --max-memory" "half, auto, --max-memory 1M"
    [ -e "$W/mem/half_tiny/wide.png" ] && fail "half, --max-memory 1M: an output was written"
    ;;
memory)
    TIME=/usr/bin/time
    [ -x "$TIME" ] || { echo "SKIP: GNU time ($TIME) is not installed"; exit 77; }
    # a sanitizer's allocator holds freed memory (ASan's quarantine) and shadow pages
    if nm -D "$PF" 2>/dev/null | grep -qE '__(asan|tsan)_init'; then
        echo "SKIP: $PF is built with a sanitizer: its memory is the sanitizer's"
        exit 77
    fi
    "$HELPER" image "$W/photo.png" 4000 3000 3 8 || fail "cli_helper image"
    pipeline point '{"id": "b", "op": "brightness", "params": {"amount": 0.05}}, {"id": "g", "op": "gamma", "params": {"gamma": 1.2}}' '"out": "g"'
    pipeline stencil '{"id": "u", "op": "unsharp", "params": {"sigma": 1.5, "amount": 0.8}}, {"id": "l", "op": "levels", "params": {"in_low": 0.02, "in_high": 0.98}}' '"out": "l"'
    peak() { # NAME ARGS...: the run's peak resident memory in MB into $mb
        local name=$1
        shift
        "$TIME" -f %M -o "$W/$name.rss" "$PF" run "$@" -o "$W/$name" --backend cpu \
            >"$W/stdout" 2>"$W/stderr"
        rc=$?
        expect 0 "$name"
        mb=$(($(tail -1 "$W/$name.rss") / 1024))
        echo "$name: $mb MB peak"
    }
    for p in point stencil; do
        peak "$p" "$W/$p.json" "$W/photo.png"
        [ "$mb" -lt 64 ] || fail "$p: a 12-megapixel photo in bands peaks at $mb MB, over 64 MB"
    done
    peak point-whole "$W/point.json" "$W/photo.png" --band-rows off
    [ "$mb" -ge 64 ] || fail "point, --band-rows off: $mb MB: the bound of 64 MB proves nothing"
    cmp -s "$W/point/photo.png" "$W/point-whole/photo.png" || fail "point: banded and whole differ"
    # a resize in strips: four photos at once (four lanes, whatever the cores)
    pipeline half '{"id": "r", "op": "resize", "params": {"scale": 0.5}}, {"id": "b", "op": "brightness", "params": {"amount": 0.05}}, {"id": "c", "op": "contrast", "params": {"amount": 1.1}}, {"id": "g", "op": "gaussian", "params": {"sigma": 1.5}}' '"out": "g"'
    mkdir -p "$W/four"
    for i in 1 2 3 4; do ln -s "$W/photo.png" "$W/four/p$i.png"; done
    peak half "$W/half.json" "$W/four" --jobs 4
    [ "$mb" -lt 150 ] || fail "half: four 12-megapixel photos in strips peak at $mb MB, over 150 MB"
    peak half-whole "$W/half.json" "$W/photo.png" --band-rows off
    [ "$mb" -ge 150 ] || fail "half, --band-rows off: $mb MB: the bound of 150 MB proves nothing"
    cmp -s "$W/half/p1.png" "$W/half-whole/photo.png" || fail "half: strips and whole differ"
    ;;
*)
    echo "unknown section $SECTION" >&2
    exit 2
    ;;
esac
[ "$failures" = 0 ] || { echo "$failures failure(s) in band_test.sh $SECTION" >&2; exit 1; }
echo "band_test.sh $SECTION: ok"
