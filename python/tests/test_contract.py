"""The binding keeps docs/python.md's promises where they are easy to break: objects the
cycle collector can free, every input the extension takes yielding its outputs, one
thread (and no re-entry) per pipeline, no leaked references on errors, NumPy numbers as
numbers, the documented exception types, tickets tied to their pipeline, the examples
that the guide and python/examples/ show."""
import gc
import importlib.util
import json
import math
import os
import re
import sys
import threading
import weakref

import numpy as np
import pytest

import pipefuse
from conftest import PIPELINES, ROOT, cpu

POINT = {"pipefuse": 1, "inputs": ["x"],
         "stages": [{"id": "lin", "op": "linear", "inputs": ["x"], "params": {"a": 1.0, "b": 0.0}}],
         "outputs": {"y": "lin"}}
TABLE = {"pipefuse": 1, "inputs": ["x"],
         "stages": [{"id": "m", "op": "color_matrix", "inputs": ["x"]},
                    {"id": "s", "op": "stats", "inputs": ["m"]}],
         "outputs": {"o": "m", "st": "s"}}


class ArrayInterface:
    """An image through __array_interface__ only: no .shape, no buffer."""

    def __init__(self, a, on_read=None):
        self.a, self.on_read = a, on_read

    @property
    def __array_interface__(self):
        if self.on_read:
            self.on_read()
        return self.a.__array_interface__


# ---- 1: the cycle collector frees engines and pipelines -----------------------------------

def test_engine_whose_log_refers_to_its_owner_is_collected():
    class App:
        def __init__(self):
            self.engine = pipefuse.Engine(log=self.on_log)
            self.p = self.engine.load(POINT, backend="cpu")
            self.t = self.p.submit(np.zeros((8, 8), np.uint8))
            self.p.wait(self.t)
            # A HostBuffer holds the engine. (Not through NumPy: an ndarray does not
            # show the collector its base, so a cycle through one is out of reach.)
            self.pinned = self.engine._c.alloc_host(4, 4, 0, 1)

        def on_log(self, level, msg):
            pass

    refs = []
    for _ in range(3):
        app = App()
        refs.append(weakref.ref(app))
        assert gc.is_tracked(app.engine._c) and gc.is_tracked(app.p._c)
        assert gc.is_tracked(app.t) and gc.is_tracked(app.pinned)
        del app
    gc.collect()
    assert all(r() is None for r in refs)


def test_pipeline_with_a_ticket_cycle_is_collected(engine):
    class Owned(np.ndarray):  # an output array that refers to its owner
        pass

    class Holder:
        pass

    h = Holder()
    h.p = cpu(engine, POINT)
    out = np.empty((4, 4), np.uint8).view(Owned)
    out.owner = h  # h -> ticket -> its outputs -> out -> h
    h.t = h.p.submit(np.zeros((4, 4), np.uint8), [out])
    r = weakref.ref(h)
    del h, out
    gc.collect()
    assert r() is None


# ---- 2: every input the extension takes yields the documented outputs ---------------------

def test_inputs_without_shape_get_their_image_outputs(engine):
    p = cpu(engine, PIPELINES / "demo.json")
    img = np.random.default_rng(1).integers(0, 256, (16, 20, 3), dtype=np.uint8)
    ref = p.run(img)["result"]

    class ArrayOnly:  # __array__ only
        def __array__(self, dtype=None, copy=None):
            return img

    for x in (ArrayInterface(img), memoryview(img), ArrayOnly()):
        out = p.run(x)
        assert sorted(out) == ["histogram", "result"], type(x).__name__
        assert np.array_equal(out["result"], ref)
    out = p.run({"photo": ArrayInterface(img)}, {"histogram": None})
    assert np.array_equal(out["result"], ref)


# ---- 3, 10: one caller at a time, with the documented error ---------------------------------

