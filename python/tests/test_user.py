"""What a Python user tries that the other tests did not: values of every Python and
NumPy kind for parameters, Pillow images as inputs and shapes, paths as bytes, things
that are no array at all, and what the objects print as."""
import os

import numpy as np
import pytest

import pipefuse
from conftest import PIPELINES, cpu

IDENT = {"pipefuse": 1, "inputs": ["x"],
         "stages": [{"id": "lin", "op": "linear", "inputs": ["x"], "params": {"a": 1.0, "b": 0.0}}],
         "outputs": {"y": "lin"}}
MATRIX = {"pipefuse": 1, "inputs": ["x"],
          "stages": [{"id": "m", "op": "color_matrix", "inputs": ["x"]}], "outputs": {"y": "m"}}


# ---- parameters -------------------------------------------------------------------------------

def test_long_double_parameters_are_numbers(engine):
    """np.longdouble's tolist() gives a longdouble back: set() recursed until
    RecursionError."""
    p = cpu(engine, PIPELINES / "demo.json")
    p.set("glow.sigma", np.longdouble(2.5))
    p.set("glow.sigma", np.array(np.longdouble(3.0)))
    m = cpu(engine, MATRIX)
    m.set("m.offset", np.zeros(4, np.longdouble))
    with pytest.raises(pipefuse.ParamError, match="finite"):
        p.set("glow.sigma", np.longdouble("inf"))


@pytest.mark.parametrize("value,where", [
    ([0.0] * 15 + [float("nan")], "m.matrix[15]"),
    (np.full(16, np.inf), "m.matrix[0]"),
    (np.eye(4).ravel() * np.float32("nan"), "m.matrix[0]"),
])
def test_non_finite_numbers_in_arrays_are_param_errors_naming_them(engine, value, where):
    """One NaN is a ParamError ("nan is not a finite number"); in an array it reached the
    engine as JSON it could not parse ("invalid token near 'NaN'")."""
    m = cpu(engine, MATRIX)
    with pytest.raises(pipefuse.ParamError) as ei:
        m.set("m.matrix", value)
    assert str(ei.value).startswith(where + ":") and "not a finite number" in str(ei.value)
    assert ei.value.status_name == "PF_PARAM" and ei.value.status == pipefuse.STATUS["PF_PARAM"]


@pytest.mark.parametrize("value,where", [
    (float("nan"), "stages[0].params.a"),
    (np.float32("inf"), "stages[0].params.a"),
    ([1.0, np.nan], "stages[0].params.a[1]"),
    (np.array([[0.0, 1.0], [2.0, -np.inf]]), "stages[0].params.a[1][1]"),
])
def test_non_finite_numbers_in_dict_pipelines_are_param_errors_naming_them(engine, value,
                                                                            where):
    src = dict(IDENT, stages=[dict(IDENT["stages"][0], params={"a": value})])
    with pytest.raises(pipefuse.ParamError, match=r"<dict>: " + where.replace("[", r"\[")
                       .replace("]", r"\]") + ": -?(nan|inf) is not a finite number"):
        engine.load(src)


@pytest.mark.parametrize("value,kind", [(b"2", "bytes"), (1 + 2j, "complex"), ({1}, "set"),
                                        ((x for x in [1.0]), "generator"),
                                        (np.zeros(4, complex), "ndarray")])
def test_values_json_cannot_hold_are_type_errors_naming_the_parameter(engine, value, kind):
    p = cpu(engine, MATRIX)
    with pytest.raises(TypeError, match=f"^m.offset: .*not {kind}"):
        p.set("m.offset", value)


def test_huge_integers_and_non_str_keys(engine):
    p = cpu(engine, PIPELINES / "demo.json")
    with pytest.raises(pipefuse.ParamError, match="glow.sigma: .*out of range"):
        p.set("glow.sigma", 10 ** 400)
    with pytest.raises(TypeError, match="key"):
        p.set(3, 1.0)
    p.set("glow.sigma", 10 ** 1)  # and plain numbers still go through
    p.set("glow.sigma", np.float16(1.5))


# ---- Pillow images ----------------------------------------------------------------------------

def test_a_pillow_image_is_converted_once_per_frame(engine, monkeypatch):
    """Its __array_interface__ copies the pixels (tobytes): the outputs' shape, their
    dtype and the frame each asked for it, three copies per frame."""
    Image = pytest.importorskip("PIL.Image")
    p = cpu(engine, IDENT)
    calls = []
    tobytes = Image.Image.tobytes
    monkeypatch.setattr(Image.Image, "tobytes",
                        lambda self, *a, **k: calls.append(1) or tobytes(self, *a, **k))
    x = np.random.default_rng(0).integers(0, 256, (6, 9, 3), dtype=np.uint8)
    im = Image.fromarray(x)
    for args in ((im,), ([im],), ({"x": im},), (im, {"y": None})):
        calls.clear()
        out = p.run(*args)
        assert len(calls) == 1, args
        if "y" in out:
            assert np.array_equal(out["y"], x)


