"""A CPU submit returns at once (the frame is queued on the engine's threads), and waits
return to Python's signal handling promptly: Ctrl-C in wait() or run() cancels the frame
(it stops at its next band), raises KeyboardInterrupt and leaves the pipeline usable;
cancel() from another thread ends a frame another thread waits for.

The frames here take minutes of CPU time whole (a 2400x3200 Gaussian of sigma 48: seconds
even on 64 cores), so they are still in flight when the test acts, 50 ms in (each test
checks that with poll() first); nothing asserts a duration. A cancelled frame costs a
band."""
import os
import signal
import threading

import numpy as np
import pytest

import pipefuse
from conftest import cpu

HEAVY = {"pipefuse": 1, "inputs": ["in"],
         "stages": [{"id": "g", "op": "gaussian", "inputs": ["in"], "params": {"sigma": 48}}],
         "outputs": {"out": "g"}}


@pytest.fixture
def heavy(engine):
    p = cpu(engine, HEAVY)
    yield p
    p.close()


@pytest.fixture
def big():
    return np.full((2400, 3200, 3), 100, np.uint8)


def _sigint_soon():
    pid = os.getpid()
    t = threading.Timer(0.05, os.kill, (pid, signal.SIGINT))
    t.start()
    return t


def _usable(p):
    small = np.full((16, 16, 3), 100, np.uint8)
    assert np.array_equal(p.run(small)["out"], small)  # a blur of a flat image is flat


def test_cpu_submit_returns_before_the_frame_completes(heavy, big):
    t = heavy.submit(big)
    assert not t.done and not heavy.poll(t)  # queued, not run inside submit
    heavy.cancel()
    with pytest.raises(pipefuse.CancelledError, match="cancelled") as ei:
        heavy.wait(t)
    assert isinstance(ei.value, RuntimeError) and ei.value.status_name == "PF_CANCELLED"
    assert t.done
    with pytest.raises(pipefuse.CancelledError):  # its error stays with its ticket
        heavy.wait(t)
    _usable(heavy)


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                    reason="signals reach the main thread only")
def test_ctrl_c_in_wait_cancels_the_frame(heavy, big):
    t = heavy.submit(big)
    assert not heavy.poll(t)
    timer = _sigint_soon()
    with pytest.raises(KeyboardInterrupt):
        heavy.wait(t)
    timer.join()
    assert t.done
    with pytest.raises(pipefuse.CancelledError):  # stopped, not run to its end
        heavy.wait(t)
    _usable(heavy)


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                    reason="signals reach the main thread only")
def test_ctrl_c_in_run_and_a_handler_of_ones_own(heavy, big):
    heavy.plan(big)  # the signal comes while the frame runs, not while it plans
    timer = _sigint_soon()
    with pytest.raises(KeyboardInterrupt):
        heavy.run(big)
    timer.join()
    _usable(heavy)

    class Stop(Exception):
        pass

    def handler(signum, frame):
        raise Stop()

    old = signal.signal(signal.SIGUSR1, handler)
    try:
        t = heavy.submit(big)
        assert not heavy.poll(t)
        timer = threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGUSR1))
        timer.start()
        with pytest.raises(Stop):  # the application's own handler ran inside the wait
            heavy.wait(t)
        timer.join()
    finally:
        signal.signal(signal.SIGUSR1, old)
    with pytest.raises(pipefuse.CancelledError):
        heavy.wait(t)
    _usable(heavy)


def test_cancel_from_another_thread(heavy, big):
    t = heavy.submit(big)
    assert not heavy.poll(t)
    timer = threading.Timer(0.05, heavy.cancel)  # no claim: a waiting thread holds it
    timer.start()
    with pytest.raises(pipefuse.CancelledError):
        heavy.wait(t)
    timer.join()
    _usable(heavy)


def test_a_cancel_before_submit_touches_no_later_frame(engine):
    p = cpu(engine, HEAVY)
    p.cancel()
    x = np.full((32, 32, 3), 7, np.uint8)
    assert np.array_equal(p.run(x)["out"], x)


def test_a_second_submit_completes_the_frame_before_it(engine):
    p = cpu(engine, HEAVY)
    a, b = (np.full((64, 64, 3), v, np.uint8) for v in (10, 20))
    t1 = p.submit(a)
    t2 = p.submit(b)
    assert t1.done  # completed by the second submit, its outputs delivered
    assert np.array_equal(p.wait(t1)["out"], a)
    assert np.array_equal(p.wait(t2)["out"], b)


def test_set_while_a_frame_is_queued_waits_for_it(engine):
    p = cpu(engine, {"pipefuse": 1, "inputs": ["in"], "stages": [
        {"id": "b", "op": "brightness", "inputs": ["in"], "params": {"amount": 0.0}}],
        "outputs": {"out": "b"}})
    x = np.full((256, 256, 3), 100, np.uint8)
    t = p.submit(x)
    p.set("b.amount", 0.5)  # the queued frame ran with 0.0
    assert np.array_equal(p.wait(t)["out"], x)
    assert p.run(x)["out"].min() > 200
