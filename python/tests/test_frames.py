"""Host frames: every sample format and layout the C API takes, read and written where
they are; outputs allocated or the caller's; clear exceptions for everything else."""
import ctypes

import numpy as np
import pytest

import pipefuse
from conftest import PIPELINES, cpu

IDENT = {"pipefuse": 1, "inputs": ["x"],
         "stages": [{"id": "lin", "op": "linear", "inputs": ["x"], "params": {"a": 1.0, "b": 0.0}}],
         "outputs": {"y": "lin"}}
MAX = {np.uint8: 255, np.uint16: 65535, np.float32: 1.0}


def rand(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    if dtype == np.float32:
        return rng.random(shape, dtype=np.float32)
    return rng.integers(0, MAX[dtype] + 1, shape, dtype=dtype)


@pytest.fixture(scope="module")
def ident(engine):
    return cpu(engine, IDENT)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.float32])
@pytest.mark.parametrize("shape", [(5, 7), (5, 7, 1), (5, 7, 2), (6, 3, 3), (4, 9, 4)])
def test_identity_round_trip(ident, dtype, shape):
    x = rand(shape, dtype)
    y = ident.run(x)["y"]
    assert y.dtype == x.dtype and y.shape == x.shape  # "like the input"
    if dtype == np.float32:  # gray goes through RGB and back: within rounding
        assert np.allclose(y, x, rtol=1e-6, atol=1e-7)
    else:
        assert np.array_equal(y, x)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.float32])
def test_strided_rows_in_and_out(ident, dtype):
    wide = rand((6, 13, 3), dtype)
    x = wide[:, 2:9]                      # rows 13 pixels apart, 7 used
    assert not x.flags.c_contiguous
    out_wide = np.zeros((6, 11, 3), dtype)
    y = out_wide[:, 1:8]
    r = ident.run(x, {"y": y})
    assert r["y"] is y
    assert np.array_equal(y, x)
    assert not out_wide[:, 0].any() and not out_wide[:, 8:].any()  # nothing outside written
    rows = rand((8, 5, 4), dtype)[::2]    # every other row
    assert np.array_equal(ident.run(rows)["y"], rows)


def test_linear_values(engine):
    p = cpu(engine, dict(IDENT, stages=[{"id": "lin", "op": "linear", "inputs": ["x"],
                                         "params": {"a": 0.5, "b": 0.25}}]))
    x = np.array([[0, 255], [128, 64]], np.uint8)
    y = p.run(x.astype(np.float32) / 255)["y"]
    assert np.allclose(y, x / 255 * 0.5 + 0.25, atol=1e-6)
    y8 = p.run(x)["y"]
    assert np.array_equal(y8, np.round((x / 255 * 0.5 + 0.25) * 255).astype(np.uint8))


def test_output_formats_from_pipeline(engine):
    p = cpu(engine, dict(IDENT, outputs={"y": {"from": "lin", "format": "rgb16"}}))
    y = p.run(np.full((3, 4), 255, np.uint8))["y"]
    assert y.dtype == np.uint16 and y.shape == (3, 4, 3) and (y == 65535).all()


def test_caller_outputs_any_format(ident):
    x = rand((4, 6, 3), np.uint8)
    f = np.empty((4, 6, 4), np.float32)
    ident.run(x, [f])
    assert np.allclose(f[..., :3], x / 255) and np.allclose(f[..., 3], 1.0)


def test_output_forms_and_skipping(engine):
    p = cpu(engine, PIPELINES / "demo.json")
    x = rand((32, 40, 3), np.uint8)
    full = p.run(x)
    assert set(full) == {"result", "histogram"}
    skip = p.run(x, {"result": None})
    assert set(skip) == {"histogram"}
    assert np.array_equal(skip["histogram"], full["histogram"])
    mine = np.empty_like(x)
    listed = p.run(x, [mine, None])  # list form: nothing allocated
    assert listed["result"] is mine and np.array_equal(mine, full["result"])
    with pytest.raises(KeyError):
        p.run(x, {"nope": mine})


