"""Python's habits: the pipefuse command as a console script and `python -m pipefuse`
(the C executable itself), exceptions that are the built-ins a program already catches,
engine notices through logging rather than file descriptor 2, and PNG files to and from
arrays at full bit depth, which the examples use instead of Pillow."""
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import pipefuse
from conftest import PIPELINES, ROOT, SAMPLES, cpu

rng = np.random.default_rng(7)


# ---- the command ---------------------------------------------------------------------------

def test_python_m_pipefuse_is_the_executable(tmp_path):
    exe = pipefuse._cli.executable()
    want = subprocess.run([exe, "--version"], capture_output=True, text=True)
    # (from another folder: `python -m` puts the current one first on sys.path, and
    # python/ holds the package's sources without their extension)
    got = subprocess.run([sys.executable, "-m", "pipefuse", "--version"], capture_output=True,
                         text=True, cwd=tmp_path)
    assert got.returncode == want.returncode == 0 and got.stdout == want.stdout
    bad = subprocess.run([sys.executable, "-m", "pipefuse", "check", "nonexistent.json"],
                         capture_output=True, text=True, cwd=tmp_path)
    direct = subprocess.run([exe, "check", "nonexistent.json"], capture_output=True, text=True,
                            cwd=tmp_path)
    assert bad.returncode == direct.returncode != 0 and bad.stderr == direct.stderr
    assert pipefuse.main(["check", str(PIPELINES / "demo.json")]) == 0


def test_console_script_on_path():
    """pip puts `pipefuse` beside the interpreter; a build tree (PYTHONPATH) has none."""
    script = Path(sys.executable).parent / "pipefuse"
    if not script.exists():
        pytest.skip("not installed with pip (a build tree on PYTHONPATH)")
    r = subprocess.run([str(script), "stages"], capture_output=True, text=True)
    assert r.returncode == 0 and "gaussian" in r.stdout
    assert shutil.which("pipefuse", path=str(script.parent)) == str(script)


# ---- exceptions ------------------------------------------------------------------------------

@pytest.mark.parametrize("name,builtin", [
    ("InvalidArgumentError", ValueError), ("ParseError", ValueError),
    ("PipelineError", ValueError), ("ParamError", ValueError), ("ImageError", ValueError),
    ("TooLargeError", ValueError), ("ShapeError", ValueError), ("IoError", OSError),
    ("NoMemoryError", MemoryError), ("NotReadyError", TimeoutError),
    ("UnsupportedError", NotImplementedError), ("BusyError", RuntimeError),
    ("CancelledError", RuntimeError), ("StageError", RuntimeError),
    ("ClosedError", RuntimeError), ("UnknownParamError", KeyError),
    ("UnknownParamError", ValueError), ("UnknownOptionError", KeyError),
])
def test_error_classes_are_builtins_too(name, builtin):
    cls = getattr(pipefuse, name)
    assert issubclass(cls, pipefuse.Error) and issubclass(cls, builtin)


def test_errors_raised_are_the_builtins(engine, tmp_path):
    with pytest.raises(OSError) as ei:
        engine.load(tmp_path / "missing.json")
    assert isinstance(ei.value, pipefuse.IoError) and ei.value.status_name == "PF_IO"
    (tmp_path / "bad.json").write_text("{\"pipefuse\": 1,\n \"stages\": [}\n")
    with pytest.raises(ValueError):
        engine.load(tmp_path / "bad.json")
    p = cpu(engine, PIPELINES / "demo.json")
    with pytest.raises(KeyError) as ei:
        p.set("glw.sigma", 1.0)
    assert isinstance(ei.value, pipefuse.ParamError) and "did you mean 'glow'" in str(ei.value)
    assert not str(ei.value).startswith('"')  # the message, not KeyError's repr of it
    with pytest.raises(KeyError):
        p.set("glow.sigmaa", 1.0)
    with pytest.raises(KeyError):
        p.set_json("glow.sigmaa", "1.0")
    with pytest.raises(ValueError) as ei:
        p.set("glow.sigma", -5.0)
    assert not isinstance(ei.value, KeyError)
    with pytest.raises(KeyError, match="backend"):
        p.configure(bakend="cpu")
    with pytest.raises(KeyError, match="unknown"):
        engine.load(PIPELINES / "demo.json", bakend="cpu")
    with pytest.raises(KeyError):
        engine.stage("no_such_stage")
    t = p.submit(np.zeros((8, 8, 3), np.uint8))
    p.close()
    with pytest.raises(pipefuse.ClosedError, match="closed"):
        p.run(np.zeros((8, 8, 3), np.uint8))
    with pytest.raises(RuntimeError):
        p.set("glow.sigma", 1.0)
    assert "result" in p.wait(t)  # a complete ticket, after close too


# ---- fork ------------------------------------------------------------------------------------

@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork()")
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # fork() of a threaded process
def test_a_forked_child_refuses_the_parents_engine_and_makes_its_own(engine):
    p = cpu(engine, PIPELINES / "demo.json")
    x = np.zeros((16, 16, 3), np.uint8)
    p.run(x)  # the engine's threads and the pipeline's runner are going
    pid = os.fork()
    if pid == 0:  # the child: exit codes say what went wrong
        code = 0
        try:
            try:
                p.run(x)
                code = 1
            except RuntimeError as e:
                code = 0 if "before fork()" in str(e) else 2
            try:
                engine.load(PIPELINES / "demo.json")
                code = code or 3
            except RuntimeError:
                pass
            q = pipefuse.Engine(threads=2).load(PIPELINES / "demo.json", backend="cpu")
            if q.run(x)["result"].shape != x.shape:
                code = code or 4
            del p, q  # the parent's is left unfreed, the child's freed
        except BaseException:
            code = code or 5
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert p.run(x)["result"].shape == x.shape  # the parent's goes on