def test_second_thread_gets_runtime_error_while_inputs_convert(engine):
    """The second caller arrives while the first is still converting its input (Python
    code runs there and lets other threads in), before the engine is called."""
    p = cpu(engine, PIPELINES / "demo.json")
    img = np.zeros((12, 10, 3), np.uint8)
    inside, go = threading.Event(), threading.Event()

    def block():
        if not inside.is_set():
            inside.set()
            go.wait(10)

    result = {}

    def first():
        try:
            result["out"] = p.run(ArrayInterface(img, block), [np.empty_like(img), None])
        except Exception as e:  # pragma: no cover - reported below
            result["error"] = e

    th = threading.Thread(target=first)
    th.start()
    try:
        assert inside.wait(10)
        for call in (lambda: p.run(img), lambda: p.stats(), lambda: p.set("glow.sigma", 2.0),
                     lambda: p.plan((4, 4)), lambda: p.plan_text(), lambda: p.close()):
            with pytest.raises(RuntimeError, match="another thread") as ei:
                call()
            assert isinstance(ei.value, pipefuse.BusyError)
            assert ei.value.status_name == "PF_BUSY"
    finally:
        go.set()
        th.join()
    assert "error" not in result and "result" in result["out"]
    assert p.stats()["frames"] == 1  # only the first caller's frame ran


def test_reentry_from_a_log_callback_says_so(tmp_path):
    seen = []
    holder = {}

    def log(level, msg):
        try:
            holder["p"].stats()
        except Exception as e:
            seen.append(e)

    e = pipefuse.Engine(log=log)
    # The CPU backend notes on the first frame that dump_kernels writes nothing.
    p = e.load(POINT, backend="cpu", dump_kernels=str(tmp_path))
    holder["p"] = p
    p.run(np.zeros((4, 4), np.uint8))
    assert seen, "the engine logged nothing during the frame"
    assert all(isinstance(x, pipefuse.BusyError) for x in seen)
    assert "inside one of its own calls" in str(seen[0])
    assert "another thread" not in str(seen[0])
    assert p.stats()["frames"] == 1
    holder.clear()


def test_reentry_from_an_input_on_the_same_thread(engine):
    p = cpu(engine, PIPELINES / "demo.json")
    seen = []

    def reenter():
        try:
            p.stats()
        except RuntimeError as e:
            seen.append(e)

    p.run(ArrayInterface(np.zeros((4, 4, 3), np.uint8), reenter), [None, None])
    assert seen and "inside one of its own calls" in str(seen[0])


# ---- 4: no references leaked on error paths -------------------------------------------------

def test_rejected_inputs_leak_no_references(engine):
    p = cpu(engine, PIPELINES / "demo.json")
    for bad in ("some-input-string", b"some-bytes", [[1, 2], [3, 4]], [[[1, 2, 3]]],
                np.zeros((4, 4), np.float64)):
        before = sys.getrefcount(bad)
        for _ in range(50):
            with pytest.raises((TypeError, ValueError)):
                p.run(bad)
            with pytest.raises((TypeError, ValueError)):
                p.submit([bad], [None, None])
        assert sys.getrefcount(bad) == before, repr(bad)[:40]


# ---- 5: NumPy numbers are numbers ----------------------------------------------------------

def test_numpy_scalars_and_arrays_as_values_and_shapes(engine):
    p = cpu(engine, TABLE)
    img = np.random.default_rng(2).integers(0, 256, (6, 7, 3), dtype=np.uint8)
    swap = [0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1]
    for value in (np.array(swap, np.float32), [np.float32(v) for v in swap],
                  tuple(np.int64(v) for v in swap), np.array(swap, np.int64)):
        p.set("m.matrix", value)
        out = p.run(img)["o"]
        assert np.array_equal(out[..., :2], img[..., [1, 0]])
    d = cpu(engine, PIPELINES / "demo.json")
    d.set("glow.sigma", np.float32(2.5))
    d.set("glow.sigma", np.int64(3))
    d.set("glow.sigma", np.array(1.5))  # a 0-d array is a number
    d.plan((np.int64(100), np.int64(120)))
    assert "120x100" in d.plan_text()
    d.plan([(np.int32(30), np.int32(40), np.int64(3))])
    assert "40x30" in d.plan_text()
    d.configure(threads=np.int64(2), fusion=np.bool_(False))


# ---- 7, 8, 9: error types as the guide lists them ------------------------------------------

