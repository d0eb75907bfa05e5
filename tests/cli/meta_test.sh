#!/bin/bash
# tests/cli/meta_test.sh: pipefuse run keeps the input's PNG metadata (gAMA, cHRM, sRGB,
# iCCP, sBIT, pHYs and text chunks) where it still describes the output, and --strip
# drops it; pHYs follows the geometry (scaled by resize, kept by crop and pad, swapped by
# a quarter turn, dropped by other rotations); outputs are written in the form their
# format asks (palette, gray1/2/4, auto: the smallest lossless one), whole or in bands,
# and read back as the same pixels.
#
#   meta_test.sh PIPEFUSE WORK_DIR
#
# The inputs are written here with Python's zlib and struct: an RGB8 file carrying every
# kept chunk but sRGB (text before and after the image data; 1200 colours, so that auto
# keeps it RGB), an RGB8 file with sRGB, a gray8 file with an ICC profile, a thresholded
# gray8 page (0 and 255 only) of unequal densities, and an RGB8 file of few colours.
# The outputs are decoded by a small PNG reader of the test's own (every colour type and
# depth, the five filters), not by pipefuse.
set -u
PF=$1 WORK=$2
W=$WORK/meta
rm -rf "$W" && mkdir -p "$W" || exit 1
unset PIPEFUSE_PLUGIN_PATH
failures=0

fail() {
    echo "FAIL: $*" >&2
    failures=$((failures + 1))
}

# run WHAT ARGS...: pipefuse run, which must succeed.
run() {
    local what=$1
    shift
    if ! "$PF" run "$@" -q >"$W/stdout" 2>"$W/stderr"; then
        fail "$what: pipefuse run failed"
        sed 's/^/    | /' "$W/stderr" | head -20 >&2
    fi
}

# chunks PNG: its chunk list, one "TYPE SHA" a line (SHA: of the data, IDAT: "-"), after
# checking signature and CRCs; "BAD ..." when the file is not a sound PNG.
chunks() {
    python3 - "$1" <<'EOF'
import hashlib, struct, sys, zlib
b = open(sys.argv[1], "rb").read()
if b[:8] != b"\x89PNG\r\n\x1a\n":
    print("BAD signature"); sys.exit()
p = 8
while p < len(b):
    n, t = struct.unpack(">I4s", b[p:p + 8])
    d = b[p + 8:p + 8 + n]
    crc, = struct.unpack(">I", b[p + 8 + n:p + 12 + n])
    if zlib.crc32(t + d) != crc:
        print("BAD crc", t.decode()); sys.exit()
    print(t.decode(), "-" if t == b"IDAT" else hashlib.sha1(d).hexdigest()[:12])
    p += 12 + n
EOF
}

python3 - "$W" <<'EOF' || fail "cannot write the test inputs"
import struct, sys, zlib
def chunk(t, d):
    return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
def png(path, w, h, ctype, channels, pre, post):
    raw = b"".join(b"\0" + bytes((x * 7 + y * 13 * (c + 1) + c * 50) & 255 for x in range(w) for c in range(channels)) for y in range(h))
    ihdr = struct.pack(">IIBBBBB", w, h, 8, ctype, 0, 0, 0)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr))
        for t, d in pre: f.write(chunk(t, d))
        f.write(chunk(b"IDAT", zlib.compress(raw)))
        for t, d in post: f.write(chunk(t, d))
        f.write(chunk(b"IEND", b""))
# not a real profile: a header and payload that must travel byte for byte
icc = b"pipefuse test\0\0" + zlib.compress(b"acsp" + bytes(range(256)) * 4)
png(sys.argv[1] + "/rgb.png", 40, 30, 2, 3,
    [(b"gAMA", struct.pack(">I", 45455)),
     (b"cHRM", struct.pack(">8I", 31270, 32900, 64000, 33000, 30000, 60000, 15000, 6000)),
     (b"iCCP", icc), (b"sBIT", bytes([5, 6, 5])),
     (b"pHYs", struct.pack(">IIB", 11811, 11811, 1)),
     (b"tEXt", b"Title\0a test picture")],
    [(b"zTXt", b"Comment\0\0" + zlib.compress(b"after the image data")),
     (b"iTXt", b"Author\0\0\0en\0\0pipefuse")])
