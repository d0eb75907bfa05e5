#!/usr/bin/env python3
"""bench/cpu_bench.py: the CPU executor against OpenCV, stage by stage, in one run.

    python3 bench/cpu_bench.py --build build [--reps 7] [--size 4000x3000] [--only a,b]

Builds bench/cpu_bench.c against the build tree's libpipefuse, runs it with one thread
and with one per core, times OpenCV doing the same operation on the same uint8 RGBA
frames (when python3 has cv2; otherwise its columns say 'not installed'), and prints a
markdown table of best-of-reps milliseconds and the ratios pipefuse / OpenCV.

The OpenCV side is the nearest equivalent call on uint8, not always the same arithmetic:
pipefuse works in float and rounds once at the end, OpenCV mostly stays in integers.
"""
import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def build_bench(build):
    exe = os.path.join(build, "bench", "cpu_bench")
    os.makedirs(os.path.dirname(exe), exist_ok=True)
    src = os.path.join(HERE, "cpu_bench.c")
    lib = os.path.join(os.path.abspath(build), "lib")
    cmd = [os.environ.get("CC", "cc"), "-O2", "-std=c11", "-D_POSIX_C_SOURCE=200809L",
           "-Wall", "-I", os.path.join(ROOT, "engine", "include"), src, "-o", exe,
           "-L", lib, "-lpipefuse", "-Wl,-rpath," + lib]
    subprocess.run(cmd, check=True)
    return exe


def run_bench(exe, threads, reps, size, only):
    cmd = [exe, "--threads", str(threads), "--reps", str(reps), "--size", size]
    if only:
        cmd += ["--only", only]
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    res = {}
    for line in out.splitlines():
        if line.startswith("#"):
            continue
        name, _, _median, best, cpu = line.split()
        res[name] = (float(best), float(cpu))
    return res


