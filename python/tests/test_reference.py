"""Reference checks: the Python API gives exactly what `pipefuse run` writes (the C
implementation end to end) for the example pipelines on the sample photos. Images are
decoded with Pillow; tables are compared with the CSV files."""
import csv
import subprocess

import numpy as np
import pytest

from conftest import PIPELINES, SAMPLES, cpu

Image = pytest.importorskip("PIL.Image")

ONE_INPUT = ["demo", "analysis", "edges", "sharpen", "thumbnail", "geometry", "duotone"]
PHOTOS = ["chelsea.png", "camera.png"]  # RGB and gray


def read_png(path, channels=None):
    """The file's pixels. PNG outputs are stored in their smallest lossless form by
    default (a palette, 1/2/4-bit gray, alpha or colour left out where the pixels do
    not use them), so an 8-bit file is expanded to the frame's channels (1 to 4)."""
    im = Image.open(path)
    assert im.mode in ("1", "L", "LA", "P", "PA", "RGB", "RGBA", "I;16"), im.mode
    if im.mode == "I;16":
        return np.asarray(im).astype(np.uint16)
    if channels:
        im = im.convert({1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}[channels])
    return np.asarray(im)


def run_cli(cli, pipeline, inputs, outdir, extra=()):
    cmd = [cli, "run", str(pipeline), *map(str, inputs), "-o", str(outdir), "--backend", "cpu",
           "--quiet", *extra]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def read_csv(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    return rows[0], rows[1:]


def check_outputs(p, got, outdir, stem, single_image):
    for o in p.outputs:
        if o.kind == "image":
            name = f"{stem}.png" if single_image else f"{stem}.{o.name}.png"
            have = got[o.name]
            if have.ndim == 3 and have.shape[2] == 1:
                have = have[..., 0]
            want = read_png(outdir / name, 1 if have.ndim == 2 else have.shape[2])
            assert have.dtype == want.dtype and have.shape == want.shape, o.name
            assert np.array_equal(have, want), f"{o.name}: {np.abs(have.astype(int) - want).max()}"
        else:
            header, rows = read_csv(outdir / f"{stem}.{o.name}.csv")
            t = got[o.name]
            assert header[0] == "row" and len(rows) == len(t)
            values = np.array([[float(v) for v in r[1:]] for r in rows])
            have = np.stack([t[c] for c in t.dtype.names[1:]], axis=1)
            assert np.array_equal(values, have), o.name  # %.17g round-trips exactly
            assert [r[0] for r in rows] == [str(v) for v in t["row"]]


@pytest.mark.parametrize("name", ONE_INPUT)
def test_one_input_pipelines(engine, cli, tmp_path, name):
    pipeline = PIPELINES / f"{name}.json"
    run_cli(cli, pipeline, [SAMPLES / f for f in PHOTOS], tmp_path)
    p = cpu(engine, pipeline)
    single = sum(o.kind == "image" for o in p.outputs) == 1
    for f in PHOTOS:
        got = p.run(read_png(SAMPLES / f))
        check_outputs(p, got, tmp_path, f[:-4], single)


def test_two_inputs(engine, cli, tmp_path):
    a, b = SAMPLES / "astronaut.png", SAMPLES / "gravel.png"  # both 512x512
    pipeline = PIPELINES / "crossfade.json"
    run_cli(cli, pipeline, [a], tmp_path, ["--input", f"b={b}"])
    p = cpu(engine, pipeline)
    got = p.run({"a": read_png(a), "b": read_png(b)})
    check_outputs(p, got, tmp_path, "astronaut", False)


def test_params_like_cli_set(engine, cli, tmp_path):
    pipeline = PIPELINES / "demo.json"
    photo = SAMPLES / "coffee.png"
    run_cli(cli, pipeline, [photo], tmp_path, ["--set", "glow.sigma=1.5", "--set",
                                               "hist.bins=16"])
    p = cpu(engine, pipeline)
    p.set("glow.sigma", 1.5)
    p.set("hist.bins", 16)
    check_outputs(p, p.run(read_png(photo)), tmp_path, "coffee", True)