png(sys.argv[1] + "/srgb.png", 24, 16, 2, 3,
    [(b"sRGB", b"\0"), (b"gAMA", struct.pack(">I", 45455)),
     (b"pHYs", struct.pack(">IIB", 2835, 2835, 1))], [])
png(sys.argv[1] + "/gray.png", 20, 10, 0, 1,
    [(b"iCCP", b"gray profile\0\0" + zlib.compress(b"GRAY" * 64)),
     (b"gAMA", struct.pack(">I", 45455))], [])
EOF

cat >"$W/bright.json" <<'EOF'
{"pipefuse": 1, "name": "bright", "inputs": ["photo"],
 "stages": [{"id": "b", "op": "brightness", "params": {"amount": 0.1}}],
 "outputs": {"out": "b"}}
EOF
cat >"$W/half.json" <<'EOF'
{"pipefuse": 1, "name": "half", "inputs": ["photo"],
 "stages": [{"id": "s", "op": "resize", "params": {"scale": 0.5, "mode": "area"}}],
 "outputs": {"out": "s"}}
EOF

# the metadata chunks of a chunk list, in order, as "TYPE SHA"
meta_of() { grep -E '^(gAMA|cHRM|sRGB|iCCP|sBIT|pHYs|tEXt|zTXt|iTXt) ' "$1"; }

chunks "$W/rgb.png" >"$W/rgb.in"
chunks "$W/srgb.png" >"$W/srgb.in"
chunks "$W/gray.png" >"$W/gray.in"
[ "$(meta_of "$W/rgb.in" | wc -l)" = 8 ] || fail "rgb.png: expected 8 metadata chunks"

# A point pipeline: every chunk kept, byte for byte, the colour and density ones (and
# here all of them) before the image data.
run "point" "$W/bright.json" "$W/rgb.png" "$W/srgb.png" -o "$W/point"
for f in rgb srgb; do
    chunks "$W/point/$f.png" >"$W/$f.point"
    grep -q '^BAD' "$W/$f.point" && fail "point/$f.png: $(cat "$W/$f.point")"
    if ! diff <(meta_of "$W/$f.in" | sort) <(meta_of "$W/$f.point" | sort) >"$W/diff"; then
        fail "point/$f.png: the metadata differs from the input's:"
        sed 's/^/    | /' "$W/diff" >&2
    fi
    before=$(sed '/^IDAT/q' "$W/$f.point" | meta_of /dev/stdin | wc -l)
    [ "$before" = "$(meta_of "$W/$f.point" | wc -l)" ] ||
        fail "point/$f.png: metadata after the image data"
done

# --strip: none of them, and the same pixels.
run "strip" "$W/bright.json" "$W/rgb.png" -o "$W/strip" --strip
chunks "$W/strip/rgb.png" >"$W/rgb.strip"
grep -q '^BAD' "$W/rgb.strip" && fail "strip/rgb.png: $(cat "$W/rgb.strip")"
[ -s "$W/rgb.strip" ] || fail "strip/rgb.png: no chunks"
meta_of "$W/rgb.strip" >/dev/null && fail "--strip: metadata written: $(meta_of "$W/rgb.strip")"
python3 - "$W/point/rgb.png" "$W/strip/rgb.png" <<'EOF' || fail "--strip changed the pixels"
import struct, sys
def idat(path):
    b, p, out = open(path, "rb").read(), 8, b""
    while p < len(b):
        n, t = struct.unpack(">I4s", b[p:p + 8])
        out += b[p + 8:p + 8 + n] if t == b"IDAT" else b""
        p += 12 + n
    return out
sys.exit(idat(sys.argv[1]) != idat(sys.argv[2]))
EOF

# ---- Output forms and pHYs through geometry ----------------------------------------------

