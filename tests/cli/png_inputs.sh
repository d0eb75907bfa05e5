#!/bin/bash
# tests/cli/png_inputs.sh: pipefuse run over PNG inputs as they come in real batches, as
# pipefuse/png.h and README.md describe reading them.
#
#   png_inputs.sh PIPEFUSE WORK_DIR
#
# The inputs are written here with Python's zlib and struct. Each bad one fails alone,
# named with what it is (an animation, another format under a .png name, a header that
# claims more pixels than the file can hold), leaves no output or temporary behind, and
# does not stop the good ones; 16-bit samples come out exactly as they went in, in bands
# of rows and whole, interlaced or not.
set -u
PF=$1 WORK=$2
W=$WORK/png_inputs
rm -rf "$W" && mkdir -p "$W/in" || exit 1
unset PIPEFUSE_PLUGIN_PATH
source "$(dirname "$0")/testlib.sh"

# Each good input NAME.png gets NAME.ref beside it (outside in/): "W H DEPTH TYPE CRC",
# the CRC-32 of its samples row by row, as `samples` prints an output's.
python3 - "$W" <<'PY' || fail "cannot write the test inputs"
import os, struct, sys, zlib
d = sys.argv[1]
def chunk(t, b):
    return struct.pack(">I", len(b)) + t + b + struct.pack(">I", zlib.crc32(t + b))
def png(w, h, depth, ctype, raw, interlace=0, pre=b"", post=b""):
    ihdr = struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, interlace)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + pre +
            chunk(b"IDAT", zlib.compress(raw)) + post + chunk(b"IEND", b""))
def sample(x, y, c, seed):  # 16 bits whose low bytes differ: a trip through 8 bits shows
    return (seed * 7919 + x * 263 + y * 4099 + c * 977) & 0xFFFF
ADAM7 = ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
         (0, 1, 1, 2))
def raw16(w, h, ch, seed, passes=((0, 0, 1, 1),), filters=True):
    out = bytearray()
    for x0, y0, dx, dy in passes:
        xs, ys = range(x0, w, dx), range(y0, h, dy)
        if len(xs) and len(ys):
            for y in ys:
                if filters:
                    out.append(0)
                for x in xs:
                    for c in range(ch):
                        out += struct.pack(">H", sample(x, y, c, seed))
    return bytes(out)
def put(name, b):
    open(os.path.join(d, "in", name), "wb").write(b)
def good(name, w, h, ctype, ch, seed, interlace):
    put(name + ".png", png(w, h, 16, ctype, raw16(w, h, ch, seed, ADAM7 if interlace else
                                                   ((0, 0, 1, 1),)), interlace))
    crc = zlib.crc32(raw16(w, h, ch, seed, filters=False))
    open(os.path.join(d, name + ".ref"), "w").write("%d %d 16 %d %d\n" % (w, h, ctype, crc))
good("deep", 37, 50, 6, 4, 1, 0)
good("deep-gray-interlaced", 23, 41, 0, 1, 2, 1)
# An APNG of 3 frames: acTL and fcTL before the IDAT, then fcTL + fdAT twice.
still = raw16(16, 40, 3, 3)
z = zlib.compress(still)
def fctl(seq):
    return chunk(b"fcTL", struct.pack(">IIIIIHHBB", seq, 16, 40, 0, 0, 1, 10, 0, 0))
pre = chunk(b"acTL", struct.pack(">II", 3, 0)) + fctl(0)
post = (fctl(1) + chunk(b"fdAT", struct.pack(">I", 2) + z) + fctl(3) +
        chunk(b"fdAT", struct.pack(">I", 4) + z))
