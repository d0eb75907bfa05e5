#!/bin/bash
# tests/jpeg/jpeg_cli.sh: pipefuse run with JPEG inputs and outputs.
#
#   jpeg_cli.sh SECTION PIPEFUSE JPEG_TOOL SOURCE_DIR WORK_DIR
#
# Sections:
#   mixed    a folder of PNG, .jpg and .JPG: each output in its input's format and name;
#            --format png|jpeg; --name '{stem}.jpg'; --format against --name refused
#   sniff    a PNG named .jpg and a JPEG named .png are read by their bytes; a .jpg of
#            neither fails alone, named, nothing written for it
#   options  --quality, --subsampling, --progressive, --optimize show in the files; bad
#            values are usage errors before any work
#   meta     a JPEG's ICC profile and EXIF (orientation 6): applied and carried to JPEG
#            and PNG outputs (iCCP, eXIf), EXIF then saying 1; --keep-orientation; --strip;
#            a PNG's iCCP to a JPEG output
#   bands    a large JPEG run in bands gives the same file as whole; one turned by its
#            EXIF runs whole
#   stdio    a JPEG on stdin comes out as a JPEG on stdout (-o -)
#   hostile  truncated and oversized JPEGs fail alone with the reason; the batch goes on
set -u
SECTION=$1 PF=$2 JT=$3 SRC=$4 WORK=$5
W=$WORK/jpeg_$SECTION
rm -rf "$W" && mkdir -p "$W" || exit 1
unset PIPEFUSE_PLUGIN_PATH PIPEFUSE_BAND_ROWS
. "$SRC/tests/cli/testlib.sh"
PIPE=$SRC/pipelines/sharpen.json
PF_EXTRA=(--backend cpu)

# info FILE: jpeg_tool's line for a JPEG (as stored)
info() { "$JT" info "$1" 2>&1; }
# is_jpeg/is_png FILE: by the first bytes
is_jpeg() { [ "$(head -c 3 "$1" | od -An -tx1 | tr -d ' \n')" = ffd8ff ] || fail "$1 is no JPEG"; }
is_png() { [ "$(head -c 4 "$1" | od -An -tx1 | tr -d ' \n')" = 89504e47 ] || fail "$1 is no PNG"; }
# chunk FILE TYPE: the data of PNG chunk TYPE, hex ("" when absent)
chunk() {
    python3 - "$1" "$2" <<'EOF'
import struct, sys
b = open(sys.argv[1], "rb").read()
p = 8
while p < len(b):
    n, t = struct.unpack(">I4s", b[p:p + 8])
    if t.decode() == sys.argv[2]:
        print(b[p + 8:p + 8 + n].hex()); break
    p += 12 + n
EOF
}

case $SECTION in
mixed)
    mkdir -p "$W/in"
    cp "$SRC/samples/images/camera.png" "$W/in/a.png"
    "$JT" make "$W/in/b.jpg" 320 200 3 && "$JT" make "$W/in/c.JPG" 96 64 1 &&
        "$JT" make "$W/in/d.jpeg" 50 40 3 || fail "making inputs"
    echo "not an image" >"$W/in/notes.txt"
    pf run "$PIPE" "$W/in" -o "$W/out" -q
    expect 0 "mixed folder"
    is_png "$W/out/a.png"
    is_jpeg "$W/out/b.jpg"
    is_jpeg "$W/out/c.jpg"
    is_jpeg "$W/out/d.jpg"
    [ "$(count "$W/out")" = 4 ] || fail "mixed folder: $(ls "$W/out")"
    case $(info "$W/out/c.jpg") in 96x64\ components=1*) ;; *) fail "gray stays gray: $(info "$W/out/c.jpg")" ;; esac
    case $(info "$W/out/b.jpg") in 320x200\ components=3*samp=2x2*) ;; *) fail "default 4:2:0: $(info "$W/out/b.jpg")" ;; esac
    # the pixels: within JPEG's loss of a PNG run of the same input
    pf run "$PIPE" "$W/in/b.jpg" -o "$W/png" --format png -q
    expect 0 "--format png"
    is_png "$W/png/b.png"
    d=$("$JT" diff "$W/png/b.png" "$W/out/b.jpg")
    psnr=${d#*psnr=}
    awk -v p="$psnr" 'BEGIN { exit !(p > 30) }' || fail "JPEG output of b: $d (PSNR over 30 dB expected)"
    pf run "$PIPE" "$W/in/a.png" -o "$W/j" --format jpeg -q
    expect 0 "--format jpeg"
    is_jpeg "$W/j/a.jpg"
    pf run "$PIPE" "$W/in/a.png" "$W/in/b.jpg" -o "$W/n" --name '{stem}_s.jpg' -q
    expect 0 "--name .jpg"
    is_jpeg "$W/n/a_s.jpg"
    is_jpeg "$W/n/b_s.jpg"
    pf run "$PIPE" "$W/in/b.jpg" -o "$W/x" --name '{stem}.png' --format jpeg
    expect 2 "--format against --name"
    says "$W/stderr" "--format jpeg, but --name '{stem}.png'" "--format against --name"
    absent "$W/x"
    ;;
sniff)
    cp "$SRC/samples/images/camera.png" "$W/png_named.jpg"
    "$JT" make "$W/jpeg_named.png" 64 48 3
    echo "garbage" >"$W/bad.jpg"
    pf run "$PIPE" "$W/png_named.jpg" "$W/jpeg_named.png" "$W/bad.jpg" -o "$W/out"
    expect 1 "sniffed inputs"
    # outputs follow the names: png_named.jpg -> .jpg (JPEG), jpeg_named.png -> .png (PNG)
    is_jpeg "$W/out/png_named.jpg"
    is_png "$W/out/jpeg_named.png"
    says "$W/stderr" "bad.jpg: FAILED: not a JPEG" "garbage named .jpg"
    absent "$W/out/bad.jpg"
    ;;