# decode PNG: a reader of its own. Prints "W H CT DEPTH NPLTE" then one line of the
# pixels as RGBA (gray and palettes expanded, low-bit gray scaled to 0..255), or "BAD ...".
cat >"$W/decode.py" <<'EOF'
import struct, sys, zlib
def decode(path):
    b, p, chunks = open(path, "rb").read(), 8, []
    while p < len(b):
        n, t = struct.unpack(">I4s", b[p:p + 8])
        chunks.append((t, b[p + 8:p + 8 + n]))
        p += 12 + n
    w, h, depth, ct, _, _, il = struct.unpack(">IIBBBBB", chunks[0][1])
    assert il == 0, "interlaced"
    plte = b"".join(d for t, d in chunks if t == b"PLTE")
    trns = b"".join(d for t, d in chunks if t == b"tRNS")
    raw = zlib.decompress(b"".join(d for t, d in chunks if t == b"IDAT"))
    ch = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[ct]
    bpp = max(1, ch * depth // 8)
    stride = (w * ch * depth + 7) // 8
    prev, rows, q = bytearray(stride), [], 0
    for y in range(h):
        f, line = raw[q], bytearray(raw[q + 1:q + 1 + stride])
        q += 1 + stride
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            up, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1: line[i] = (line[i] + a) & 255
            elif f == 2: line[i] = (line[i] + up) & 255
            elif f == 3: line[i] = (line[i] + (a + up) // 2) & 255
            elif f == 4:
                pa, pb, pc = abs(up - c), abs(a - c), abs(a + up - 2 * c)
                pr = a if pa <= pb and pa <= pc else up if pb <= pc else c
                line[i] = (line[i] + pr) & 255
            elif f != 0: raise ValueError("filter %d" % f)
        rows.append(line)
        prev = line
    px = []
    for line in rows:
        if depth < 8:
            per = 8 // depth
            s = [(line[x // per] >> (8 - depth * (x % per + 1))) & ((1 << depth) - 1) for x in range(w)]
        elif depth == 8:
            s = list(line)
        else:
            s = [line[2 * i] << 8 | line[2 * i + 1] for i in range(w * ch)]
        for x in range(w):
            v = s[x * ch:(x + 1) * ch]
            if ct == 3:
                k = v[0]
                px.append(tuple(plte[3 * k:3 * k + 3]) + (trns[k] if k < len(trns) else 255,))
                continue
            if depth < 8:
                v = [e * 255 // ((1 << depth) - 1) for e in v]
            top = 65535 if depth == 16 else 255
            if ct == 0: px.append((v[0], v[0], v[0], top))
            elif ct == 4: px.append((v[0], v[0], v[0], v[1]))
            elif ct == 2: px.append((v[0], v[1], v[2], top))
            else: px.append(tuple(v))
    return w, h, ct, depth, len(plte) // 3, px
try:
    w, h, ct, depth, npl, px = decode(sys.argv[1])
    print(w, h, ct, depth, npl)
    if len(sys.argv) < 3:
        print(" ".join(",".join(map(str, p)) for p in px))
except Exception as e:
    print("BAD", e)
EOF

# form OUT: "CT DEPTH NPLTE" of OUT, from its IHDR and PLTE
form() { python3 "$W/decode.py" "$1" head | cut -d' ' -f3-; }
# same_pixels A B WHAT: A and B decode to the same size and RGBA pixels
same_pixels() {
    local a b
    a=$(python3 "$W/decode.py" "$1" | sed '1s/ [0-9]* [0-9]* [0-9]*$//')
    b=$(python3 "$W/decode.py" "$2" | sed '1s/ [0-9]* [0-9]* [0-9]*$//')
    case "$a$b" in *BAD*) fail "$3: cannot decode: $a $b" | head -c 300; return ;; esac
    [ "$a" = "$b" ] || fail "$3: the pixels differ from $(basename "$2")'s"
}
# phys OUT: "X Y UNIT" of OUT's pHYs, or "none"
phys() {
    python3 - "$1" <<'EOF'
import struct, sys
b, p = open(sys.argv[1], "rb").read(), 8
while p < len(b):
    n, t = struct.unpack(">I4s", b[p:p + 8])
    if t == b"pHYs":
        print("%d %d %d" % struct.unpack(">IIB", b[p + 8:p + 17])); sys.exit()
    p += 12 + n
print("none")
EOF
}


# A resize to half: pHYs halved (11811 / 2 rounded half up), the rest kept.
run "resize" "$W/half.json" "$W/rgb.png" -o "$W/half"
chunks "$W/half/rgb.png" >"$W/rgb.half"
[ "$(phys "$W/half/rgb.png")" = "5906 5906 1" ] ||
    fail "resize: pHYs $(phys "$W/half/rgb.png"), not the input's halved"
if ! diff <(meta_of "$W/rgb.in" | grep -v '^pHYs' | sort) <(meta_of "$W/rgb.half" | grep -v '^pHYs' | sort) \
    >"$W/diff"; then
    fail "resize: the other metadata differs from the input's:"
    sed 's/^/    | /' "$W/diff" >&2
fi

# Output formats other than the input's: an ICC profile only while gray stays gray and
# colour stays colour, sBIT only for the input's colour type and depth.
cat >"$W/formats.json" <<'EOF'
{"pipefuse": 1, "name": "formats", "inputs": ["photo"],
 "stages": [{"id": "b", "op": "brightness", "params": {"amount": 0.1}}],
 "outputs": {"c": {"from": "b", "format": "rgb8"}, "g": {"from": "b", "format": "gray8"},
             "w": {"from": "b", "format": "rgb16"}}}
EOF
run "formats" "$W/formats.json" "$W/rgb.png" "$W/gray.png" -o "$W/fmt"
# expect_meta OUTPUT INPUT_LIST DROPPED: OUTPUT's metadata is the input's less the chunk
# lines matching the regex DROPPED ('^$': none).
expect_meta() {
    chunks "$1" >"$W/out.list"
    grep -q '^BAD' "$W/out.list" && fail "$1: $(cat "$W/out.list")"
    if ! diff <(meta_of "$2" | grep -Ev "$3" | sort) <(meta_of "$W/out.list" | sort) \
        >"$W/diff"; then
        fail "$(basename "$1"): metadata not as expected (dropped: $3):"
        sed 's/^/    | /' "$W/diff" >&2
    fi
}
expect_meta "$W/fmt/rgb.c.png" "$W/rgb.in" '^$'
expect_meta "$W/fmt/rgb.g.png" "$W/rgb.in" '^(iCCP|sBIT) '
expect_meta "$W/fmt/rgb.w.png" "$W/rgb.in" '^sBIT '
expect_meta "$W/fmt/gray.g.png" "$W/gray.in" '^$'
expect_meta "$W/fmt/gray.c.png" "$W/gray.in" '^iCCP '
expect_meta "$W/fmt/gray.w.png" "$W/gray.in" '^iCCP '

python3 - "$W" <<'EOF' || fail "cannot write the form inputs"
import struct, sys, zlib
def chunk(t, d):
    return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
def png(path, w, h, ctype, pixel, pre):
    ch = 1 if ctype == 0 else 3
    raw = b"".join(b"\0" + bytes(v for x in range(w) for v in pixel(x, y)) for y in range(h))
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, ctype, 0, 0, 0)))
        for t, d in pre: f.write(chunk(t, d))
        f.write(chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
# a thresholded page, 3000 x 4000 pixels a metre (unequal: a quarter turn shows)
png(sys.argv[1] + "/page.png", 40, 30, 0,
    lambda x, y: (255 if (x * 3 + y * 5) % 7 < 4 else 0,),
    [(b"pHYs", struct.pack(">IIB", 3000, 4000, 1)), (b"gAMA", struct.pack(">I", 45455))])
# 36 colours
png(sys.argv[1] + "/few.png", 24, 18, 2,
    lambda x, y: ((x // 2) * 20, (y // 6) * 100, 60), [(b"pHYs", struct.pack(">IIB", 2835, 2835, 1))])
EOF

# Every form of the page, whole and in bands of 4 rows (auto and palette gathered
# whole, the gray forms packed band by band): the same files either way.
cat >"$W/forms.json" <<'EOF'
{"pipefuse": 1, "name": "forms", "inputs": ["page"],
 "stages": [{"id": "b", "op": "brightness", "params": {"amount": 0}}],
 "outputs": {"ref": {"from": "b", "format": "gray8"}, "auto": "b",
             "pal": {"from": "b", "format": "palette"}, "g1": {"from": "b", "format": "gray1"},
             "g2": {"from": "b", "format": "gray2"}, "g4": {"from": "b", "format": "gray4"}}}
EOF
run "forms" "$W/forms.json" "$W/page.png" -o "$W/forms" --band-rows off
run "forms, bands" "$W/forms.json" "$W/page.png" -o "$W/forms4" --band-rows 4
for o in ref auto pal g1 g2 g4; do
    f=$W/forms/page.$o.png
    [ -f "$f" ] || { fail "forms: no $o output"; continue; }
    cmp -s "$f" "$W/forms4/page.$o.png" || fail "forms: $o differs in bands of 4 rows"
    [ "$(phys "$f")" = "3000 4000 1" ] || fail "forms: $o: pHYs $(phys "$f"), not the input's"
    same_pixels "$f" "$W/forms/page.ref.png" "forms: $o"
done
for want in "ref 0 8 0" "auto 0 1 0" "pal 3 1 2" "g1 0 1 0" "g2 0 2 0" "g4 0 4 0"; do
    set -- $want
    got=$(form "$W/forms/page.$1.png")
    [ "$got" = "$2 $3 $4" ] || fail "forms: $1 is colour type, depth, palette '$got', not '$2 $3 $4'"
done
[ "$(stat -c %s "$W/forms/page.g1.png")" -lt "$(stat -c %s "$W/forms/page.ref.png")" ] ||
    fail "forms: gray1 is not smaller than gray8"

# A colour image of few colours: its palette (exact), auto (a palette too), and gray1
# (the image made gray first, as gray8 is).
cat >"$W/rgbforms.json" <<'EOF'
{"pipefuse": 1, "name": "rgbforms", "inputs": ["photo"],
 "stages": [{"id": "b", "op": "brightness", "params": {"amount": 0}}],
 "outputs": {"ref": {"from": "b", "format": "rgb8"}, "auto": "b",
             "pal": {"from": "b", "format": "palette"}}}
EOF
run "rgb forms" "$W/rgbforms.json" "$W/few.png" -o "$W/rgbforms"
for o in auto pal; do
    same_pixels "$W/rgbforms/few.$o.png" "$W/rgbforms/few.ref.png" "rgb forms: $o"
    [ "$(form "$W/rgbforms/few.$o.png")" = "3 8 36" ] ||
        fail "rgb forms: $o is $(form "$W/rgbforms/few.$o.png"), not an 8-bit palette of 36"
    [ "$(phys "$W/rgbforms/few.$o.png")" = "2835 2835 1" ] || fail "rgb forms: $o: pHYs"
done
sed 's/"format": "palette"/"format": "gray1"/' "$W/rgbforms.json" >"$W/rgbgray.json"
run "gray1 of colour" "$W/rgbgray.json" "$W/few.png" -o "$W/rgbgray"
[ "$(form "$W/rgbgray/few.pal.png")" = "0 1 0" ] ||
    fail "gray1 of colour: $(form "$W/rgbgray/few.pal.png"), not 1-bit gray"

# A JPEG input of gray pixels with an RGB ICC profile: auto keeps the PNG output RGB,
# with the profile (a gray PNG could not carry an RGB profile). The JPEG is made by
# pipefuse from a PNG whose iCCP it carries.
python3 - "$W" <<'EOF' || fail "cannot write the gray RGB input"
import struct, sys, zlib
def chunk(t, d):
    return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
prof = bytearray(132)
prof[0:4] = struct.pack(">I", 132)
prof[12:20] = b"mntrRGB "
prof[36:40] = b"acsp"
raw = b"".join(b"\0" + bytes(v for x in range(32) for v in (x * 8,) * 3) for y in range(16))
with open(sys.argv[1] + "/grayrgb.png", "wb") as f:
    f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 32, 16, 8, 2, 0, 0, 0)))
    f.write(chunk(b"iCCP", b"rgb\0\0" + zlib.compress(bytes(prof))))
    f.write(chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
EOF
if "$PF" run "$W/bright.json" "$W/grayrgb.png" -o "$W/gj" --format jpeg -q 2>"$W/stderr"; then
    run "gray RGB JPEG" "$W/bright.json" "$W/gj/grayrgb.jpg" -o "$W/gjp" --format png
    [ "$(form "$W/gjp/grayrgb.png")" = "2 8 0" ] ||
        fail "gray RGB JPEG with an RGB profile: written as $(form "$W/gjp/grayrgb.png"), not RGB8"
    grep -q '^iCCP' <(chunks "$W/gjp/grayrgb.png") || fail "gray RGB JPEG: its profile dropped"
    run "gray RGB JPEG, stripped" "$W/bright.json" "$W/gj/grayrgb.jpg" -o "$W/gjs" --format png \
        --strip
    [ "$(form "$W/gjs/grayrgb.png")" = "0 8 0" ] ||
        fail "gray RGB JPEG, no profile: written as $(form "$W/gjs/grayrgb.png"), not gray8"
elif ! grep -q -i "jpeg" "$W/stderr"; then
    fail "gray RGB to JPEG: $(cat "$W/stderr")"
fi

# pHYs through geometry: resize scales it by the size's ratios, crop and pad keep it, a
# quarter turn swaps it (after a resize too), a rotation by 30 degrees drops it.
cat >"$W/geo.json" <<'EOF'
{"pipefuse": 1, "name": "geo", "inputs": ["page"],
 "stages": [
   {"id": "rs", "inputs": ["page"], "op": "resize", "params": {"width": 20, "height": 10, "mode": "nearest"}},
   {"id": "cr", "inputs": ["page"], "op": "crop", "params": {"x": 2, "y": 3, "width": 10, "height": 12}},
   {"id": "pd", "inputs": ["page"], "op": "pad", "params": {"left": 3, "top": 1}},
   {"id": "q", "inputs": ["page"], "op": "rotate", "params": {"angle": "90"}},
   {"id": "h", "inputs": ["page"], "op": "rotate", "params": {"angle": "180"}},
   {"id": "rq", "op": "rotate", "inputs": ["rs"], "params": {"angle": "270"}},
   {"id": "d90", "inputs": ["page"], "op": "rotate", "params": {"degrees": 90}},
   {"id": "d30", "inputs": ["page"], "op": "rotate", "params": {"degrees": 30}}],
 "outputs": {"rs": "rs", "cr": "cr", "pd": "pd", "q": "q", "h": "h", "rq": "rq",
             "d90": {"from": "d90", "format": "gray8"}, "d30": {"from": "d30", "format": "gray4"}}}
EOF
run "geometry" "$W/geo.json" "$W/page.png" -o "$W/geo"
for want in "rs 1500 1333 1" "cr 3000 4000 1" "pd 3000 4000 1" "q 4000 3000 1" "h 3000 4000 1" \
    "rq 1333 1500 1" "d90 4000 3000 1" "d30 none"; do
    o=${want%% *}
    got=$(phys "$W/geo/page.$o.png")
    [ "$got" = "${want#* }" ] || fail "geometry: $o: pHYs '$got', not '${want#* }'"
    chunks "$W/geo/page.$o.png" | meta_of /dev/stdin | grep -v '^pHYs ' >"$W/geo.out"
    chunks "$W/page.png" | meta_of /dev/stdin | grep -v '^pHYs ' | cmp -s - "$W/geo.out" ||
        fail "geometry: $o: the other metadata is not the input's: $(cat "$W/geo.out")"
done
# a logo laid over the page: the page's grid, its density
cat >"$W/logo.json" <<'EOF'
{"pipefuse": 1, "name": "logo", "inputs": ["page", "logo"],
 "stages": [{"id": "o", "op": "overlay", "inputs": ["page", "logo"], "params": {"x": 3, "y": 2}}],
 "outputs": {"o": "o"}}
EOF
run "overlay" "$W/logo.json" "$W/page.png" --input "logo=$W/few.png" -o "$W/logo"
[ "$(phys "$W/logo/page.png")" = "3000 4000 1" ] ||
    fail "overlay: pHYs '$(phys "$W/logo/page.png")', not the page's"
# a quarter turn by angle or by degrees: the same pixels
same_pixels "$W/geo/page.d90.png" "$W/geo/page.q.png" "geometry: degrees 90"

if [ "$failures" -ne 0 ]; then
    echo "meta: $failures failure(s)" >&2
    exit 1
fi
echo "meta: ok"
