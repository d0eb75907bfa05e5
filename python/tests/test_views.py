"""Every host array NumPy can describe is a frame: the layouts a pf_frame cannot describe
(flipped, BGR seen as RGB, strided, Fortran order, broadcast, misaligned) are copied once
through the pipeline's staging pool, inputs before the frame, outputs once it is
complete, and give exactly the pixels of the same image made contiguous."""
import numpy as np
import pytest

import pipefuse
from conftest import PIPELINES, cpu

rng = np.random.default_rng(37)


def _image(h, w, c, dtype):
    shape = (h, w) if c == 0 else (h, w, c)
    if dtype == np.float32:
        return rng.random(shape, dtype=np.float32)
    return rng.integers(0, np.iinfo(dtype).max + 1, shape, dtype=dtype)


def _misaligned(a):
    """a's values in a buffer whose samples are not aligned to their size."""
    raw = np.zeros(a.nbytes + 1, np.uint8)
    v = np.ndarray(a.shape, a.dtype, buffer=raw.data, offset=1)
    v[...] = a
    return v


VIEWS = {
    "flipped": lambda a: a[::-1],
    "mirrored": lambda a: a[:, ::-1],
    "bgr_as_rgb": lambda a: a[..., ::-1],
    "both_flips_and_bgr": lambda a: a[::-1, ::-1, ::-1],
    "every_other": lambda a: a[::2, ::3],
    "three_of_four": lambda a: np.concatenate([a, a[..., :1]], axis=2)[..., :3],
    "fortran": lambda a: np.asfortranarray(a),
    "transposed": lambda a: np.ascontiguousarray(a.transpose(1, 0, 2)).transpose(1, 0, 2),
    "broadcast_row": lambda a: np.broadcast_to(a[:1], a.shape),
    "misaligned": _misaligned,
}


@pytest.fixture(scope="module")
def demo(engine):
    return cpu(engine, PIPELINES / "demo.json")


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.float32])
@pytest.mark.parametrize("view", sorted(VIEWS))
def test_input_views_equal_their_contiguous_copy(demo, view, dtype):
    a = _image(37, 53, 3, dtype)
    v = VIEWS[view](a)
    if view == "misaligned" and dtype == np.uint8:
        pytest.skip("bytes are always aligned")
    want = demo.run(np.ascontiguousarray(v))
    got = demo.run(v)
    assert got["result"].dtype == np.dtype(dtype) and got["result"].shape == v.shape
    assert np.array_equal(got["result"], want["result"])
    assert np.array_equal(got["histogram"], want["histogram"])


@pytest.mark.parametrize("view", ["flipped", "bgr_as_rgb", "every_other", "fortran"])
def test_output_views_are_written_once_the_frame_completes(demo, view):
    a = _image(40, 64, 3, np.uint8)
    want = demo.run(a)["result"]
    base = np.zeros((80, 128, 3), np.uint8) if view == "every_other" else np.zeros_like(a)
    if view == "every_other":
        out = base[::2, ::2]
    elif view == "fortran":
        out = np.asfortranarray(base)
    else:
        out = VIEWS[view](base)
    t = demo.submit(a, {"result": out})
    demo.wait(t)
    assert np.array_equal(out, want)
    if view == "every_other":  # the pixels between were not touched
        assert not base[1::2].any() and not base[:, 1::2].any()


def test_gray_and_two_channel_views(engine):
    inv = cpu(engine, {"pipefuse": 1, "inputs": ["in"], "stages": [
        {"id": "i", "op": "invert", "inputs": ["in"]}], "outputs": {"out": "i"}})
    for c in (0, 2, 4):
        a = _image(20, 30, c, np.uint16)
        v = a[::-1, ::-1]
        assert np.array_equal(inv.run(v)["out"], inv.run(np.ascontiguousarray(v))["out"])


def test_a_view_of_the_input_as_its_output(demo):
    """In place through views: the result is as with separate arrays."""
    a = _image(30, 40, 3, np.uint8)
    want = demo.run(a[::-1])["result"]
    v = a[::-1]
    demo.run(v, [v, None])
    assert np.array_equal(v, want)


def test_a_loop_over_views_reuses_the_pool(demo):
    a = _image(64, 96, 4, np.uint8)
    want = demo.run(np.ascontiguousarray(a[::-1, :, ::-1]))["result"]
    out = np.empty_like(a)[::-1]
    for _ in range(20):
        demo.run(a[::-1, :, ::-1], [out, None])
        assert np.array_equal(out, want)


def test_a_cancelled_frame_leaves_a_staged_output_untouched(engine):
    heavy = cpu(engine, {"pipefuse": 1, "inputs": ["in"], "stages": [
        {"id": "g", "op": "gaussian", "inputs": ["in"], "params": {"sigma": 24}}],
        "outputs": {"out": "g"}})
    a = np.full((1500, 2000, 3), 200, np.uint8)
    out = np.zeros_like(a)[::-1]
    t = heavy.submit(a, [out])
    heavy.cancel()
    with pytest.raises(pipefuse.CancelledError):
        heavy.wait(t)
    assert not out.any()


def test_what_is_no_image_is_still_refused(demo):
    with pytest.raises(ValueError, match="5 channels"):
        demo.run(np.zeros((4, 4, 5), np.uint8)[:, ::-1])
    with pytest.raises(TypeError, match="dtype"):
        demo.run(np.zeros((4, 4, 3), np.float64)[::-1])
    with pytest.raises(ValueError, match="read-only"):
        demo.run(np.zeros((4, 4, 3), np.uint8), [np.broadcast_to(np.zeros((1, 4, 3), np.uint8),
                                                                 (4, 4, 3)), None])