def test_wrong_output_shape_is_a_value_error_naming_it(engine):
    p = cpu(engine, POINT)
    x = np.zeros((4, 6), np.uint8)
    with pytest.raises(ValueError, match="output 'y'") as ei:
        p.run(x, [np.zeros((4, 4), np.uint8)])
    assert isinstance(ei.value, pipefuse.ShapeError)
    assert issubclass(pipefuse.ShapeError, pipefuse.Error)
    assert issubclass(pipefuse.BusyError, RuntimeError)


def test_read_only_outputs_are_value_errors_on_every_path(engine):
    p = cpu(engine, POINT)
    x = np.zeros((4, 6), np.uint8)
    ro = np.zeros((4, 6), np.uint8)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="output 'y': the array is read-only"):
        p.run(x, [ro])
    with pytest.raises(ValueError, match="output 'y': the array is read-only"):
        p.run(x, {"y": ro})

    class FakeCuda:  # the __cuda_array_interface__ path, refused before any device use
        def __init__(self, arr, readonly):
            self.__cuda_array_interface__ = {
                "shape": arr.shape, "typestr": arr.dtype.str, "data": (arr.ctypes.data, readonly),
                "strides": None, "version": 3, "stream": None}

    with pytest.raises(ValueError, match="output 'y': the array is read-only"):
        p._c.submit([FakeCuda(x, False)], [FakeCuda(x, True)], 0)


def test_table_outputs_are_not_given_in_either_form(engine):
    p = cpu(engine, TABLE)
    img = np.zeros((4, 5, 3), np.uint8)
    with pytest.raises(ValueError, match="output 'st' is a table"):
        p.run(img, [None, np.empty((4, 4))])
    with pytest.raises(ValueError, match="output 'st' is a table"):
        p.run(img, {"st": np.empty((4, 4))})
    out = p.run(img, {"st": None})  # None for a table is fine: it is returned anyway
    assert "st" in out and "o" in out


# ---- 11: timeouts ------------------------------------------------------------------------

def test_wait_accepts_any_non_negative_timeout(engine):
    p = cpu(engine, PIPELINES / "demo.json")
    x = np.zeros((4, 4, 3), np.uint8)
    for timeout in (0, 0.0004, 2.5, 1e9, 1e300, math.inf, np.float32(1)):
        t = p.submit(x)
        try:
            out = p.wait(t, timeout=timeout)
        except pipefuse.NotReadyError:  # a CPU frame runs on the engine's threads
            assert timeout < 1
            out = p.wait(t)
        assert "result" in out
    t = p.submit(x)
    p._c.wait(t, 1e15)
    for bad in (-1, -1e-9, math.nan):
        with pytest.raises(ValueError, match="timeout"):
            p.wait(t, timeout=bad)
        with pytest.raises(ValueError, match="timeout"):
            p._c.wait(t, bad)


# ---- 12: the guide's error example works as printed ------------------------------------------

