"""Parameters bound to a reduction (docs/pipeline-format.md), against NumPy: the example
pipelines' outputs computed here from the image alone, with NumPy's histogram and the
documented rules, within one 8-bit step."""
import numpy as np
import pytest

from conftest import PIPELINES, SAMPLES, cpu

Image = pytest.importorskip("PIL.Image")


def photo(name):
    return np.asarray(Image.open(SAMPLES / name).convert("RGB"))


def low_contrast(img):
    """Codes squeezed into [60, 160]: something for auto-levels to stretch."""
    return (60 + img.astype(np.float64) * (100 / 255)).round().astype(np.uint8)


def histogram(v, bins=256):
    """pipefuse's bins of 8-bit codes: code k of 255 in bin floor(k * bins / 255), the
    last bin closed."""
    k = np.round(v * 255).astype(np.int64)
    return np.bincount(np.minimum(k * bins // 255, bins - 1).ravel(), minlength=bins)


def percentile(h, pct):
    cum = np.cumsum(h)
    i = int(np.argmax((cum > 0) & (cum >= h.sum() * pct / 100)))
    return (i + 0.5) / len(h)


def levels(x, lo, hi):
    return np.clip((x - lo) / (hi - lo), 0, 1)


def close(got, want, what):
    diff = np.abs(got.astype(np.int64) - np.round(want * 255).astype(np.int64))
    assert diff.max() <= 1, f"{what}: off by {diff.max()} steps at {np.argmax(diff)}"


def test_auto_levels_stretches_the_percentiles(engine):
    img = low_contrast(photo("coffee.png"))
    x = img / 255.0
    h = histogram(x[..., :3])  # R, G and B together
    lo, hi = percentile(h, 0.5), percentile(h, 99.5)
    got = cpu(engine, PIPELINES / "auto_levels.json").run(img)["photo"]
    close(got, levels(x, lo, hi), "auto_levels")
    # the stretch is real: the output spans the range the input did not
    assert got.min() <= 3 and got.max() >= 252 and img.min() >= 60 and img.max() <= 160


def test_normalize_maps_min_and_max(engine):
    img = low_contrast(photo("chelsea.png"))
    x = img / 255.0
    got = cpu(engine, PIPELINES / "normalize.json").run(img)["photo"]
    close(got, levels(x, x.min(), x.max()), "normalize")
    assert got.min() == 0 and got.max() == 255


def test_grey_world_equalises_the_channel_means(engine):
    img = photo("coffee.png")
    x = img / 255.0
    means = x.reshape(-1, 3).mean(axis=0)
    want = np.clip(x * (means.mean() / means), 0, 1)
    got = cpu(engine, PIPELINES / "grey_world.json").run(img)["photo"]
    close(got, want, "grey_world")
    out_means = got.reshape(-1, 3).mean(axis=0)
    assert np.ptp(out_means) < 0.1 * np.ptp(img.reshape(-1, 3).mean(axis=0))


def test_exposure_brings_the_mean_to_its_target(engine):
    img = photo("camera.png")
    x = img / 255.0
    want = np.clip(x * (0.45 / x.mean()), 0, 1)
    got = cpu(engine, PIPELINES / "exposure.json").run(img)["photo"]
    close(got, want, "exposure")


def otsu_level(v, bins=256):
    """Otsu's method over the histogram, written as NumPy would: the split maximising
    w0 w1 (m0 - m1)^2, its upper edge as the level."""
    h = histogram(v, bins).astype(np.float64)
    c = (np.arange(bins) + 0.5) / bins
    w0 = np.cumsum(h)[:-1]
    w1 = h.sum() - w0
    s0 = np.cumsum(h * c)[:-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        var = w0 * w1 * (s0 / w0 - ((h * c).sum() - s0) / w1) ** 2
    var[(w0 == 0) | (w1 == 0)] = -1
    return (int(np.argmax(var)) + 1) / bins


def test_otsu_splits_a_page_as_otsu_does(engine):
    img = photo("camera.png")  # gray stored as RGB: the gray stage keeps it
    gray = img[..., 0] / 255.0
    level = otsu_level(gray)
    got = cpu(engine, PIPELINES / "otsu.json").run(img)["page"]
    got = got[..., 0] if got.ndim == 3 else got
    want = gray >= level
    agree = np.mean((got > 127) == want)
    assert agree > 0.9999, f"otsu: {agree:.6f} of the pixels on the same side of {level}"
    assert 0.1 < want.mean() < 0.9


def test_values_follow_each_frame(engine):
    """One pipeline, frames in a row: each frame's own statistics."""
    p = cpu(engine, PIPELINES / "normalize.json")
    for lo, hi in ((10, 90), (100, 240), (0, 255)):
        img = np.linspace(lo, hi, 64 * 48 * 3).reshape(48, 64, 3).round().astype(np.uint8)
        got = p.run(img)["photo"]
        assert got.min() == 0 and got.max() == 255, (lo, hi)
