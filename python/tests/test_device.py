"""Device frames on the GPU machine: PyTorch and CuPy arrays read and written in place
on the caller's stream, checked against the CPU path. Skipped without a CUDA device
(and each framework's tests without that framework)."""
import numpy as np
import pytest

import pipefuse
from conftest import PIPELINES

POINT = {"pipefuse": 1, "inputs": ["x"], "stages": [
    {"id": "b", "op": "brightness", "inputs": ["x"], "params": {"amount": 0.05}},
    {"id": "c", "op": "contrast", "inputs": ["b"], "params": {"amount": 1.2}}],
    "outputs": {"y": "c"}}


def torch_cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device for PyTorch")
    return torch


def cuda_pipeline(engine, source, **options):
    p = engine.load(source, backend="cuda", **options)
    try:
        p.plan((8, 8))
    except pipefuse.NoDeviceError as e:
        pytest.skip(f"pipefuse has no CUDA device: {e}")
    return p


def frame(torch, h=270, w=480, c=4, dtype=None, seed=0):
    g = torch.Generator(device="cpu").manual_seed(seed)
    dtype = dtype or torch.uint8
    if dtype == torch.float32:
        return torch.rand((h, w, c), generator=g).cuda()
    return torch.randint(0, 256, (h, w, c), dtype=torch.uint8, generator=g).cuda()


def close(a, b, dtype):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    tol = 1.0 if dtype == np.uint8 else 2e-6
    return np.abs(a - b).max() <= tol


