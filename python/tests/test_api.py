"""The Python API over the C API: engine, stages, loading, params, options, the plan,
statistics, errors as exceptions with the engine's status and message."""
import json
import threading
import time

import numpy as np
import pytest

import pipefuse
from conftest import PIPELINES, cpu

POINT = {"pipefuse": 1, "inputs": ["x"],
         "stages": [{"id": "lin", "op": "linear", "inputs": ["x"], "params": {"a": 2.0, "b": 0.1}}],
         "outputs": {"y": "lin"}}


def test_version():
    assert pipefuse.version() == pipefuse.__version__
    assert pipefuse.__version__.count(".") == 2


def test_stages_and_params(engine):
    stages = {s.name: s for s in engine.stages()}
    for name in ("brightness", "gaussian", "resize", "histogram", "blend"):
        assert name in stages
    g = stages["gaussian"]
    assert g.kind == "stencil" and g.inputs == 1 and g.plugin and g.file.endswith(".so")
    sigma = {p.name: p for p in g.params}["sigma"]
    assert sigma.type == "float" and sigma.min == 0 and sigma.max >= 16 and sigma.doc
    assert stages["blend"].inputs == 2 and stages["blend"].kind == "point"
    hist = stages["histogram"]
    assert hist.kind == "reduce" and hist.columns
    resize = stages["resize"]
    enums = [p for p in resize.params if p.type == "enum"]
    assert enums and "nearest" in enums[0].choices and enums[0].default in enums[0].choices
    assert engine.stage("gaussian") == g
    with pytest.raises(KeyError):
        engine.stage("no_such_stage")


def test_engine_options(tmp_path):
    e = pipefuse.Engine(builtin=False, use_env_path=False, threads=1)
    assert e.stages() == []
    with pytest.raises(pipefuse.PipelineError, match="brightness"):
        e.load(PIPELINES / "demo.json")
    with pytest.raises(ValueError):
        pipefuse.Engine(threads=-1)
    with pytest.raises(TypeError):
        pipefuse.Engine(log=42)
    assert "plugins" in pipefuse.Engine().info()


def test_load_forms(engine):
    a = engine.load(PIPELINES / "demo.json")
    b = engine.load(str(PIPELINES / "demo.json"))
    c = engine.load((PIPELINES / "demo.json").read_text())
    d = engine.load(json.loads((PIPELINES / "demo.json").read_text()))
    for p in (a, b, c, d):
        assert p.inputs == ("photo",)
        assert [o.name for o in p.outputs] == ["result", "histogram"]
        assert [o.kind for o in p.outputs] == ["image", "table"]


def test_load_errors_carry_status_and_message(engine, tmp_path):
    with pytest.raises(pipefuse.ParseError) as ei:
        engine.load('{"pipefuse": 1, "stages": [}', name="broken.json")
    assert ei.value.status == pipefuse.STATUS["PF_PARSE"] and ei.value.status_name == "PF_PARSE"
    assert "broken.json:1:" in str(ei.value)
    assert isinstance(ei.value, pipefuse.Error)
    bad = dict(POINT, stages=[{"id": "lin", "op": "linaer", "inputs": ["x"]}])
    with pytest.raises(pipefuse.PipelineError, match="linear"):  # the closest valid name
        engine.load(bad)
    with pytest.raises(pipefuse.IoError):
        engine.load(tmp_path / "missing.json")
    out_of_range = dict(POINT, stages=[{"id": "g", "op": "gaussian", "inputs": ["x"],
                                        "params": {"sigma": -2}}], outputs={"y": "g"})
    with pytest.raises(pipefuse.ParamError, match=r"g\.sigma|sigma"):
        engine.load(out_of_range)


