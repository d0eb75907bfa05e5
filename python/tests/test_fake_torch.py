"""The PyTorch path of the extension (tensors read through data_ptr, shape, stride),
exercised where PyTorch is absent: a stand-in `torch` module whose tensors wrap NumPy
arrays, in a subprocess (the extension remembers torch.Tensor for the process). Device
frames stop at the CPU backend's refusal, before any memory is touched; CPU tensors run."""
import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent('''
    import sys, types
    import numpy as np
    torch = types.ModuleType("torch")

    class dtype:
        def __init__(self, name):
            self.name = name
        def __str__(self):
            return "torch." + self.name

    for n in ("uint8", "uint16", "float32", "int32", "float64"):
        setattr(torch, n, dtype(n))

    class Tensor:
        def __init__(self, arr, cuda=True, device=0, requires_grad=False):
            self.arr, self.is_cuda, self.requires_grad = arr, cuda, requires_grad
            self.dtype = getattr(torch, arr.dtype.name)
            self.shape = arr.shape
            self._dev = device
            self.device = types.SimpleNamespace(index=device)
        def get_device(self):
            return self._dev if self.is_cuda else -1
        def stride(self):
            return tuple(s // self.arr.itemsize for s in self.arr.strides)
        def data_ptr(self):
            return self.arr.ctypes.data
        def numpy(self):
            return self.arr

    Tensor.__module__ = "torch"
    torch.Tensor = Tensor
    torch.empty = lambda shape, dtype, device: Tensor(np.empty(shape, dtype.name))
    torch._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda index: 0)
    sys.modules["torch"] = torch

    import pipefuse
    p = pipefuse.Engine().load({"pipefuse": 1, "inputs": ["x"], "stages": [
        {"id": "l", "op": "linear", "inputs": ["x"], "params": {"a": 1.0, "b": 0.0}}],
        "outputs": {"y": "l"}}, backend="cpu")

    def expect(exc, text, *args, **kw):
        try:
            p.run(*args, **kw)
        except exc as e:
            assert text in str(e), (text, str(e))
            return
        raise AssertionError(f"no {exc.__name__} ({text})")

    a = np.arange(4 * 6 * 3, dtype=np.uint8).reshape(4, 6, 3)
    # CPU tensors: host frames, written in place.
    out = Tensor(np.zeros_like(a), cuda=False)
    p.run(Tensor(a, cuda=False), [out])
    assert np.array_equal(out.arr, a)
    # CUDA tensors: parsed, then refused by the CPU backend.
    expect(pipefuse.UnsupportedError, "CUDA", Tensor(a), [Tensor(np.zeros_like(a))])
    y = None
    expect(pipefuse.UnsupportedError, "CUDA", Tensor(a))  # outputs allocated with torch.empty
    expect(TypeError, "dtype", Tensor(a.astype(np.int32)), [Tensor(np.zeros_like(a))])
    expect(TypeError, "dtype", Tensor(a.astype(np.float64)))
    expect(ValueError, "packed", Tensor(a[:, ::2]), [Tensor(np.zeros_like(a))])
    expect(ValueError, "device 1", Tensor(a, device=1), [Tensor(np.zeros_like(a))])
    expect(ValueError, "requires grad", Tensor(a), [Tensor(np.zeros_like(a), requires_grad=True)])
    expect(TypeError, "host", Tensor(a), [np.zeros_like(a)])
    expect(TypeError, "device", Tensor(a, cuda=False), [Tensor(np.zeros_like(a))])
    expect(ValueError, "channels", Tensor(np.zeros((4, 6, 5), np.uint8)))
    print("ok")
''')


def test_torch_path_with_a_stand_in(tmp_path):
    if "torch" in sys.modules:
        pytest.skip("PyTorch itself is loaded: test_device.py covers this path")
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                       env=dict(os.environ), cwd=tmp_path, timeout=120)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr
