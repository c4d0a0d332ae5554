"""The pool's limits: forks capped, quiet on Ctrl-C and at shutdown, no worker outliving a closed pool, and
this machine's limits on file descriptors and processes a usage error (exit 2), not a crash."""

import errno
import logging
import os
import signal
import threading
import time

import numpy as np
import pytest

from nxgates.core import memory
from nxgates.core.pool import ProcessWorkerPool, WorkerPool, check_workers, resolve
from nxgates.core.pool import forked as pool
from nxgates.errors import ConfigError
from tests.helpers import assert_usage_error, process_gone, run_in_process, shell


def test_process_workers_are_capped_by_cpus_and_memory(monkeypatch):
    monkeypatch.setattr(pool, "auto_workers", lambda: 2)
    monkeypatch.setattr(memory, "available_bytes", lambda: 64 << 30)
    assert pool.max_process_workers() == 16
    check_workers("process", 16)
    with pytest.raises(ConfigError, match="workers=17 .*at most 16"):
        check_workers("process", 17)
    check_workers("thread", 1024)  # threads cost no fork
    monkeypatch.setattr(memory, "available_bytes", lambda: 1 << 30)  # 512 MiB budget / 64 MiB per worker
    assert pool.max_process_workers() == 8
    with pytest.raises(ConfigError, match="at most 8"):
        ProcessWorkerPool(9)


def test_tasks_cancelled_at_close_are_quiet(caplog):
    """Ctrl-C closes the pool with tasks queued: each is recorded as cancelled, none logs a traceback."""
    release = threading.Event()
    p = WorkerPool(1)
    p.submit(lambda ctx, w: release.wait(10), None)
    for b in range(5):
        p.submit(lambda ctx, w: None, b)
    with caplog.at_level(logging.DEBUG, logger="concurrent.futures"):
        p.close()
    release.set()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert [r.error for r in p.records[1:]] == ["CancelledError: cancelled when the pool closed"] * 5


def signals_left_to_the_parent(ctx, worker):
    assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


def test_forked_workers_leave_ctrl_c_to_the_parent():
    with ProcessWorkerPool(2) as p:
        for b in range(2):
            p.submit(signals_left_to_the_parent, b)
        assert p.wait(2, timeout=30).reached
        assert [r.error for r in p.records] == [None, None]


def stuck(ctx, worker):
    pids = resolve(ctx)
    pids[worker] = os.getpid()
    time.sleep(60)


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
def test_closing_a_busy_process_pool_ends_its_workers():
    p = ProcessWorkerPool(2)
    pids = p.array((2,), np.int64)
    pids[:] = 0
    handle = p.share(pids)
    p.submit(stuck, handle)
    p.submit(stuck, handle)
    assert p.wait(2, timeout=0.5).timed_out
    for _ in range(100):
        if pids.all():
            break
        time.sleep(0.05)
    assert pids.all()
    p.close()
    for _ in range(100):
        if all(process_gone(int(pid)) for pid in pids):
            break
        time.sleep(0.05)
    assert all(process_gone(int(pid)) for pid in pids)


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
