"""What runs inside a forked worker, called here directly: the batch runner and the worker's start-up."""

import os
import signal
import sys

import pytest

from nxgates.core.pool import forked
from nxgates.core.pool.forked import STOP_SIGNALS, _end_with_parent, _quiet_worker, _run_batch


def add(ctx, worker):
    return ctx + 10 * worker


def fail_on_two(ctx, worker):
    if ctx == 2:
        raise ValueError(f"task {ctx} on worker {worker} failed")
    return ctx


def test_a_batch_runs_every_task_with_its_context_and_worker():
    assert _run_batch([(add, 1), (add, 2), (add, 3)], 4) == [(None, 41), (None, 42), (None, 43)]
    assert _run_batch([], 0) == []


def test_a_failing_task_is_reported_in_its_place_and_the_rest_still_run():
    outcomes = _run_batch([(fail_on_two, 1), (fail_on_two, 2), (fail_on_two, 3)], 1)
    assert [value for _, value in outcomes] == [1, None, 3]
    assert outcomes[0][0] is None and outcomes[2][0] is None
    error = outcomes[1][0]
    assert type(error) is ValueError and str(error) == "task 2 on worker 1 failed"


@pytest.fixture
def recorded_signals(monkeypatch):
    calls = []
    monkeypatch.setattr(signal, "signal", lambda sig, handler: calls.append(("signal", sig, handler)))
    monkeypatch.setattr(signal, "pthread_sigmask", lambda how, sigs: calls.append(("mask", how, tuple(sigs))))
    monkeypatch.setattr(forked, "_end_with_parent", lambda parent: calls.append(("parent", parent)))
    return calls


def test_a_worker_leaves_stop_signals_to_its_parent(recorded_signals):
    _quiet_worker(4321)
    assert recorded_signals == [
        ("signal", signal.SIGINT, signal.SIG_IGN),
        ("signal", signal.SIGTERM, signal.SIG_DFL),
        ("signal", signal.SIGHUP, signal.SIG_IGN),
        ("mask", signal.SIG_UNBLOCK, STOP_SIGNALS),
        ("parent", 4321),
    ]
    assert STOP_SIGNALS == (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def test_without_sighup_or_sigmask_a_worker_sets_what_there_is(recorded_signals, monkeypatch):
    monkeypatch.delattr(signal, "SIGHUP")
    monkeypatch.delattr(signal, "pthread_sigmask")
    _quiet_worker(7)
    assert recorded_signals == [
        ("signal", signal.SIGINT, signal.SIG_IGN),
        ("signal", signal.SIGTERM, signal.SIG_DFL),
        ("parent", 7),
    ]


class Exited(Exception):
    pass


@pytest.fixture
def fake_libc(monkeypatch):
    """ctypes.CDLL and os._exit replaced: what the worker asked of the kernel, and whether it left."""
    import ctypes

    calls = []

    class Libc:
        def prctl(self, *args):
            calls.append(("prctl", *args))
            return 0

    def cdll(name, **kwargs):
        calls.append(("CDLL", name, kwargs))
        return Libc()

    def exit_(code):
        calls.append(("_exit", code))
        raise Exited

    monkeypatch.setattr(ctypes, "CDLL", cdll)
    monkeypatch.setattr(os, "_exit", exit_)
    monkeypatch.setattr(sys, "platform", "linux")
    return calls


def test_on_linux_a_worker_asks_for_sigterm_when_its_parent_dies(fake_libc):
    _end_with_parent(os.getppid())
    assert fake_libc == [("CDLL", None, {"use_errno": True}), ("prctl", 1, int(signal.SIGTERM), 0, 0, 0)]


def test_a_worker_whose_parent_already_died_exits_at_once(fake_libc):
    with pytest.raises(Exited):
        _end_with_parent(os.getppid() + 1)
    assert fake_libc[-1] == ("_exit", 1)


def test_elsewhere_than_linux_a_worker_asks_nothing(fake_libc, monkeypatch):
    monkeypatch.setattr(sys, "platform", "darwin")
    _end_with_parent(os.getppid() + 1)
    assert fake_libc == []


@pytest.mark.parametrize("missing", [OSError("no libc"), AttributeError("no prctl")])
def test_without_prctl_a_worker_carries_on(fake_libc, monkeypatch, missing):
    import ctypes

    def cdll(name, **kwargs):
        raise missing

    monkeypatch.setattr(ctypes, "CDLL", cdll)
    _end_with_parent(os.getppid() + 1)  # cannot ask: does not exit either
    assert fake_libc == []