def test_pillow_images_plan_as_arrays_do(engine, monkeypatch):
    """plan(image) raised "'Image' object is not iterable"; the docs take the arrays."""
    Image = pytest.importorskip("PIL.Image")
    p = cpu(engine, IDENT)
    for im, shape in ((Image.new("RGB", (9, 6)), (6, 9)), (Image.new("L", (3, 4)), (4, 3)),
                      (Image.new("LA", (5, 2)), (2, 5))):
        p.plan(im)
        assert p.outputs[0].shape == shape
        p.plan([im])
        assert p.outputs[0].shape == shape
        assert p.plan_text(im).startswith("pipeline")
    monkeypatch.setattr(Image.Image, "tobytes", None)  # planning reads no pixels
    p.plan(Image.new("RGB", (7, 3)))
    assert p.outputs[0].shape == (3, 7)


@pytest.mark.parametrize("shapes", [None, 3, 2.5, "abc", (30.0, 40), [None]])
def test_what_is_no_shape_is_a_type_error_saying_so(engine, shapes):
    p = cpu(engine, IDENT)
    with pytest.raises(TypeError, match="shape"):
        p.plan(shapes)


# ---- paths ------------------------------------------------------------------------------------

def test_plugin_paths_as_bytes(tmp_path):
    """bytes is a path to os.fspath: Engine(b"/dir") iterated it as ints."""
    seen = []
    log = lambda level, msg: seen.append(msg)  # noqa: E731
    missing = os.fsencode(tmp_path / "none")
    pipefuse.Engine(missing, log=log)
    pipefuse.Engine([missing, tmp_path / "other"], log=log)
    assert sum("does not exist" in m for m in seen) == 3, seen
    with pytest.raises(TypeError, match="plugin_path"):
        pipefuse.Engine([1, 2])


# ---- what is no array -------------------------------------------------------------------------

@pytest.mark.parametrize("bad,text", [
    ((np.zeros((4, 4), np.uint8) for _ in range(1)), "expected an array.*not generator"),
    (3, "expected an array.*not int"),
    (2.5, "expected an array.*not float"),
    (object(), "expected an array.*not object"),
    (np.zeros((4, 4), np.complex64), "not complex64"),
    (np.zeros((4, 4), ">u2"), "uint16 in big-endian byte order"),
    (np.zeros((4, 4), ">f4"), "float32 in big-endian byte order"),
    (np.zeros((4, 4), object), "not object"),
])
def test_inputs_of_the_wrong_kind_say_what_they_are(engine, bad, text):
    """A generator or a number went through np.asarray into a 0-d object or int64 array:
    "dtype must be ... not buffer format 'O' (8-byte items)"."""
    p = cpu(engine, IDENT)
    for outputs in (None, [None]):
        with pytest.raises(TypeError, match=text):
            p.run(bad, outputs)


# ---- what the objects print as ----------------------------------------------------------------

def test_reprs_and_the_poll_message(engine):
    p = cpu(engine, PIPELINES / "demo.json")
    assert repr(p) == "<pipefuse.Pipeline inputs=['photo'] outputs=['result', 'histogram']>"
    t = p.submit(np.zeros((4, 4, 3), np.uint8))
    assert repr(t).startswith("<pipefuse.Ticket ") and "host frame, " in repr(t)
    p.wait(t)
    assert "host frame, complete" in repr(t)
    q = cpu(engine, PIPELINES / "demo.json")
    with pytest.raises(ValueError, match="another pipeline") as ei:
        q.poll(t)
    assert "wait:" not in str(ei.value)
    p.close()
    assert repr(p).endswith(", closed>")


# ---- threads ----------------------------------------------------------------------------------

def test_run_holds_the_pipeline_between_its_calls(engine, monkeypatch):
    """run() is several calls into the extension (plan, submit, wait); another thread's
    set() got in between them, where the docs promise BusyError for the whole call."""
    import threading

    p = cpu(engine, IDENT)
    frame = np.zeros((8, 6, 4), np.uint8)
    seen = []
    real = pipefuse._host_arrays

    def in_the_middle(ins):
        # inside submit, after run() began and before the frame was submitted
        def other():
            try:
                p.set("lin.b", 0.5)
                seen.append("set went in")
            except pipefuse.BusyError as e:
                seen.append(str(e))
        t = threading.Thread(target=other)
        t.start()
        t.join()
        return real(ins)

    monkeypatch.setattr(pipefuse, "_host_arrays", in_the_middle)
    out = p.run(frame)
    assert len(seen) == 1 and "another thread" in seen[0], seen
    assert (out["y"] == 0).all()  # b stayed 0: the frame ran as it was when run() began
    monkeypatch.setattr(pipefuse, "_host_arrays", real)
    p.set("lin.b", 0.5)  # free again once run() returned
    assert (p.run(frame)["y"] == 128).all()
