#!/usr/bin/env python3
"""Run a pipeline over a folder of PNG files, with a progress bar.

    python batch.py PIPELINE INPUT_DIR -o OUT_DIR [--backend auto|cpu|cuda]
                    [--set ID.PARAM=JSON ...] [--workers N]

Outputs are named as `pipefuse run` names them: with one image output, photo.png
becomes OUT_DIR/photo.png; otherwise OUT_DIR/photo.NAME.png for each image output and
OUT_DIR/photo.NAME.csv for each table. A file that fails is reported and the batch goes
on; the exit status is 1 when any failed.

Files are decoded and encoded on a thread pool with pipefuse.read_png and write_png
(libpng, at the file's own bit depth: a 16-bit PNG is written back as 16-bit; both
release the GIL), while the pipeline runs the frames in order on the main thread. The
progress bar is tqdm's when tqdm is installed, a plain counter otherwise.
"""
import argparse
import csv
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pipefuse

try:
    from tqdm import tqdm
except ImportError:  # a plain fallback with the same interface as far as used here
    class tqdm:  # noqa: N801
        def __init__(self, total, unit, **_):
            self.total, self.n, self.unit, self.t0 = total, 0, unit, time.perf_counter()

        def update(self, n=1):
            self.n += n
            rate = self.n / max(time.perf_counter() - self.t0, 1e-9)
            print(f"\r{self.n}/{self.total} {self.unit}s ({rate:.1f}/s)", end="",
                  file=sys.stderr, flush=True)

        def write(self, msg):
            print("\n" + msg, file=sys.stderr)

        def close(self):
            print(file=sys.stderr)


def decode(path):
    # The file's own samples: 8- or 16-bit, gray, gray+alpha, RGB or RGBA.
    return pipefuse.read_png(path)


def encode_image(a, path):
    if a.dtype == np.float32:  # PNG has no float samples
        a = (np.clip(a, 0, 1) * 255 + 0.5).astype(np.uint8)
    # 16-bit stays 16-bit; written under a temporary name and renamed (complete files only)
    pipefuse.write_png(path, a)


def write_table(t, path):
    tmp = path.with_name("." + path.name + ".tmp")
    with open(tmp, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(t.dtype.names)
        for row in t:
            w.writerow([row[0]] + [f"{float(v):.17g}" for v in list(row)[1:]])
    os.replace(tmp, path)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pipeline")
    ap.add_argument("input_dir", type=Path)
    ap.add_argument("-o", "--output", type=Path, required=True)
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--set", action="append", default=[], metavar="ID.PARAM=JSON")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args(argv)

    files = sorted(args.input_dir.glob("*.png"))
    if not files:
        print(f"batch: no *.png in {args.input_dir}", file=sys.stderr)
        return 2
    args.output.mkdir(parents=True, exist_ok=True)
    try:
        pipeline = pipefuse.Engine().load(args.pipeline, backend=args.backend)
        for s in args.set:
            key, _, value = s.partition("=")
            pipeline.set_json(key, value)
    except pipefuse.Error as e:
        print(f"batch: {e}", file=sys.stderr)
        return 2
    images = [o.name for o in pipeline.outputs if o.kind == "image"]
    single = len(images) == 1

    failed = 0
    bar = tqdm(total=len(files), unit="file")
    with ThreadPoolExecutor(args.workers) as pool:
        # Decoding runs ahead of the pipeline by up to `workers` files.
        pending = [pool.submit(decode, f) for f in files[:args.workers]]
        writes = []
        for i, path in enumerate(files):
            if i + args.workers < len(files):
                pending.append(pool.submit(decode, files[i + args.workers]))
            try:
                out = pipeline.run(pending[i].result())
            except Exception as e:  # a file that fails is reported; the batch goes on
                bar.write(f"{path.name}: {e}")
                failed += 1
                bar.update()
                continue
            pending[i] = None  # free the decoded frame
            for name, value in out.items():
                if name in images:
                    dst = args.output / (f"{path.stem}.png" if single
                                         else f"{path.stem}.{name}.png")
                    writes.append((path, pool.submit(encode_image, value, dst)))
                else:
                    writes.append((path, pool.submit(write_table, value,
                                                     args.output / f"{path.stem}.{name}.csv")))
            bar.update()
        bad = set()
        for path, w in writes:
            try:
                w.result()
            except Exception as e:  # any failed write fails its file, not the batch
                bar.write(f"{path.name}: {type(e).__name__}: {e}")
                bad.add(path)
        failed += len(bad)
    bar.close()
    print(f"batch: {len(files) - failed} of {len(files)} files", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
