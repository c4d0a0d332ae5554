"""How many workers "auto" means (nxgates/core/cpus.py), and the executor decision: one function for every gate,
each gate's meaning of ``auto`` given as its own AutoExecutor."""

import os

import pytest

from nxgates.core.cpus import EXECUTORS, AutoExecutor, auto_workers, choose_executor
from nxgates.core.pool import make_pool
from nxgates.errors import ConfigError


def test_auto_workers_counts_the_cpus_this_process_may_run_on(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3, 4}, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    assert auto_workers() == 5


def test_auto_workers_is_at_least_two(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3}, raising=False)
    assert auto_workers() == 2
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3, 7}, raising=False)
    assert auto_workers() == 2
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3, 5, 7}, raising=False)
    assert auto_workers() == 3


def _no_affinity(pid):
    raise OSError("not supported")


def test_without_an_affinity_mask_auto_workers_counts_the_machine(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", _no_affinity, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 7)
    assert auto_workers() == 7
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 6)
    assert auto_workers() == 6


def test_an_unknown_cpu_count_still_gives_two_workers(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", _no_affinity, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert auto_workers() == 2


def test_the_executors_a_pool_may_be():
    assert EXECUTORS == ("thread", "process", "dask")


def test_auto_means_process_always_and_thread_below_by_default():
    assert AutoExecutor() == (0, "thread")
    assert choose_executor("auto", None, AutoExecutor()) == "process"


def test_auto_compares_the_work_with_process_from_inclusively():
    auto = AutoExecutor(process_from=100, below="thread")
    assert choose_executor("auto", None, auto, 99) == "thread"
    assert choose_executor("auto", None, auto, 100) == "process"
    assert choose_executor("auto", None, auto, 101) == "process"
    assert choose_executor("auto", None, AutoExecutor(1, "thread")) == "thread"  # no work given: 0


def test_below_the_threshold_auto_is_the_gates_own_choice():
    assert choose_executor("auto", None, AutoExecutor(5, "process"), 4) == "process"
    assert choose_executor("auto", None, AutoExecutor(5, "dask"), 4) == "dask"


def test_a_scheduler_address_makes_auto_dask_whatever_the_work():
    assert choose_executor("auto", "tcp://h:1", AutoExecutor(10**9), 0) == "dask"
    assert choose_executor("auto", "tcp://h:1", AutoExecutor(0), 10) == "dask"


def test_a_concrete_executor_is_returned_as_requested():
    for kind in EXECUTORS:
        assert choose_executor(kind) == kind
        assert choose_executor(kind, None, AutoExecutor(0, "thread"), 10) == kind
    assert choose_executor("dask", "tcp://h:1") == "dask"


def test_a_scheduler_address_for_another_executor_is_a_usage_error():
    for kind in ("thread", "process"):
        with pytest.raises(ConfigError) as err:
            choose_executor(kind, "tcp://h:1")
        assert str(err.value) == f"a scheduler address applies to executor=dask, not executor={kind}"
    assert choose_executor("thread", "") == "thread"  # an empty address is no address


def test_auto_without_the_gates_meaning_is_a_programming_error():
    with pytest.raises(ValueError) as err:
        choose_executor("auto", None)
    assert str(err.value) == "executor=auto needs the gate's AutoExecutor"
    with pytest.raises(ValueError) as err:
        choose_executor("auto", "tcp://h:1")
    assert str(err.value) == "executor=auto needs the gate's AutoExecutor"


def test_choose_executor_is_the_one_decision_for_every_gate():
    from nxgates.core.pool import AutoExecutor, choose_executor
    from nxgates.errors import ConfigError

    by_size, always = AutoExecutor(process_from=100), AutoExecutor()  # parallel-grad's kind, lora's kind
    assert [choose_executor("auto", None, by_size, work) for work in (99, 100)] == ["thread", "process"]
    assert choose_executor("auto", None, always, 0) == "process"
    assert choose_executor("auto", "tcp://h:1", by_size, 0) == choose_executor("auto", "tcp://h:1", always) == "dask"
    assert [choose_executor(kind, None) for kind in ("thread", "process", "dask")] == ["thread", "process", "dask"]
    assert choose_executor("dask", "tcp://h:1") == "dask"
    for kind in ("thread", "process"):
        with pytest.raises(ConfigError, match=f"^a scheduler address applies to executor=dask, not executor={kind}$"):
            choose_executor(kind, "tcp://h:1")
        with pytest.raises(ConfigError, match=f"^a scheduler address applies to executor=dask, not executor={kind}$"):
            make_pool(kind, 2, scheduler="tcp://h:1")
    with pytest.raises(ValueError, match="AutoExecutor"):
        choose_executor("auto", None)