def _errors_example():
    text = (ROOT / "docs" / "python.md").read_text()
    section = text.split("## Errors", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_docs_error_example_catches_what_load_raises(engine, tmp_path, monkeypatch, capsys):
    code = _errors_example()
    assert 'engine.load("x.json")' in code
    monkeypatch.chdir(tmp_path)
    exec(code, {"pipefuse": pipefuse, "engine": engine})  # x.json missing: IoError
    assert "PF_IO" in capsys.readouterr().out
    (tmp_path / "x.json").write_text('{"pipefuse": 1,\n "stages": [}\n')
    exec(code, {"pipefuse": pipefuse, "engine": engine})  # malformed: ParseError
    assert "PF_PARSE" in capsys.readouterr().out


# ---- 13: plan_text and dot_text as `pipefuse check` prints them ---------------------------------

def test_plan_text_before_planning_plans_like_check(engine):
    p = cpu(engine, PIPELINES / "demo.json")
    assert "1920x1080" in p.plan_text()
    q = cpu(engine, PIPELINES / "demo.json")
    assert q.dot_text().lstrip().startswith("digraph")
    assert "64x48" in q.plan_text((48, 64))
    q.run(np.zeros((10, 12, 3), np.uint8))
    assert "12x10" in q.plan_text()  # the current plan, not the default


# ---- 14: tickets belong to their pipeline, and outlive close -------------------------------

def test_complete_tickets_wait_again_after_close(engine):
    p = cpu(engine, PIPELINES / "demo.json")
    t = p.submit(np.full((6, 5, 3), 7, np.uint8))
    first = p.wait(t)
    p.close()
    again = p.wait(t)
    assert again.keys() == first.keys() and again["result"] is first["result"]
    assert p.poll(t) is True
    with pytest.raises(RuntimeError, match="closed"):
        p.submit(np.zeros((6, 5, 3), np.uint8))
    other = cpu(engine, POINT)
    with pytest.raises(ValueError, match="another pipeline"):
        other.wait(t)


# ---- 15: nested lists are not images -------------------------------------------------------

def test_nested_lists_say_what_to_do(engine):
    p = cpu(engine, POINT)
    with pytest.raises(ValueError, match=r"1 input\(s\); 2 given.*one array per input.*np\.asarray"):
        p.run([[0, 1], [2, 3]])
    with pytest.raises(TypeError, match=r"input 'x'.*np\.asarray"):
        p.run([[[0, 1], [2, 3]]])
    two = cpu(engine, {"pipefuse": 1, "inputs": ["a", "b"],
                       "stages": [{"id": "m", "op": "blend", "inputs": ["a", "b"]}],
                       "outputs": {"y": "m"}})
    with pytest.raises(ValueError, match=r"2 input\(s\); 1 given"):
        two.run([np.zeros((2, 2), np.uint8)])


# ---- 6: the batch example -------------------------------------------------------------------

def _load_batch():
    spec = importlib.util.spec_from_file_location("pf_batch_example",
                                                  ROOT / "python" / "examples" / "batch.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_batch_example_writes_16_bit_and_survives_a_bad_write(tmp_path, monkeypatch):
    Image = pytest.importorskip("PIL.Image")
    batch = _load_batch()
    src = tmp_path / "in"
    src.mkdir()
    gray16 = (np.arange(12 * 10, dtype=np.uint16).reshape(10, 12) * 500).astype(np.uint16)
    Image.fromarray(gray16).save(src / "a16.png")
    rgb = np.random.default_rng(3).integers(0, 256, (9, 11, 3), dtype=np.uint8)
    Image.fromarray(rgb).save(src / "b8.png")
    pipe = tmp_path / "ident.json"
    pipe.write_text(json.dumps(POINT))
    out = tmp_path / "out"
    assert batch.main([str(pipe), str(src), "-o", str(out), "--backend", "cpu",
                       "--workers", "2"]) == 0
    back = np.asarray(Image.open(out / "a16.png"))
    assert back.dtype == np.uint16 and np.array_equal(back, gray16)
    assert np.array_equal(np.asarray(Image.open(out / "b8.png")), rgb)

    real = batch.encode_image

    def flaky(a, path):
        if path.name.startswith("a16"):
            raise ValueError("cannot encode this one")
        real(a, path)

    monkeypatch.setattr(batch, "encode_image", flaky)
    out2 = tmp_path / "out2"
    assert batch.main([str(pipe), str(src), "-o", str(out2), "--backend", "cpu"]) == 1
    assert (out2 / "b8.png").exists() and not (out2 / "a16.png").exists()


# ---- 15: the binding used as Python users use it (audit, second round) --------------------

def test_outputs_of_another_kind_are_a_type_error_not_ignored(engine):
    # One array where a list or dict belongs was dropped: a new array came back and the
    # caller's stayed unwritten.
    p = cpu(engine, POINT)
    x = np.full((4, 6, 3), 9, np.uint8)
    out = np.zeros_like(x)
    for bad in (out, "y", 5, iter([out])):
        with pytest.raises(TypeError, match=r"outputs must be None, a dict .* or a list.*\[array\]"):
            p.run(x, bad)
    assert not out.any()
    assert p.run(x, [out])["y"] is out and (out == 9).all()
    assert p.run(x, {"y": out})["y"] is out


def test_loading_from_a_log_callback_of_a_load_works_not_a_deadlock(tmp_path):
    # Loads take turns under a lock the library holds while it logs: a log callback that
    # loaded again waited for itself for ever. Run apart, so a regression cannot hang
    # the suite.
    code = f"""
import json, pipefuse
point = json.loads({json.dumps(json.dumps(POINT))})
unused = dict(point, inputs=["x", "z"])  # loading warns: input 'z' is unused
got = []
def log(level, msg):
    try:
        engine.load(point, backend="cpu")
        got.append("loaded")
    except pipefuse.BusyError as e:
        got.append("busy: " + str(e))
engine = pipefuse.Engine(log=log)
engine.load(unused, backend="cpu")
print(got)
engine.load(point, backend="cpu").close()  # loads after the callback as ever
print("done")
"""
    import subprocess
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ), cwd=tmp_path, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "['loaded']" in r.stdout
    assert r.stdout.rstrip().endswith("done")


def test_pipelines_are_not_copied_but_can_be_weakly_referenced(engine):
    import copy
    import pickle
    p = cpu(engine, POINT)
    for make in (copy.copy, copy.deepcopy, pickle.dumps):
        with pytest.raises(TypeError, match="load the pipeline again"):
            make(p)  # copy.copy made a second handle on the same C pipeline
    x = np.zeros((2, 2), np.uint8)
    assert p.run(x)["y"].shape == (2, 2)
    ref = weakref.ref(p)
    assert ref() is p
    del p
    gc.collect()
    assert ref() is None


def test_dict_pipelines_take_numpy_values_as_set_does(engine):
    source = {"pipefuse": np.int64(1), "inputs": ["x"],
              "stages": [{"id": "lin", "op": "linear", "inputs": ["x"],
                          "params": {"a": np.float32(0.5), "b": np.array(0.25)}},
                         {"id": "m", "op": "color_matrix", "inputs": ["lin"],
                          "params": {"matrix": np.eye(4).ravel(),
                                     "offset": np.zeros(4, np.float32)}}],
              "outputs": {"y": "m"}}
    p = cpu(engine, source)
    y = p.run(np.zeros((2, 3), np.float32))["y"]
    assert np.allclose(y, 0.25)
    with pytest.raises(TypeError, match="not JSON serializable"):
        engine.load(dict(source, inputs={"x"}))


def test_pillow_images_whose_samples_are_not_gray_or_rgb_are_refused(engine):
    Image = pytest.importorskip("PIL.Image")
    p = cpu(engine, POINT)
    rgb = np.random.default_rng(5).integers(0, 256, (5, 7, 3), dtype=np.uint8)
    im = Image.fromarray(rgb)
    for mode in ("L", "LA", "RGB", "RGBA", "F"):
        m = im.convert(mode)
        assert np.array_equal(p.run(m)["y"], np.asarray(m)), mode
    # palette indices, CMYK, YCbCr, premultiplied alpha were read as gray/RGB/RGBA
    for mode, want in (("P", "RGB"), ("CMYK", "RGB"), ("YCbCr", "RGB"), ("RGBa", "RGBA"),
                       ("PA", "RGBA")):
        with pytest.raises(ValueError, match=rf"input 'x': .* mode '{mode}'.*convert\('{want}'\)"):
            p.run(im.convert(mode))
        with pytest.raises(ValueError, match="Pillow"):
            p.submit({"x": im.convert(mode)}, [None])


def test_closed_pipeline_keeps_its_names_and_says_it_is_closed(engine):
    p = cpu(engine, PIPELINES / "demo.json")
    p.close()
    assert p.inputs == ("photo",)
    with pytest.raises(RuntimeError, match="closed"):
        p.run({"photo": np.zeros((4, 4, 3), np.uint8)})  # was a KeyError: inputs are []


def test_timeout_and_option_type_errors(engine):
    p = cpu(engine, POINT)
    t = p.submit(np.zeros((2, 2), np.uint8))
    for bad in ("5", b"5"):
        with pytest.raises(TypeError, match="timeout"):
            p.wait(t, timeout=bad)  # float("5") was taken as 5 seconds
    with pytest.raises(TypeError, match="option threads: a bool, number, str or path, not list"):
        p.configure(threads=[2])
    p.configure(dump_kernels=os.fsencode(str(ROOT)))  # a bytes path is a path
