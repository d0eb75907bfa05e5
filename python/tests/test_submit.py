"""Frames in flight through submit / wait / poll, and tickets."""
import numpy as np
import pytest

import pipefuse
from conftest import PIPELINES, cpu


def test_submit_wait(engine):
    p = cpu(engine, PIPELINES / "demo.json")
    xs = [np.full((16, 24, 3), v, np.uint8) for v in (10, 120, 240)]
    tickets = [p.submit(x) for x in xs]
    assert all(isinstance(t, pipefuse.Ticket) for t in tickets)
    outs = [p.wait(t) for t in tickets]
    for x, o in zip(xs, outs):
        assert np.array_equal(o["result"], p.run(x)["result"])
        assert o["histogram"]["r"].sum() == 16 * 24
    assert outs[0]["histogram"]["r"].argmax() < outs[2]["histogram"]["r"].argmax()
    again = p.wait(tickets[0])  # waiting twice returns the same outputs
    assert again["result"] is outs[0]["result"]
    assert p.poll(tickets[1]) is True


def test_ticket_of_another_pipeline(engine):
    p1 = cpu(engine, PIPELINES / "demo.json")
    p2 = cpu(engine, PIPELINES / "demo.json")
    t = p1.submit(np.zeros((4, 4, 3), np.uint8))
    p1.wait(t)
    # Complete already, but p2's names are not p1's outputs: refused, not answered.
    with pytest.raises(ValueError, match="another pipeline"):
        p2.wait(t)
    with pytest.raises(ValueError, match="another pipeline"):
        p2.poll(t)
    assert sorted(p1.wait(t)) == ["histogram", "result"]
    with pytest.raises(TypeError, match="Ticket"):
        p1.wait(3)


def test_submit_outputs_kept_alive(engine):
    p = cpu(engine, PIPELINES / "demo.json")
    t = p.submit(np.zeros((8, 8, 3), np.uint8), {"result": np.ones((8, 8, 3), np.uint8)})
    import gc
    gc.collect()
    r = p.wait(t)
    assert r["result"].shape == (8, 8, 3)


def test_slots(engine):
    p = cpu(engine, PIPELINES / "demo.json", slots=2)
    assert p.slots == 2
    with pytest.raises(pipefuse.Error):
        p.configure(slots=99)


def test_wait_with_timeout(engine):
    p = cpu(engine, PIPELINES / "demo.json")
    t = p.submit(np.zeros((8, 8, 3), np.uint8))
    try:
        r = p.wait(t, timeout=5.0)
    except NotImplementedError:
        pytest.skip("the library has no pf_pipeline_wait_timeout")
    assert r["result"].shape == (8, 8, 3) and t.done