def test_set_params(engine):
    p = cpu(engine, POINT)
    x = np.full((4, 5), 0.25, np.float32)
    assert np.allclose(p.run(x)["y"], 0.6)
    p.set("lin.a", 1)                   # int -> set_float
    p.set("lin.b", 0.0)
    assert np.allclose(p.run(x)["y"], 0.25)
    p.set_json("lin.b", "0.5")
    assert np.allclose(p.run(x)["y"], 0.75)
    with pytest.raises(pipefuse.ParamError) as ei:
        p.set("lin.nope", 1.0)
    assert "lin.nope" in str(ei.value) or "nope" in str(ei.value)
    with pytest.raises(pipefuse.Error):
        p.set("missing.a", 1.0)
    with pytest.raises(pipefuse.Error):
        p.set("lin.a", "not a number")  # a JSON string for a float param


def test_set_enum_and_array(engine):
    p = cpu(engine, {"pipefuse": 1, "inputs": ["x"], "stages": [
        {"id": "r", "op": "resize", "inputs": ["x"], "params": {"width": 4, "height": 2}}],
        "outputs": {"y": "r"}})
    p.set("r.mode", "nearest")  # a str is a JSON string: the enum's name
    with pytest.raises(pipefuse.ParamError):
        p.set("r.mode", "no_such_mode")
    x = np.arange(8 * 8, dtype=np.uint8).reshape(8, 8)
    assert p.run(x)["y"].shape == (2, 4)


def test_options_as_keywords(engine):
    p = engine.load(POINT, backend="cpu", fusion=False, threads=1)
    p.configure(graph=True, max_launch_ms=5, profile=False)
    p.run(np.zeros((3, 3), np.uint8))
    assert p.stats()["backend"] == "cpu"
    with pytest.raises(pipefuse.Error) as ei:
        p.configure(backend="quantum")
    assert "backend" in str(ei.value)
    with pytest.raises(pipefuse.Error):
        p.configure(no_such_option=1)


def test_precision_option(engine):
    p = engine.load(POINT, backend="cpu")
    p.run(np.zeros((3, 3), np.uint8))
    assert p.stats()["precision"] == "exact"  # the default: the CPU's values on the GPU
    p.configure(precision="fast")
    p.run(np.zeros((3, 3), np.uint8))
    assert p.stats()["precision"] == "fast"
    assert "GPU arithmetic: fast" in p.plan_text()
    with pytest.raises(pipefuse.Error) as ei:
        p.configure(precision="sloppy")
    assert "precision" in str(ei.value)


def test_plan_outputs_and_text(engine):
    p = cpu(engine, PIPELINES / "thumbnail.json")
    p.plan((300, 451, 3))
    out = p.outputs[0]
    assert out.kind == "image" and out.shape[0] > 0 and out.shape[1] > 0
    text = p.plan_text()
    assert "451x300" in text and "stages" in text
    assert p.dot_text().lstrip().startswith("digraph")
    units = p.units()
    assert units and all(u["kind"] in ("point", "stencil", "resample", "reduce") for u in units)
    p.plan({"photo": (10, 20)})
    assert "20x10" in p.plan_text()
    p.plan(np.zeros((7, 9), np.uint8))
    assert "9x7" in p.plan_text()
    with pytest.raises(ValueError):
        p.plan((0, 4))
    for ch in (0, 5, 7, -3):  # run() takes 1 to 4 channels, and so does plan()
        with pytest.raises(ValueError, match="channels"):
            p.plan((8, 8, ch))
    p.plan((8, 8, 4))
    with pytest.raises(KeyError):
        p.plan({"nope": (4, 4)})


