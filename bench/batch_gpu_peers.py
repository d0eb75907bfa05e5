#!/usr/bin/env python3
"""bench/batch_gpu_peers.py: the light pipeline of bench/batch_gpu.sh done by pyvips or
OpenCV over a folder of PNGs, with every core.

    python3 bench/batch_gpu_peers.py {vips|cv2} IN_DIR OUT_DIR [--threads N] [--zlib L]
        [--scale 0.5] [--a 1.1] [--b -4.335] [--sigma 1.0]

Each file: decode the PNG, resize by --scale (area average, as pipefuse's resize
mode area), a linear map a*x + b (the light pipeline's brightness and contrast in 8-bit
units), a gaussian blur of --sigma, encode a PNG at --zlib with the Up filter where the
library takes a filter. N processes (a multiprocessing pool), each single-threaded
inside (VIPS_CONCURRENCY=1, cv2.setNumThreads(1)), so the cores work on files side by
side as pipefuse's codec threads do. Prints one line: "files N failed M seconds S";
exits 3 when the library cannot be imported, 1 when a file failed."""
import argparse
import multiprocessing as mp
import os
import sys
import time

ARGS = None


def init(args):
    global ARGS
    ARGS = args
    if args.lib == "vips":
        os.environ["VIPS_CONCURRENCY"] = "1"
        import pyvips

        pyvips.cache_set_max(0)
    else:
        import cv2

        cv2.setNumThreads(1)


def one_vips(src, dst):
    import pyvips

    a = ARGS
    im = pyvips.Image.new_from_file(src, access="sequential")
    fmt = im.format
    if a.scale != 1:
        im = im.resize(a.scale, kernel="linear") if a.scale > 1 else im.shrink(1 / a.scale, 1 / a.scale)
    im = im.linear(a.a, a.b).cast(fmt)  # cast clips to the format's range
    im = im.gaussblur(a.sigma) if a.sigma > 0 else im  # on the samples' own format, fastest
    try:
        im.pngsave(dst, compression=a.zlib, filter="up")
    except pyvips.Error:  # an older libvips without the filter option
        im.pngsave(dst, compression=a.zlib)


def one_cv2(src, dst):
    import cv2

    a = ARGS
    im = cv2.imread(src, cv2.IMREAD_UNCHANGED)
    if im is None:
        raise RuntimeError("cannot read")
    if a.scale != 1:
        h, w = im.shape[:2]
        size = (max(1, round(w * a.scale)), max(1, round(h * a.scale)))
        im = cv2.resize(im, size, interpolation=cv2.INTER_AREA if a.scale < 1 else cv2.INTER_LINEAR)
    im = cv2.convertScaleAbs(im, alpha=a.a, beta=a.b) if im.dtype.name == "uint8" else cv2.addWeighted(
        im, a.a, im, 0, a.b * 257
    )
    if a.sigma > 0:
        im = cv2.GaussianBlur(im, (0, 0), a.sigma)
    if not cv2.imwrite(dst, im, [cv2.IMWRITE_PNG_COMPRESSION, a.zlib]):
        raise RuntimeError("cannot write")


def one(name):
    src = os.path.join(ARGS.indir, name)
    dst = os.path.join(ARGS.outdir, name)
    try:
        (one_vips if ARGS.lib == "vips" else one_cv2)(src, dst)
        return None
    except Exception as e:  # a file's failure is counted, the others go on
        return "%s: %s" % (name, e)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("lib", choices=["vips", "cv2"])
    p.add_argument("indir")
    p.add_argument("outdir")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--zlib", type=int, default=1)
    p.add_argument("--scale", type=float, default=0.5)
    p.add_argument("--a", type=float, default=1.1)
    p.add_argument("--b", type=float, default=-4.335)
    p.add_argument("--sigma", type=float, default=1.0)
    args = p.parse_args()
    try:
        __import__("pyvips" if args.lib == "vips" else "cv2")
    except Exception as e:  # ImportError, or pyvips's OSError without libvips
        print("%s: not available (%s)" % (args.lib, e), file=sys.stderr)
        return 3
    os.makedirs(args.outdir, exist_ok=True)
    names = sorted(n for n in os.listdir(args.indir) if n.endswith(".png"))
    t0 = time.monotonic()
    with mp.get_context("fork").Pool(args.threads, initializer=init, initargs=(args,)) as pool:
        errs = [e for e in pool.imap_unordered(one, names, chunksize=1) if e]
    secs = time.monotonic() - t0
    for e in errs[:5]:
        print(e, file=sys.stderr)
    print("files %d failed %d seconds %.3f" % (len(names), len(errs), secs))
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main())