# ---- notices ---------------------------------------------------------------------------------

UNUSED = ('{"pipefuse": 1, "inputs": ["in"], "stages": ['
          '{"id": "a", "op": "invert", "inputs": ["in"]},'
          '{"id": "unused", "op": "invert", "inputs": ["in"]}], "outputs": {"out": "a"}}')


def test_notices_go_through_logging_not_fd2(caplog, capfd):
    engine = pipefuse.Engine()
    with caplog.at_level(logging.INFO, logger="pipefuse"):
        engine.load(UNUSED)
    recs = [r for r in caplog.records if r.name == "pipefuse"]
    assert recs and recs[0].levelno == logging.WARNING and "'unused'" in recs[0].getMessage()
    err = capfd.readouterr().err
    assert "unused" not in err  # nothing written to file descriptor 2 behind logging


def test_a_log_callable_still_takes_them():
    got = []
    pipefuse.Engine(log=lambda level, msg: got.append((level, msg))).load(UNUSED)
    assert got and got[0][0] == 1 and "'unused'" in got[0][1]


# ---- PNG files -------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
@pytest.mark.parametrize("channels", [0, 1, 2, 3, 4])
def test_png_round_trip_at_full_depth(tmp_path, dtype, channels):
    shape = (21, 34) if channels == 0 else (21, 34, channels)
    a = rng.integers(0, np.iinfo(dtype).max + 1, shape, dtype=dtype)
    path = tmp_path / "x.png"
    pipefuse.write_png(path, a)
    b = pipefuse.read_png(path)
    assert b.dtype == np.dtype(dtype)
    assert np.array_equal(b, a.reshape(21, 34) if channels in (0, 1) else a)
    pipefuse.write_png(str(path), a[::-1, ::-1], level=9)  # a view, a str path
    assert np.array_equal(pipefuse.read_png(os.fsencode(path)),
                          (a[::-1, ::-1]).reshape(b.shape))


def test_png_reads_what_pillow_reads():
    Image = pytest.importorskip("PIL.Image")
    for f in sorted(SAMPLES.glob("*.png")):
        a = pipefuse.read_png(f)
        assert np.array_equal(a, np.asarray(Image.open(f))), f.name


def test_png_errors(tmp_path):
    with pytest.raises(OSError):
        pipefuse.read_png(tmp_path / "missing.png")
    (tmp_path / "junk.png").write_bytes(b"not a png at all")
    with pytest.raises(pipefuse.ImageError, match="junk.png"):
        pipefuse.read_png(tmp_path / "junk.png")
    with pytest.raises(TypeError, match="uint8 or uint16"):
        pipefuse.write_png(tmp_path / "f.png", np.zeros((4, 4), np.float32))
    with pytest.raises(ValueError, match="channels"):
        pipefuse.write_png(tmp_path / "f.png", np.zeros((4, 4, 5), np.uint8))
    with pytest.raises(OSError):
        pipefuse.write_png(tmp_path / "no" / "dir.png", np.zeros((4, 4), np.uint8))
    big = tmp_path / "big.png"
    pipefuse.write_png(big, np.zeros((64, 64), np.uint8))
    with pytest.raises(pipefuse.TooLargeError):
        pipefuse.read_png(big, max_pixels=100)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporaries


@pytest.mark.skipif(not pipefuse.jpeg_available(), reason="built without libjpeg")
def test_jpeg_files(tmp_path):
    photo = pipefuse.read_png(SAMPLES / "astronaut.png")
    path = tmp_path / "a.jpg"
    pipefuse.write_jpeg(path, photo[::-1, :, ::-1], quality=95, subsampling="4:4:4")
    back = pipefuse.read_jpeg(path)
    assert back.dtype == np.uint8 and back.shape == photo.shape
    assert np.abs(back.astype(int) - photo[::-1, :, ::-1]).mean() < 4  # lossy, but close
    gray = pipefuse.read_png(SAMPLES / "camera.png")
    pipefuse.write_jpeg(path, gray.astype(np.uint16) * 257, progressive=True)
    assert pipefuse.read_jpeg(path).shape == gray.shape  # gray stays gray
    with pytest.raises(pipefuse.ImageError, match="PNG"):
        pipefuse.read_jpeg(SAMPLES / "camera.png")
    with pytest.raises(OSError):
        pipefuse.read_jpeg(tmp_path / "missing.jpg")
    with pytest.raises(ValueError, match="subsampling"):
        pipefuse.write_jpeg(path, gray, subsampling="4:1:1")
    with pytest.raises(TypeError):
        pipefuse.write_jpeg(path, gray.astype(np.float64))


def test_batch_example_keeps_16_bit(tmp_path):
    src, out = tmp_path / "in", tmp_path / "out"
    src.mkdir()
    a = rng.integers(0, 65536, (16, 24, 3), dtype=np.uint16)
    pipefuse.write_png(src / "deep.png", a)
    pipe = tmp_path / "inv.json"
    pipe.write_text('{"pipefuse": 1, "inputs": ["in"], "stages": [{"id": "i", "op": "invert", '
                    '"inputs": ["in"]}], "outputs": {"out": "i"}}')
    r = subprocess.run([sys.executable, str(ROOT / "python" / "examples" / "batch.py"),
                        str(pipe), str(src), "-o", str(out), "--backend", "cpu"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    b = pipefuse.read_png(out / "deep.png")
    assert b.dtype == np.uint16 and np.array_equal(b, 65535 - a)
    assert "PIL" not in (ROOT / "python" / "examples" / "batch.py").read_text()