def opencv_cases(cv2, np, a, b):
    """name -> a function doing the nearest OpenCV operation on uint8 RGBA."""
    lut_gamma = np.array([((i / 255.0) ** (1 / 2.2)) * 255 + 0.5 for i in range(256)],
                         dtype=np.float64).clip(0, 255).astype(np.uint8)
    lut_levels = np.array([(min(max((i / 255.0 - 0.1) / 0.8, 0), 1) ** (1 / 1.5)) * 255 + 0.5
                           for i in range(256)]).clip(0, 255).astype(np.uint8)
    m = np.array([[0.9, 0.1, 0, 0], [0.1, 0.8, 0.1, 0], [0, 0.2, 0.8, 0], [0, 0, 0, 1]],
                 dtype=np.float32)
    sat = np.float32(1.5)
    wsat = np.array([0.2126, 0.7152, 0.0722], dtype=np.float32)
    satm = np.eye(4, dtype=np.float32)
    satm[:3, :3] = sat * np.eye(3, dtype=np.float32) + (1 - sat) * np.outer(
        np.ones(3, dtype=np.float32), wsat)
    h, w = a.shape[:2]

    def sobel(x):
        gx = cv2.Sobel(x, cv2.CV_16S, 1, 0)
        gy = cv2.Sobel(x, cv2.CV_16S, 0, 1)
        return cv2.convertScaleAbs(cv2.magnitude(gx.astype(np.float32), gy.astype(np.float32)))

    def unsharp(x):
        blurred = cv2.GaussianBlur(x, (0, 0), 1)
        return cv2.addWeighted(x, 1.8, blurred, -0.8, 0)

    def stats(x):
        return cv2.meanStdDev(x), [cv2.minMaxLoc(c) for c in cv2.split(x)]

    def threshold(x):
        g = cv2.cvtColor(x, cv2.COLOR_RGBA2GRAY)
        return cv2.threshold(g, 127, 255, cv2.THRESH_BINARY)[1]

    return {
        "identity": lambda: a.copy(),
        "brightness": lambda: cv2.add(a, (25, 25, 25, 0)),
        "invert": lambda: cv2.bitwise_not(a),
        "contrast": lambda: cv2.convertScaleAbs(a, alpha=1.5, beta=-64),
        "gamma": lambda: cv2.LUT(a, lut_gamma),
        "levels": lambda: cv2.LUT(a, lut_levels),
        "linear": lambda: cv2.convertScaleAbs(a, alpha=1.8, beta=-76),
        "saturation": lambda: cv2.transform(a, satm),
        "grayscale": lambda: cv2.cvtColor(a, cv2.COLOR_RGBA2GRAY),
        "threshold": lambda: threshold(a),
        "color_matrix": lambda: cv2.transform(a, m),
        "add": lambda: cv2.add(a, b),
        "blend": lambda: cv2.addWeighted(a, 0.7, b, 0.3, 0),
        "difference": lambda: cv2.absdiff(a, b),
        "multiply": lambda: cv2.multiply(a, b, scale=1 / 255),
        "chain8": lambda: cv2.LUT(a, lut_gamma),  # the target: one OpenCV point op
        "gaussian": lambda: cv2.GaussianBlur(a, (0, 0), 2),
        "gamma_gaussian": lambda: cv2.GaussianBlur(cv2.LUT(a, lut_gamma), (0, 0), 2),
        "box": lambda: cv2.blur(a, (3, 3)),
        "box2": lambda: cv2.blur(a, (5, 5)),
        "unsharp": lambda: unsharp(a),
        "sobel": lambda: sobel(a),
        "median3": lambda: cv2.medianBlur(a, 3),
        "resize_nearest": lambda: cv2.resize(a, (w // 2, h // 2), interpolation=cv2.INTER_NEAREST),
        "resize_bilinear": lambda: cv2.resize(a, (w // 2, h // 2), interpolation=cv2.INTER_LINEAR),
        "resize_area": lambda: cv2.resize(a, (w // 2, h // 2), interpolation=cv2.INTER_AREA),
        "crop": lambda: a[h // 4:h // 4 + h // 2, w // 4:w // 4 + w // 2].copy(),
        "flip": lambda: cv2.flip(a, 1),
        "rotate90": lambda: cv2.rotate(a, cv2.ROTATE_90_CLOCKWISE),
        "pad": lambda: cv2.copyMakeBorder(a, 16, 16, 16, 16, cv2.BORDER_CONSTANT,
                                          value=(0, 0, 0, 255)),
        "histogram": lambda: [cv2.calcHist([a], [c], None, [256], [0, 256]) for c in range(4)],
        "colsum": lambda: cv2.reduce(a, 0, cv2.REDUCE_SUM, dtype=cv2.CV_64F),
        "rowsum": lambda: cv2.reduce(a, 1, cv2.REDUCE_SUM, dtype=cv2.CV_64F),
        "stats": lambda: stats(a),
    }


def time_opencv(names, threads, reps, size):
    try:
        import cv2
        import numpy as np
    except ImportError:
        return None
    w, h = (int(v) for v in size.split("x"))
    rng = np.random.default_rng(1)
    grad = ((np.arange(w)[None, :] * 255 // w + np.arange(h)[:, None] * 255 // h) // 2)
    a = np.clip(grad[:, :, None] + rng.integers(-16, 17, (h, w, 4)), 0, 255).astype(np.uint8)
    b = np.clip(grad[:, :, None] + rng.integers(-16, 17, (h, w, 4)), 0, 255).astype(np.uint8)
    cv2.setNumThreads(threads)
    cases = opencv_cases(cv2, np, a, b)
    res = {}
    for name in names:
        fn = cases.get(name)
        if fn is None:
            continue
        fn()
        best = cpu = float("inf")
        for _ in range(reps):
            t0, c0 = time.perf_counter(), time.process_time()
            fn()
            best = min(best, (time.perf_counter() - t0) * 1e3)
            cpu = min(cpu, (time.process_time() - c0) * 1e3)
        res[name] = (best, cpu)
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build", help="a configured and built build tree")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--size", default="4000x3000")
    ap.add_argument("--only", default="", help="comma-separated case names")
    args = ap.parse_args()
    exe = build_bench(args.build)
    ncpu = os.cpu_count() or 1
    pf1 = run_bench(exe, 1, args.reps, args.size, args.only)
    pfn = run_bench(exe, 0, args.reps, args.size, args.only)
    names = list(pf1)
    cv1 = time_opencv(names, 1, args.reps, args.size)
    cvn = time_opencv(names, ncpu, args.reps, args.size)
    if cv1 is None:
        import importlib.util
        print("OpenCV: not installed (python3 cannot import cv2"
              + ("" if importlib.util.find_spec("numpy") else " or numpy") + ")")
    else:
        import cv2
        print(f"OpenCV {cv2.__version__}")
    print(f"{args.size} RGBA8, ms, best of {args.reps} runs; {ncpu} cores. One thread: CPU "
          "time of the process (robust to other load); all threads: wall time.\n")
    print("| stage | pipefuse 1 thread | OpenCV 1 thread | ratio | pipefuse all threads "
          "| OpenCV all threads | ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|")

    def cell(d, n, k):
        return "not installed" if d is None else (f"{d[n][k]:.1f}" if n in d else "-")

    def ratio(p, d, n, k):
        return "-" if d is None or n not in d or d[n][k] <= 0 else f"{p / d[n][k]:.1f}x"

    for n in names:
        p1, pn = pf1[n][1], pfn[n][0] if n in pfn else float("nan")
        print(f"| {n} | {p1:.1f} | {cell(cv1, n, 1)} | {ratio(p1, cv1, n, 1)} "
              f"| {pn:.1f} | {cell(cvn, n, 0)} | {ratio(pn, cvn, n, 0)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
