#!/bin/bash
# tests/cli/meta_test.sh: pipefuse run keeps the input's PNG metadata (gAMA, cHRM, sRGB,
# iCCP, sBIT, pHYs and text chunks) where it still describes the output, and --strip
# drops it.
#
#   meta_test.sh PIPEFUSE WORK_DIR
#
# The inputs are written here with Python's zlib and struct: an RGB8 file carrying every
# kept chunk but sRGB (text before and after the image data), an RGB8 file with sRGB, and
# a gray8 file with an ICC profile.
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
    raw = b"".join(b"\0" + bytes((x * 7 + y * 13 + c * 50) & 255 for x in range(w) for c in range(channels)) for y in range(h))
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

# A resize: pHYs (the pixel size) dropped, the rest kept.
run "resize" "$W/half.json" "$W/rgb.png" -o "$W/half"
chunks "$W/half/rgb.png" >"$W/rgb.half"
grep -q '^pHYs' "$W/rgb.half" && fail "resize: pHYs kept for another size"
if ! diff <(meta_of "$W/rgb.in" | grep -v '^pHYs' | sort) <(meta_of "$W/rgb.half" | sort) \
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

if [ "$failures" -ne 0 ]; then
    echo "meta: $failures failure(s)" >&2
    exit 1
fi
echo "meta: ok"