put("anim.png", png(16, 40, 16, 2, still, pre=pre, post=post))
put("photo.png", b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01" + bytes(200))  # a broken JPEG, renamed
# 16000x16000 RGBA16 (a 2 GB frame, under the default pixel limit) in a few hundred bytes
put("bomb.png", png(16000, 16000, 16, 6, bytes(1 + 16000 * 8)))
PY
cat >"$W/twice.json" <<'JSON'
{"pipefuse": 1, "inputs": ["src"],
 "stages": [{"id": "a", "op": "invert"}, {"id": "b", "op": "invert"}],
 "outputs": {"out": "b"}}
JSON

# samples PNG: "W H DEPTH TYPE CRC" of a non-interlaced PNG (pipefuse writes no other),
# its row filters undone here: a reference decode independent of libpng.
samples() {
    python3 - "$1" <<'PY'
import struct, sys, zlib
b = open(sys.argv[1], "rb").read()
i, idat, hdr = 8, b"", None
while i < len(b):
    n, t = struct.unpack(">I", b[i:i + 4])[0], b[i + 4:i + 8]
    if t == b"IHDR":
        hdr = struct.unpack(">IIBBBBB", b[i + 8:i + 21])
    if t == b"IDAT":
        idat += b[i + 8:i + 8 + n]
    i += 12 + n
w, h, depth, ctype, _, _, interlace = hdr
if interlace:
    sys.exit("interlaced output")
bpp = {0: 1, 2: 3, 4: 2, 6: 4}[ctype] * depth // 8
raw, stride, prev, out, p = zlib.decompress(idat), w * bpp, bytearray(w * bpp), b"", 0
for y in range(h):
    f, row = raw[p], bytearray(raw[p + 1:p + 1 + stride])
    p += 1 + stride
    for x in range(stride):
        a = row[x - bpp] if x >= bpp else 0
        c = prev[x - bpp] if x >= bpp else 0
        u = prev[x]
        if f == 1:
            row[x] = (row[x] + a) & 255
        elif f == 2:
            row[x] = (row[x] + u) & 255
        elif f == 3:
            row[x] = (row[x] + (a + u) // 2) & 255
        elif f == 4:
            q = a + u - c
            pa, pb, pc = abs(q - a), abs(q - u), abs(q - c)
            row[x] = (row[x] + (a if pa <= pb and pa <= pc else u if pb <= pc else c)) & 255
    out += bytes(row)
    prev = row
print(w, h, depth, ctype, zlib.crc32(out))
PY
}

for bands in 4 off; do
    O=$W/out-$bands
    pf run "$W/twice.json" "$W/in" -o "$O" --band-rows $bands
    expect 1 "--band-rows $bands: three bad inputs of five"
    says "$W/stderr" "anim.png: FAILED: animated PNG (APNG) of 3 frames" "--band-rows $bands: APNG"
    # read by its bytes as the JPEG it is, whose data is zeros (or, without libjpeg, not read)
    grep -qF "photo.png: FAILED: JPEG is not supported: pipefuse was built without libjpeg" \
        "$W/stderr" ||
        says "$W/stderr" "photo.png: FAILED: corrupt JPEG" "--band-rows $bands: a JPEG named .png"
    says "$W/stderr" "bomb.png: FAILED: truncated or corrupt PNG: its header declares 16000x16000" \
        "--band-rows $bands: a decompression bomb"
    says "$W/stderr" "at deflate's greatest compression (1032:1)" "--band-rows $bands: why"
    says "$W/stderr" "2 of 5 input(s) done" "--band-rows $bands: the summary"
    for f in anim photo bomb; do absent "$O/$f.png"; done
    [ "$(count "$O")" = 2 ] ||
        fail "--band-rows $bands: left in the output folder: $(ls -A "$O" | tr '\n' ' ')"
    # 16 bits a sample, end to end: the input's samples exactly
    for f in deep deep-gray-interlaced; do
        exists "$O/$f.png"
        got=$(samples "$O/$f.png")
        want=$(cat "$W/$f.ref")
        [ "$got" = "$want" ] || fail "--band-rows $bands: $f.png: '$got', expected '$want'"
    done
done

[ "$failures" = 0 ] || exit 1
echo "png_inputs: all checks passed"