def test_stats_count_frames(engine):
    p = cpu(engine, PIPELINES / "demo.json")
    x = np.zeros((16, 16, 3), np.uint8)
    for _ in range(3):
        p.run(x)
    s = p.stats()
    assert s["frames"] == 3 and s["plans"] == 1 and s["backend"] == "cpu"
    assert s["allocations_last_frame"] == 0 and s["launches_per_frame"] >= 1


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_log_callback(engine):
    seen = []
    e = pipefuse.Engine(log=lambda level, msg: seen.append((level, msg)))
    p = e.load(POINT, backend="auto")
    p.run(np.zeros((2, 2), np.uint8))  # on a machine without a GPU: a notice, here
    assert all(isinstance(l, int) and isinstance(m, str) for l, m in seen)

    def bad(level, msg):
        raise RuntimeError("log hook failed")
    e2 = pipefuse.Engine(log=bad)  # an exception in the hook is reported, never raised
    e2.load(POINT, backend="auto").run(np.zeros((2, 2), np.uint8))


def test_close_and_context(engine):
    with cpu(engine, POINT) as p:
        p.run(np.zeros((2, 2), np.uint8))
    with pytest.raises(RuntimeError, match="closed"):
        p.run(np.zeros((2, 2), np.uint8))
    p.close()  # twice is fine


def big_frame_pipeline(engine):
    p = engine.load({"pipefuse": 1, "inputs": ["x"], "stages": [
        {"id": "g", "op": "gaussian", "inputs": ["x"], "params": {"sigma": 12}},
        {"id": "h", "op": "gaussian", "inputs": ["g"], "params": {"sigma": 12}}],
        "outputs": {"y": "h"}}, backend="cpu", threads=1)
    x = np.random.default_rng(1).random((900, 1200, 4), dtype=np.float32)
    return p, x


def test_gil_released_while_running(engine):
    p, x = big_frame_pipeline(engine)
    p.run(x)  # plan
    t0 = time.perf_counter()
    p.run(x)
    frame = time.perf_counter() - t0
    done = threading.Event()
    th = threading.Thread(target=lambda: (p.run(x), done.set()))
    count = 0
    th.start()
    t0 = time.perf_counter()
    while not done.is_set():
        count += 1
    spent = time.perf_counter() - t0
    th.join()
    # Held GIL: this loop would only run in the interpreter's switch intervals (5 ms).
    assert frame > 0.02, "frame too short to tell"
    assert count > 10000 * spent, (count, spent)


def test_one_thread_at_a_time(engine):
    p, x = big_frame_pipeline(engine)
    p.run(x)
    errors = []
    th = threading.Thread(target=lambda: p.run(x))
    th.start()
    while th.is_alive():
        try:
            p.stats()
        except RuntimeError as e:
            errors.append(str(e))
            break
    th.join()
    assert errors and "another thread" in errors[0]
    p.run(x)  # usable again afterwards


def test_output_form_and_write_png(engine, tmp_path):
    # run() gives an output's 8-bit samples; its declared form (gray1 here) is how
    # `pipefuse run` writes it, which write_png(form=) does the same way
    spec = {"pipefuse": 1, "inputs": ["src"], "stages": [{"id": "z", "op": "flip"}],
            "outputs": {"o": {"from": "z", "format": "gray1"}, "p": "z"}}
    p = engine.load(spec, backend="cpu")
    forms = {o.name: o.form for o in p.outputs}
    assert forms == {"o": "gray1", "p": "auto"}
    row = np.array([[0, 60, 127, 128, 200, 255]], np.uint8)
    out = p.run(row)["o"]
    assert out.tolist() == [[255, 200, 128, 127, 60, 0]]
    path = tmp_path / "page.png"
    pipefuse.write_png(path, out, form=p.outputs[0].form)
    assert pipefuse.read_png(path).reshape(1, 6).tolist() == [[255, 255, 255, 0, 0, 0]]
    with open(path, "rb") as f:
        head = f.read(26)
    assert head[24] == 1 and head[25] == 0  # IHDR: 1-bit gray
    pipefuse.write_png(path, out)  # no form: the samples as they are
    assert pipefuse.read_png(path).reshape(1, 6).tolist() == out.tolist()
    with pytest.raises(ValueError, match="form"):
        pipefuse.write_png(path, out, form="gray3")