def test_tables(engine):
    p = cpu(engine, PIPELINES / "demo.json")
    x = rand((30, 20, 3), np.uint8)
    h = p.run(x)["histogram"]
    cols = h.dtype.names[1:]
    assert h.dtype.names[0] == "row" and len(h) == 64 and cols
    # Every pixel lands in exactly one bin per channel.
    for c in cols[:3]:
        assert h[c].sum() == 30 * 20
    stats = cpu(engine, PIPELINES / "analysis.json").run(x)["stats"]
    assert stats.dtype["row"].kind == "U"  # named rows (min, max, mean...)
    assert len(stats) >= 2


def test_multi_input(engine):
    p = cpu(engine, PIPELINES / "crossfade.json")
    a = np.zeros((8, 8, 3), np.uint8)
    b = np.full((8, 8, 3), 200, np.uint8)
    r1 = p.run({"a": a, "b": b})
    r2 = p.run([a, b])
    assert np.array_equal(r1["fade"], r2["fade"])
    assert np.allclose(r1["fade"], 100, atol=1)
    with pytest.raises(KeyError, match="missing"):
        p.run({"a": a})
    with pytest.raises(ValueError, match="2 input"):
        p.run([a])


def test_torch_cpu_tensor_zero_copy(engine, ident):
    torch = pytest.importorskip("torch")
    x = torch.arange(24, dtype=torch.uint8).reshape(2, 4, 3)
    y = torch.zeros_like(x)
    ident.run(x, [y])
    assert torch.equal(x, y)


@pytest.mark.parametrize("bad,exc,text", [
    (np.zeros((4, 4), np.float64), TypeError, "uint8, uint16 or float32"),
    (np.zeros((4, 4), np.int32), TypeError, "dtype"),
    (np.zeros((4, 4, 5), np.uint8), ValueError, "5 channels"),
    (np.zeros((4,), np.uint8), ValueError, "dimension"),
    (np.zeros((2, 4, 4, 1), np.uint8), ValueError, "dimension"),
    (np.zeros((0, 4), np.uint8), ValueError, "pixels"),
    ("not an array", TypeError, "array"),
    (None, TypeError, "None"),
])
def test_bad_inputs(ident, bad, exc, text):
    with pytest.raises(exc, match=text):
        ident.run(bad)
    assert ident.run(np.zeros((2, 2), np.uint8))["y"].shape == (2, 2)  # still usable


def test_bad_outputs(ident):
    x = np.zeros((4, 6), np.uint8)
    ro = np.zeros((4, 6), np.uint8)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="output 'y': the array is read-only"):
        ident.run(x, [ro])
    with pytest.raises(pipefuse.ShapeError, match="4x4|6x4"):
        ident.run(x, [np.zeros((4, 4), np.uint8)])
    with pytest.raises(TypeError, match="dtype"):
        ident.run(x, [np.zeros((4, 6), np.float64)])
    with pytest.raises(ValueError, match="output"):
        ident.run(x, [np.zeros((4, 6), np.uint8), np.zeros((4, 6), np.uint8)])


def test_byte_order(ident):
    x = np.arange(12, dtype=">u2").reshape(3, 4)
    with pytest.raises(TypeError, match="dtype"):
        ident.run(x)


class FakeCuda:
    """Host memory dressed as a CUDA array: exercises the protocol parsing; the CPU
    backend refuses device frames before touching them."""

    def __init__(self, arr, typestr=None, device=0, stream=None):
        self.arr = arr
        self.__cuda_array_interface__ = {
            "shape": arr.shape, "typestr": typestr or arr.dtype.str,
            "data": (arr.ctypes.data, False), "strides": None, "version": 3,
            "stream": stream}


class FakeDLPack:
    """Claims a CUDA device but exports a CPU DLPack tensor."""

    def __init__(self, arr):
        self.arr = arr

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, stream=None):
        return self.arr.__dlpack__()


def test_device_protocols_without_gpu(ident):
    host = np.zeros((4, 6, 3), np.uint8)
    with pytest.raises(pipefuse.UnsupportedError, match="CUDA|device"):
        ident.run(FakeCuda(host), [FakeCuda(np.zeros_like(host))])
    with pytest.raises(TypeError, match="dtype"):
        ident.run(FakeCuda(host.astype(np.int16)), [FakeCuda(host)])
    with pytest.raises(ValueError, match="stream"):
        ident.run(FakeCuda(host, stream=12345), [FakeCuda(host)], stream=0)
    with pytest.raises(TypeError, match="host .* device|device .* host"):
        ident.run(FakeCuda(host), [np.zeros_like(host)])
    with pytest.raises(TypeError, match="allocate"):
        ident.run(FakeCuda(host))  # no framework to allocate outputs with
    with pytest.raises(ValueError, match="not CUDA device memory"):
        ident.run(FakeDLPack(host), [FakeCuda(host)], stream=0)