options)
    "$JT" make "$W/in.jpg" 256 192 3
    pf run "$PIPE" "$W/in.jpg" -o "$W/q95" --quality 95 -q
    expect 0 "--quality 95"
    pf run "$PIPE" "$W/in.jpg" -o "$W/q40" --quality 40 -q
    expect 0 "--quality 40"
    [ "$(stat -c %s "$W/q40/in.jpg")" -lt "$(stat -c %s "$W/q95/in.jpg")" ] ||
        fail "quality 40 is not smaller than 95"
    pf run "$PIPE" "$W/in.jpg" -o "$W/s444" --subsampling 444 --progressive -q
    expect 0 "--subsampling 444 --progressive"
    case $(info "$W/s444/in.jpg") in *progressive=1\ samp=1x1*) ;; *) fail "444 progressive: $(info "$W/s444/in.jpg")" ;; esac
    pf run "$PIPE" "$W/in.jpg" -o "$W/s422" --subsampling 4:2:2 -q
    case $(info "$W/s422/in.jpg") in *progressive=0\ samp=2x1*) ;; *) fail "4:2:2: $(info "$W/s422/in.jpg")" ;; esac
    pf run "$PIPE" "$W/in.jpg" -o "$W/opt" --optimize -q
    expect 0 "--optimize"
    pf run "$PIPE" "$W/in.jpg" -o "$W/plain" -q
    [ "$(stat -c %s "$W/opt/in.jpg")" -lt "$(stat -c %s "$W/plain/in.jpg")" ] ||
        fail "--optimize is not smaller"
    d=$("$JT" diff "$W/opt/in.jpg" "$W/plain/in.jpg")
    [ "$d" = "max=0 psnr=99.0" ] || fail "--optimize changed the pixels: $d"
    # --skip-existing: the JPEG options shape the bytes, so a change runs the input again
    pf run "$PIPE" "$W/in.jpg" -o "$W/q40" --quality 40 --skip-existing
    says "$W/stderr" "skipped, outputs exist" "--skip-existing, same options"
    pf run "$PIPE" "$W/in.jpg" -o "$W/q40" --quality 41 --skip-existing
    expect 0 "--skip-existing, another quality"
    says "$W/stderr" "in.jpg -> in.jpg" "--skip-existing, another quality: run again"
    for bad in "--quality 0" "--quality 101" "--quality x" "--subsampling 411" "--format tiff"; do
        pf run "$PIPE" "$W/in.jpg" -o "$W/bad" $bad
        expect 2 "$bad"
        says "$W/stderr" "${bad%% *}" "$bad"
        absent "$W/bad"
    done
    ;;
