"""How many forked workers a machine runs: capped by CPUs then memory, a usage error beyond the cap; and this
machine's limits on file descriptors and processes a usage error (exit 2), not a crash."""

import errno
import os

import pytest

from nxgates.core import memory
from nxgates.core.pool import ProcessWorkerPool, check_workers, max_process_workers
from nxgates.core.pool.forked import limits
from nxgates.errors import ConfigError
from tests.helpers import assert_usage_error, run_in_process, shell

MIB = 1 << 20



@pytest.mark.parametrize(("cpus", "available", "expected"), [
    (2, 64 << 30, 16),  # by CPUs: 8 per CPU
    (3, 64 << 30, 24),
    (2, 1200 * MIB, 9),  # by memory: half of it, 64 MiB per worker, rounded down
    (2, 2048 * MIB, 16),
    (2, 100 * MIB, 2),  # never fewer than two
])
def test_process_workers_are_capped_by_cpus_then_memory(monkeypatch, cpus, available, expected):
    monkeypatch.setattr(limits, "auto_workers", lambda: cpus)
    monkeypatch.setattr(memory, "available_bytes", lambda: available)
    cap = max_process_workers()
    assert cap == expected and type(cap) is int


def test_too_many_process_workers_is_a_usage_error_naming_the_cap(monkeypatch):
    monkeypatch.setattr(limits, "max_process_workers", lambda: 16)
    check_workers("process", 16)
    check_workers("thread", 10_000)
    check_workers("dask", 10_000)
    with pytest.raises(ConfigError) as err:
        check_workers("process", 17)
    assert str(err.value) == ("workers=17 is more than the process executor runs on this machine (at most 16: 8 per "
                              "usable CPU, within the memory budget); use fewer workers or executor=thread")


def test_a_process_pool_needs_fork(monkeypatch):
    import multiprocessing

    monkeypatch.setattr(multiprocessing, "get_all_start_methods", lambda: ["spawn"])
    with pytest.raises(ConfigError) as err:
        ProcessWorkerPool(2)
    assert str(err.value) == "the process executor needs fork() (Linux or macOS); use executor=thread"


def test_a_process_pool_refuses_more_workers_than_its_cap(monkeypatch):
    monkeypatch.setattr(limits, "max_process_workers", lambda: 3)
    with pytest.raises(ConfigError, match="workers=4 .*at most 3"):
        ProcessWorkerPool(4)


def test_process_workers_are_capped_by_cpus_and_memory(monkeypatch):
    monkeypatch.setattr(limits, "auto_workers", lambda: 2)
    monkeypatch.setattr(memory, "available_bytes", lambda: 64 << 30)
    assert limits.max_process_workers() == 16
    check_workers("process", 16)
    with pytest.raises(ConfigError, match="workers=17 .*at most 16"):
        check_workers("process", 17)
    check_workers("thread", 1024)  # threads cost no fork
    monkeypatch.setattr(memory, "available_bytes", lambda: 1 << 30)  # 512 MiB budget / 64 MiB per worker
    assert limits.max_process_workers() == 8
    with pytest.raises(ConfigError, match="at most 8"):
        ProcessWorkerPool(9)


@pytest.mark.parametrize(("refused", "why"), [(errno.EMFILE, "Too many open files"),
                                              (errno.EAGAIN, "Resource temporarily unavailable")])
def test_a_pipe_or_fork_the_system_refuses_is_a_usage_error_naming_the_limit(tmp_path, monkeypatch, refused, why):
    """No file descriptor for a worker's pipes (ulimit -n) or no process for it (ulimit -u): exit 2, one line."""
    import multiprocessing.process

    def refuse(*args):
        raise OSError(refused, why)

    if refused == errno.EMFILE:
        monkeypatch.setattr(os, "pipe", refuse)
    else:
        monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", refuse)
    r = run_in_process("run", "parallel-grad", "--executor", "process", cwd=tmp_path)
    assert_usage_error(r, f"parallel-grad: the system refused a resource: {why}", "ulimit -n", "ulimit -u")


@pytest.mark.console_script
def test_too_few_file_descriptors_for_the_workers_pipes(tmp_path):
    """`ulimit -n 16` holds the thread pool but not four forked workers' pipes: exit 2 naming the limit."""
    r = shell('ulimit -n 16 && "$NX" run parallel-grad --executor thread --set workers=4', tmp_path)
    assert r.returncode == 0, r.stderr
    r = shell('ulimit -n 16 && "$NX" run parallel-grad --executor process --set workers=4', tmp_path)
    assert_usage_error(r, "parallel-grad: the system refused a resource: Too many open files", "ulimit -n")