def test_pinned_frames(engine, ident):
    x = engine.empty_pinned((6, 10, 3), np.uint8)
    assert x.shape == (6, 10, 3) and x.dtype == np.uint8 and x.flags.writeable
    x[:] = rand((6, 10, 3), np.uint8)
    y = engine.empty_pinned((6, 10, 3), np.uint8)
    ident.run(x, [y])
    assert np.array_equal(x, y)
    g = engine.empty_pinned((4, 5), np.float32)
    assert g.shape == (4, 5) and g.dtype == np.float32
    with pytest.raises(TypeError):
        engine.empty_pinned((4, 5), np.float64)
    with pytest.raises(ValueError):
        engine.empty_pinned((4, 5, 6), np.uint8)
    del x, y, g  # freed through the engine


# ---- DLPack, as a producer lays it out (dlpack.h), on host memory claiming CUDA --------

class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManaged(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_DLTENSOR = b"dltensor"


class FakeDLPackCuda:
    """A DLPack producer saying CUDA device `device`; strides in elements or None."""

    def __init__(self, arr, device=0, code=None, bits=None, lanes=1, strides=True):
        self.arr, self.device, self.streams = arr, device, []
        codes = {"u": 1, "i": 0, "f": 2}
        t = _DLTensor()
        t.data = arr.ctypes.data
        t.device = _DLDevice(2, device)
        t.ndim = arr.ndim
        t.dtype = _DLDataType(codes[arr.dtype.kind] if code is None else code,
                              arr.itemsize * 8 if bits is None else bits, lanes)
        self.shape = (ctypes.c_int64 * arr.ndim)(*arr.shape)
        self.strides = (ctypes.c_int64 * arr.ndim)(*[s // arr.itemsize for s in arr.strides])
        t.shape = self.shape
        t.strides = self.strides if strides else None
        t.byte_offset = 0
        self.managed = _DLManaged(t, None, None)

    def __dlpack_device__(self):
        return (2, self.device)

    def __dlpack__(self, stream=None):
        self.streams.append(stream)
        return _capsule_new(ctypes.addressof(self.managed), _DLTENSOR, None)


def test_dlpack_layouts_without_gpu(ident):
    a = rand((4, 6, 3), np.uint8)
    x, y = FakeDLPackCuda(a), FakeDLPackCuda(np.zeros_like(a))
    with pytest.raises(pipefuse.UnsupportedError, match="CUDA"):  # parsed and accepted
        ident.run(x, [y], stream=0)
    assert x.streams == [1]  # DLPack's name for the legacy default stream
    with pytest.raises(pipefuse.UnsupportedError):
        ident.run(x, [y], stream=4096)
    assert x.streams[-1] == 4096
    wide = rand((4, 10, 3), np.uint8)
    with pytest.raises(pipefuse.UnsupportedError):  # rows apart, in elements
        ident.run(FakeDLPackCuda(wide[:, 2:8]), [y], stream=0)
    with pytest.raises(pipefuse.UnsupportedError):  # compact, no strides
        ident.run(FakeDLPackCuda(a, strides=False), [y], stream=0)
    for bad, exc, text in [
        (FakeDLPackCuda(wide[:, ::2]), ValueError, "packed"),
        (FakeDLPackCuda(a.astype(np.int16)), TypeError, "dtype"),
        (FakeDLPackCuda(a, lanes=2), TypeError, "dtype"),
        (FakeDLPackCuda(a.astype(np.float64)), TypeError, "dtype"),
        (FakeDLPackCuda(a, device=1), ValueError, "device 1"),
        (FakeDLPackCuda(rand((2, 4, 6, 3), np.uint8)), ValueError, "dimension"),
    ]:
        with pytest.raises(exc, match=text):
            ident.run(bad, [y], stream=0)
