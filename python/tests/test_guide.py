"""docs/python.md is a reference that works as written: every ```python block runs as a
program of its own (from a folder where pipelines/ and samples/ are the repository's), and
every public name of the package is described there."""
import os
import re
import subprocess
import sys

import pytest

import pipefuse
from conftest import ROOT

GUIDE = ROOT / "docs" / "python.md"


def _blocks():
    text = GUIDE.read_text()
    out = []
    for m in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M):
        line = text.count("\n", 0, m.start()) + 1
        out.append(pytest.param(m.group(1), id=f"line{line}"))
    return out


def _has_cuda_torch():
    try:
        import torch
    except ImportError:
        return False
    if not torch.cuda.is_available():
        return False
    try:
        pipefuse.Engine().load(ROOT / "pipelines" / "demo.json", backend="cuda").plan((8, 8))
    except pipefuse.Error:
        return False
    return True


def test_the_guide_has_snippets():
    assert len(_blocks()) >= 10


@pytest.mark.parametrize("code", _blocks())
def test_snippet_runs(code, tmp_path):
    first = code.splitlines()[0]
    if first.startswith("# needs:") and not _has_cuda_torch():
        pytest.skip(f"{first[2:]} (PyTorch with a CUDA device, pipefuse built with CUDA)")
    for d in ("pipelines", "samples"):
        (tmp_path / d).symlink_to(ROOT / d)
    script = tmp_path / "snippet.py"
    script.write_text(code)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(os.path.dirname(os.path.dirname(pipefuse.__file__)))] +
        ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    r = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    assert "Traceback" not in r.stderr


def test_every_public_name_is_in_the_guide():
    text = GUIDE.read_text()
    missing = [n for n in pipefuse.__all__ if f"`{n}" not in text and f"{n}(" not in text
               and f".{n}" not in text]
    assert not missing, f"docs/python.md does not describe {missing}"
    for cls, names in ((pipefuse.Pipeline, ("set", "set_json", "configure", "plan", "run",
                                            "submit", "wait", "poll", "cancel", "stats",
                                            "units", "plan_text", "dot_text", "build_kernels",
                                            "close", "inputs", "outputs", "slots")),
                       (pipefuse.Engine, ("stages", "stage", "load", "info", "empty_pinned"))):
        for n in names:
            assert hasattr(cls, n)
            assert f"{n}(" in text or f"`{n}`" in text or f" {n} (" in text, n
