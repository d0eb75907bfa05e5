#!/usr/bin/env python3
"""tests/stages/resize_pillow.py PIPEFUSE: resize's antialiased modes against Pillow.

pipefuse's `resize` with `"antialias": true` is Pillow's BILINEAR reduction (a triangle
widened by the shrink factor, its weights normalised), and with alpha both premultiply.
This runs `pipefuse run` on 8-bit test images and compares with Pillow's
Image.resize(size, Image.BILINEAR):

- RGB: every sample within 1 step of Pillow's. Pillow works in 8-bit fixed point (22-bit
  weights, and its horizontal pass is rounded to 8 bits before the vertical one);
  pipefuse sums in double and rounds once, so a sample can land one step apart.
- RGBA (premultiplied, with transparent pixels holding garbage colour): alpha within 1
  step; colour, where Pillow's alpha a is at least 16, within 1 + 2.5 * 255 / a steps
  (6 at a = 128, 3.5 at 255). Pillow premultiplies into 8 bits (RGBa: half a step),
  rounds its two passes (a step) and its alpha (a step), then divides by that alpha in
  8 bits, which scales those 2.5 premultiplied steps by 255 / a; pipefuse keeps floats
  and rounds once.
- Plain bilinear (no antialias) differs from Pillow when shrinking: that is the point.
- bicubic and lanczos3 against Pillow's BICUBIC and LANCZOS, shrinking and enlarging,
  with the same bounds, on images whose values stay in [64, 191]: Pillow clips its 8-bit
  horizontal pass to [0, 255] before the vertical pass, which a filter's negative lobes
  would otherwise reach at hard edges; pipefuse sums both axes at once and does not.

Exits 77 (skipped) when Pillow is not installed.
"""
import json
import os
import random
import subprocess
import sys
import tempfile

try:
    from PIL import Image
except ImportError:
    print("resize_pillow: Pillow is not installed: skipped")
    sys.exit(77)

PIPEFUSE = sys.argv[1]
failures = []


def test_image(mode, w, h, seed):
    """Smooth gradients, a few hard edges and noise; for RGBA a quarter of the pixels
    transparent with random colour, a quarter opaque, the rest in between."""
    rnd = random.Random(seed)
    data = bytearray()
    for y in range(h):
        for x in range(w):
            r = (x * 255 // max(1, w - 1) + rnd.randrange(-20, 21)) % 256
            g = (y * 255 // max(1, h - 1) + (64 if (x // 7 + y // 5) % 2 else 0)) % 256
            b = rnd.randrange(256)
            px = [r, g, b]
            if mode == "RGBA":
                kind = rnd.randrange(4)
                a = 0 if kind == 0 else 255 if kind == 1 else rnd.randrange(1, 255)
                if a == 0:
                    px = [rnd.randrange(256) for _ in range(3)]
                px.append(a)
            data += bytes(px)
    return Image.frombytes(mode, (w, h), bytes(data))


def test_image_mid(mode, w, h, seed):
    """Gradients, stripes and noise within [64, 191] (alpha too, for RGBA): a cubic's or
    Lanczos' lobes overshoot the range by less than 64, so Pillow's 8-bit horizontal pass,
    clipped to [0, 255] before its vertical pass, clips nothing."""
    rnd = random.Random(seed)
    data = bytearray()
    for y in range(h):
        for x in range(w):
            px = [64 + (x * 127 // max(1, w - 1) + rnd.randrange(-12, 13)) % 128,
                  64 + (y * 127 // max(1, h - 1) + (40 if (x // 7 + y // 5) % 2 else 0)) % 128,
                  64 + rnd.randrange(128)]
            if mode == "RGBA":
                px.append(64 + (x * 5 + y * 3 + rnd.randrange(32)) % 128)
            data += bytes(px)
    return Image.frombytes(mode, (w, h), bytes(data))


def run_pipefuse(img, params, tmp):
    src = os.path.join(tmp, "in.png")
    pipe = os.path.join(tmp, "resize.json")
    img.save(src)
    with open(pipe, "w") as f:
        json.dump({"pipefuse": 1, "name": "resize", "inputs": ["img"],
                   "stages": [{"id": "r", "op": "resize", "params": params}],
                   "outputs": {"out": "r"}}, f)
    with open(src, "rb") as fin:
        p = subprocess.run([PIPEFUSE, "run", "-q", pipe, "-", "-o", "-"], stdin=fin,
                           capture_output=True)
    if p.returncode != 0:
        failures.append("pipefuse run %s: exit %d: %s" % (params, p.returncode,
                                                        p.stderr.decode(errors="replace")))
        return None
    out = os.path.join(tmp, "out.png")
    with open(out, "wb") as f:
        f.write(p.stdout)
    return Image.open(out)


def compare(label, ours, theirs):
    """(largest difference of colour where Pillow's alpha >= 128, where >= 16, largest
    difference of alpha, samples compared, pixels where colour is beyond the bound)"""
    if ours.size != theirs.size or ours.mode != theirs.mode:
        failures.append("%s: %s %s, Pillow %s %s" % (label, ours.mode, ours.size, theirs.mode,
                                                   theirs.size))
        return None
    a, b = ours.tobytes(), theirs.tobytes()
    n = len(ours.getbands())
    hi = mid = da = beyond = 0
    for i in range(0, len(a), n):
        alpha = b[i + 3] if n == 4 else 255
        d = max(abs(a[i + c] - b[i + c]) for c in range(min(n, 3)))
        if alpha >= 128:
            hi = max(hi, d)
        if alpha >= 16:
            mid = max(mid, d)
            beyond += d > (1 if n == 3 else 1 + 2.5 * 255 / alpha)
        if n == 4:
            da = max(da, abs(a[i + 3] - b[i + 3]))
    return hi, mid, da, len(a), beyond


def main():
    with tempfile.TemporaryDirectory() as tmp:
        sizes = [(64, 48), (101, 75), (29, 151), (50, 200), (203, 20), (7, 5), (1, 1)]
        for mode in ("RGB", "RGBA"):
            img = test_image(mode, 203, 151, 17 if mode == "RGB" else 29)
            for w, h in sizes:
                label = "%s 203x151 to %dx%d" % (mode, w, h)
                ours = run_pipefuse(img, {"width": w, "height": h, "antialias": True}, tmp)
                if ours is None:
                    continue
                r = compare(label, ours, img.resize((w, h), Image.BILINEAR))
                if r is None:
                    continue
                hi, mid, da, n, beyond = r
                print("%-28s colour %d (alpha >= 128), %d (alpha >= 16), alpha %d, %d samples"
                      % (label, hi, mid, da, n))
                if beyond or da > 1:
                    failures.append("%s: %d pixels' colour beyond the bound, alpha off by %d"
                                    % (label, beyond, da))
        # bicubic (Catmull-Rom) and lanczos3 against Pillow's BICUBIC and LANCZOS, shrinking
        # and enlarging
        for mode, pil in (("bicubic", Image.BICUBIC), ("lanczos3", Image.LANCZOS)):
            for imode in ("RGB", "RGBA"):
                img = test_image_mid(imode, 203, 151, 41 if imode == "RGB" else 43)
                for w, h in sizes[:5] + [(406, 302), (257, 160), (600, 31)]:
                    label = "%s %s 203x151 to %dx%d" % (mode, imode, w, h)
                    ours = run_pipefuse(img, {"width": w, "height": h, "mode": mode}, tmp)
                    if ours is None:
                        continue
                    r = compare(label, ours, img.resize((w, h), pil))
                    if r is None:
                        continue
                    hi, mid, da, n, beyond = r
                    print("%-36s colour %d (alpha >= 128), %d (alpha >= 16), alpha %d, %d samples"
                          % (label, hi, mid, da, n))
                    if beyond or da > 1:
                        failures.append("%s: %d pixels' colour beyond the bound, alpha off by %d"
                                        % (label, beyond, da))
        # without antialias a 1/4 shrink aliases: far from Pillow's
        img = test_image("RGB", 203, 151, 17)
        plain = run_pipefuse(img, {"width": 50, "height": 37}, tmp)
        if plain is not None:
            r = compare("plain bilinear", plain, img.resize((50, 37), Image.BILINEAR))
            if r is not None:
                print("plain bilinear 203x151 to 50x37: colour %d" % r[0])
                if r[0] <= 4:
                    failures.append("plain bilinear shrink matches Pillow's antialiased one")
    for f in failures:
        print("FAIL " + f)
    print("resize_pillow: %s" % ("%d failure(s)" % len(failures) if failures else "ok"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