meta)
    "$JT" make "$W/rot.jpg" 120 80 3 6 70000
    pf run "$PIPE" "$W/rot.jpg" -o "$W/j" -q
    expect 0 "JPEG with EXIF and ICC"
    i=$(info "$W/j/rot.jpg")
    case $i in "80x120 components=3"*"orientation=1 icc=70000:RGB  exif="[1-9]*) ;; *) fail "JPEG out: $i" ;; esac
    pf run "$PIPE" "$W/rot.jpg" -o "$W/p" --format png -q
    expect 0 "to PNG"
    [ -n "$(chunk "$W/p/rot.png" iCCP)" ] || fail "PNG output without iCCP"
    ex=$(chunk "$W/p/rot.png" eXIf)
    case $ex in 4949*) ;; *) fail "PNG output's eXIf: '$ex'" ;; esac
    python3 -c "import struct,sys; print(struct.unpack('<II', bytes.fromhex('$ex')[:8])[1] > 0)" >/dev/null ||
        fail "eXIf unreadable"
    pf run "$PIPE" "$W/rot.jpg" -o "$W/k" --keep-orientation -q
    i=$(info "$W/k/rot.jpg")
    case $i in "120x80 "*"orientation=6 "*) ;; *) fail "--keep-orientation: $i" ;; esac
    pf run "$PIPE" "$W/rot.jpg" -o "$W/s" --strip -q
    i=$(info "$W/s/rot.jpg")
    case $i in "80x120 "*"orientation=1 icc=0: exif=0") ;; *) fail "--strip: $i" ;; esac
    pf run "$PIPE" "$W/rot.jpg" -o "$W/sp" --strip --format png -q
    [ -z "$(chunk "$W/sp/rot.png" iCCP)$(chunk "$W/sp/rot.png" eXIf)" ] || fail "--strip PNG kept metadata"
    # a PNG's iCCP into a JPEG output: the profile inflated, the same bytes
    pf run "$PIPE" "$W/p/rot.png" -o "$W/pj" --format jpeg -q
    expect 0 "PNG with iCCP to JPEG"
    i=$(info "$W/pj/rot.jpg")
    case $i in *"icc=70000:RGB "*) ;; *) fail "PNG iCCP to JPEG: $i" ;; esac
    ;;
bands)
    "$JT" make "$W/big.jpg" 1500 1100 3 0 0 1
    pf run "$PIPE" "$W/big.jpg" -o "$W/whole" --band-rows off -q
    expect 0 "whole"
    pf run "$PIPE" "$W/big.jpg" -o "$W/banded" --band-rows 100 --profile
    expect 0 "banded"
    says "$W/stderr" "1 file(s) run in bands of rows" "banded"
    cmp -s "$W/whole/big.jpg" "$W/banded/big.jpg" || fail "banded JPEG differs from whole"
    "$JT" make "$W/turned.jpg" 600 500 3 8
    pf run "$PIPE" "$W/turned.jpg" -o "$W/tw" --band-rows off -q
    pf run "$PIPE" "$W/turned.jpg" -o "$W/tb" --band-rows 64 -q
    expect 0 "turned, bands asked"
    cmp -s "$W/tw/turned.jpg" "$W/tb/turned.jpg" || fail "turned JPEG with --band-rows differs"
    case $(info "$W/tb/turned.jpg") in 500x600*) ;; *) fail "turned: $(info "$W/tb/turned.jpg")" ;; esac
    ;;
stdio)
    "$JT" make "$W/in.jpg" 64 48 3
    "$PF" --backend cpu run "$PIPE" - -o - <"$W/in.jpg" >"$W/out.bin" 2>"$W/stderr"
    rc=$?
    expect 0 "stdin to stdout"
    is_jpeg "$W/out.bin"
    case $(info "$W/out.bin") in 64x48*) ;; *) fail "stdout: $(info "$W/out.bin")" ;; esac
    ;;
hostile)
    "$JT" make "$W/good.jpg" 200 150 3
    head -c 2000 "$W/good.jpg" >"$W/cut.jpg"
    "$JT" make "$W/huge.jpg" 64 64 3
    # the SOF's height and width to 60000x60000 (3.6 G pixels)
    python3 - "$W/huge.jpg" <<'EOF'
import sys
p = sys.argv[1]; b = bytearray(open(p, "rb").read())
i = b.index(b"\xff\xc0")
b[i + 5:i + 9] = (60000).to_bytes(2, "big") * 2
open(p, "wb").write(b)
EOF
    pf run "$PIPE" "$W/good.jpg" "$W/cut.jpg" "$W/huge.jpg" -o "$W/out"
    expect 1 "hostile batch"
    is_jpeg "$W/out/good.jpg"
    says "$W/stderr" "cut.jpg: FAILED:" "truncated"
    says "$W/stderr" "huge.jpg: FAILED:" "huge"
    says "$W/stderr" "3600000000 pixels, more than the limit" "huge"
    absent "$W/out/cut.jpg"
    absent "$W/out/huge.jpg"
    pf run "$PIPE" "$W/good.jpg" -o "$W/small" --max-pixels 1000
    expect 1 "--max-pixels"
    says "$W/stderr" "--max-pixels" "--max-pixels"
    ;;
*)
    echo "unknown section $SECTION" >&2
    exit 2
    ;;
esac
[ "$failures" = 0 ] && echo "jpeg_cli $SECTION: passed" && exit 0
echo "jpeg_cli $SECTION: $failures failure(s)" >&2
exit 1