def hist_close(a, b, pixels):
    """GPU and CPU float rounding may put a value at a bin edge into the next bin: the
    same count per channel, and few pixels moved."""
    for c in ("r", "g", "b", "a"):
        assert a[c].sum() == b[c].sum() == pixels
        assert np.abs(a[c] - b[c]).sum() <= max(4, pixels // 500), c


@pytest.fixture(scope="module")
def cpu_ref(engine):
    return engine.load(PIPELINES / "demo.json", backend="cpu")


def test_torch_zero_copy_against_cpu(engine, cpu_ref):
    torch = torch_cuda()
    p = cuda_pipeline(engine, PIPELINES / "demo.json")
    x = frame(torch)
    y = torch.empty_like(x)
    ptr = y.data_ptr()
    r = p.run(x, {"result": y})
    assert r["result"] is y and y.data_ptr() == ptr  # written in place
    torch.cuda.current_stream().synchronize()
    want = cpu_ref.run(x.cpu().numpy())
    assert close(y.cpu().numpy(), want["result"], np.uint8)
    hist_close(r["histogram"], want["histogram"], 270 * 480)


def test_torch_new_outputs(engine):
    torch = torch_cuda()
    p = cuda_pipeline(engine, POINT)
    for dtype in (torch.uint8, torch.float32):
        x = frame(torch, dtype=dtype)
        y = p.run(x)["y"]
        assert y.is_cuda and y.dtype == dtype and y.shape == x.shape
        ref = engine.load(POINT, backend="cpu").run(x.cpu().numpy())["y"]
        torch.cuda.synchronize()
        assert close(y.cpu().numpy(), ref, np.uint8 if dtype == torch.uint8 else np.float32)


def test_torch_caller_stream_and_strided_rows(engine):
    torch = torch_cuda()
    p = cuda_pipeline(engine, POINT)
    s = torch.cuda.Stream()
    wide = frame(torch, w=640)
    with torch.cuda.stream(s):
        x = wide[:, 100:580]                 # rows 640 pixels apart
        y = torch.zeros((270, 480, 4), dtype=torch.uint8, device="cuda")
        t = p.submit(x, [y], stream=s)       # a torch.cuda.Stream
    s.synchronize()
    ref = engine.load(POINT, backend="cpu").run(x.cpu().numpy())["y"]
    assert close(y.cpu().numpy(), ref, np.uint8)
    p.wait(t)


def test_torch_frames_in_flight(engine):
    torch = torch_cuda()
    p = cuda_pipeline(engine, POINT, slots=3)
    s = torch.cuda.current_stream().cuda_stream
    xs = [frame(torch, seed=i) for i in range(8)]
    ys = [torch.empty_like(x) for x in xs]
    tickets = [p.submit([x], [y], stream=s) for x, y in zip(xs, ys)]  # never waited
    assert len(p._c.inflight) <= p.slots  # older frames retired with their slots
    torch.cuda.synchronize()
    cpu = engine.load(POINT, backend="cpu")
    for x, y in zip(xs, ys):
        assert close(y.cpu().numpy(), cpu.run(x.cpu().numpy())["y"], np.uint8)
    for t in tickets:
        p.wait(t)
        assert t.done


def test_torch_errors(engine):
    torch = torch_cuda()
    p = cuda_pipeline(engine, POINT)
    x = frame(torch)
    with pytest.raises(TypeError, match="dtype"):
        p.run(x.to(torch.int32))
    with pytest.raises(TypeError, match="dtype"):
        p.run(x.to(torch.float64))
    with pytest.raises(ValueError, match="packed"):
        p.run(x[:, ::2])
    with pytest.raises(ValueError, match="adjacent"):
        p.run(x.permute(2, 0, 1).contiguous().permute(1, 2, 0))
    with pytest.raises(TypeError, match="host .* device|device .* host"):
        p.run(x, [torch.empty((270, 480, 4), dtype=torch.uint8)])
    with pytest.raises(ValueError, match="requires grad"):
        p.run(x.float() / 255, [torch.empty((270, 480, 4), device="cuda", requires_grad=True)])
    with pytest.raises(pipefuse.ShapeError):
        p.run(x, [torch.empty((10, 10, 4), dtype=torch.uint8, device="cuda")])
    cpu = engine.load(POINT, backend="cpu")
    with pytest.raises(pipefuse.UnsupportedError, match="CUDA"):
        cpu.run(x)
    assert p.run(x)["y"].shape == x.shape  # still usable


def test_device_memory_kept_alive(engine):
    torch = torch_cuda()
    p = cuda_pipeline(engine, POINT)
    t = p.submit(frame(torch, h=1080, w=1920))  # input and new output referenced only by t
    import gc
    gc.collect()
    y = p.wait(t)["y"]
    torch.cuda.synchronize()
    assert y.shape == (1080, 1920, 4)


def cupy_cuda():
    cupy = pytest.importorskip("cupy")
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no CUDA device for CuPy")
    except cupy.cuda.runtime.CUDARuntimeError:
        pytest.skip("no CUDA device for CuPy")
    return cupy


class CaiOnly:
    """Only __cuda_array_interface__ (as Numba's arrays): the CAI path."""

    def __init__(self, a):
        self.a = a
        self.__cuda_array_interface__ = a.__cuda_array_interface__


def test_cupy_dlpack_and_cai(engine):
    cupy = cupy_cuda()
    p = cuda_pipeline(engine, POINT)
    rng = np.random.default_rng(3)
    host = rng.integers(0, 256, (200, 300, 3), dtype=np.uint8)
    x = cupy.asarray(host)
    ref = engine.load(POINT, backend="cpu").run(host)["y"]
    y = p.run(x)["y"]                          # DLPack in, CuPy array allocated
    assert isinstance(y, cupy.ndarray)
    assert close(cupy.asnumpy(y), ref, np.uint8)
    z = cupy.zeros_like(x)
    stream = cupy.cuda.get_current_stream()
    p.run(CaiOnly(x), [CaiOnly(z)], stream=stream.ptr)
    stream.synchronize()
    assert close(cupy.asnumpy(z), ref, np.uint8)
    with pytest.raises(TypeError, match="dtype"):
        p.run(x.astype(cupy.int16))


def test_cupy_against_torch(engine):
    torch = torch_cuda()
    cupy = cupy_cuda()
    p = cuda_pipeline(engine, POINT)
    x = frame(torch)
    a = p.run(x)["y"]
    b = p.run(cupy.asarray(x))["y"]
    torch.cuda.synchronize()
    assert np.array_equal(a.cpu().numpy(), cupy.asnumpy(b))


def test_host_frames_on_cuda(engine):
    p = cuda_pipeline(engine, PIPELINES / "demo.json")
    cpu = engine.load(PIPELINES / "demo.json", backend="cpu")
    rng = np.random.default_rng(5)
    x = rng.integers(0, 256, (300, 400, 3), dtype=np.uint8)
    t = p.submit(x)
    while not p.poll(t):
        pass
    got, want = p.wait(t), cpu.run(x)
    assert close(got["result"], want["result"], np.uint8)
    hist_close(got["histogram"], want["histogram"], 300 * 400)
    pinned = engine.empty_pinned((300, 400, 3), np.uint8)
    pinned[:] = x
    out = engine.empty_pinned((300, 400, 3), np.uint8)
    p.run(pinned, {"result": out})
    assert close(out, want["result"], np.uint8)
    # A new size plans again: a host frame still in flight is reported, not lost silently.
    t1 = p.submit(x)
    t2 = p.submit(np.zeros((20, 30, 3), np.uint8))
    with pytest.raises(pipefuse.NotPlannedError):
        p.wait(t1)
    assert p.wait(t2)["result"].shape == (20, 30, 3)
