"""A process pool made in a process forked *after* nxgates was imported (a test runner's or a server's
worker, mutmut's fork server) must work: its workers check that their parent is alive against the pid that
forked them, not the pid that imported the pool module (against the importer's pid every such worker would
exit). Closing a process pool, busy, idle or retired, leaves no worker behind, and waits a bounded time."""

import os
import time

import pytest

from nxgates.core import pool
from nxgates.core.pool import ProcessWorkerPool


def _double(task_ctx, worker):
    return 2 * task_ctx


def test_a_process_pool_works_in_a_process_forked_after_the_import():
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the forked child reports through the pipe
        verdict = b"crashed"
        try:
            with pool.make_pool("process", 1) as p:
                p.submit(_double, 21)
                waited = p.wait(1, 30.0)
                verdict = b"ok" if waited.reached and p.n_completed() == 1 else b"failed"
        finally:
            os.write(write_end, verdict)
            os._exit(0)
    os.close(write_end)
    try:
        verdict = os.read(read_end, 16)
    finally:
        os.close(read_end)
        os.waitpid(child, 0)
    assert verdict == b"ok"


def noop(ctx, worker):
    return None


def _sleep(ctx, worker):
    time.sleep(ctx)


def all_exited(processes, seconds=5.0) -> bool:
    """The executor's manager thread reaps the workers too: while it holds a reaped pid without its exit code,
    is_alive() still says True, so the observation gets a deadline (an unterminated sleeper lives for 60 s)."""
    deadline = time.monotonic() + seconds
    while any(p.is_alive() for p in processes) and time.monotonic() < deadline:
        time.sleep(0.01)
    return not any(p.is_alive() for p in processes)


def started_workers(pool):
    """Start each worker of a process pool (a task on each) and return its processes."""
    for w in range(pool.n_workers):
        pool.submit(noop, None, worker=w)
    assert pool.wait(pool.n_completed() + pool.n_workers, 10).reached
    return [p for ex in pool._executors for p in ex._processes.values()]


def test_closing_a_busy_process_pool_terminates_its_workers():
    """A run that gives up on a stuck task must not leave a worker behind (the script may os._exit)."""
    pool = ProcessWorkerPool(2)
    pool.submit(_sleep, 60.0, worker=0)
    pool.submit(noop, None, worker=1)
    assert pool.wait(1, 10).finished >= 1
    processes = list(pool._executors[0]._processes.values())
    assert processes and all(p.is_alive() for p in processes)
    pool.close()
    assert all_exited(processes)


@pytest.mark.parametrize("n_workers", [1, 3])
def test_closing_an_idle_process_pool_waits_for_every_worker_to_exit(n_workers):
    """close() waits for each worker to exit: none is left running or unreaped."""
    pool = ProcessWorkerPool(n_workers)
    processes = started_workers(pool)
    pool.close()
    assert len(processes) == n_workers and [p.exitcode for p in processes] == [0] * n_workers


@pytest.mark.parametrize("cause, refused", [(RuntimeError("can't start new thread"), True),
                                            (ValueError("boom"), False)])
def test_a_process_pool_whose_manager_thread_dies_does_not_wait_forever(monkeypatch, capfd, cause, refused):
    """Under a tight `ulimit -v` the executor's manager thread dies starting its queue's feeder thread, and
    its batches would never finish: a refused thread is the machine's limit (ResourceError, exit 2), any
    other end fails the batch's tasks with the reason. Either way at once, and no thread's traceback."""
    import multiprocessing.queues

    from nxgates.errors import ResourceError

    def cannot_start(self):
        raise cause

    monkeypatch.setattr(multiprocessing.queues.Queue, "_start_thread", cannot_start)
    pool = ProcessWorkerPool(2)
    try:
        for _ in range(4):
            pool.submit(noop, None)
        t0 = time.monotonic()
        if refused:
            with pytest.raises(ResourceError, match="refused the process pool a thread.*ulimit -v"):
                pool.wait(4, 10.0)  # bounded: a lost manager thread must not make it wait forever
        else:
            waited = pool.wait(4, 10.0)
            assert not waited.reached and {r.error for r in pool.records} == {
                "the pool's manager thread ended: ValueError('boom')"}
        assert time.monotonic() - t0 < 5
    finally:
        pool.close()  # the forked workers wait on a queue nobody feeds: terminated
    assert "Traceback" not in capfd.readouterr().err


def test_closing_waits_a_bounded_time_for_an_executor_that_does_not_finish(monkeypatch):
    """shutdown(wait=True) joins the executor's manager thread without a limit; if that thread does not end
    (it is what a lost SIGTERM looked like), close() still returns and its workers are terminated."""
    from concurrent.futures import process

    from nxgates.core.pool import forked as pool_module

    real = process._ExecutorManagerThread.join_executor_internals

    def stuck(self):
        time.sleep(3)  # long against the bound below; short enough to end before the test session does
        real(self)

    monkeypatch.setattr(process._ExecutorManagerThread, "join_executor_internals", stuck)
    monkeypatch.setattr(pool_module, "CLOSE_SECONDS", 0.3)
    pool = ProcessWorkerPool(2)
    processes = started_workers(pool)
    t0 = time.monotonic()
    pool.close()
    assert time.monotonic() - t0 < 2.5
    assert all_exited(processes)


def test_retired_workers_finish_their_tasks_then_exit_before_close():
    """retire(): the tasks already submitted (even those still queued here) run, then each worker exits on
    its own, so close() does not wait for the exits."""
    pool = ProcessWorkerPool(2)
    try:
        processes = started_workers(pool)
        for _ in range(4):
            pool.submit(noop, None)  # queued, not yet handed over
        pool.retire()
        assert pool.wait(6, 10).reached
        assert all_exited(processes)
    finally:
        pool.close()


def test_close_after_retire_still_terminates_a_stuck_worker():
    """retire() shuts the executors down, and a shut-down executor forgets its processes: close() must
    still find a worker stuck in a task, and terminate it, not leave it running."""
    pool = ProcessWorkerPool(2)
    processes = started_workers(pool)
    pool.submit(_sleep, 60.0, worker=0)
    pool.retire()
    time.sleep(0.2)  # the task has started
    pool.close()
    assert all_exited(processes)


def _deaf_sleep(ctx, worker):
    """A task that ignores SIGTERM (as user code in a plugin's task may) and then hangs."""
    import signal

    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(ctx)


def _join_timeouts(monkeypatch):
    """Every timeout the test's thread hands to an executor's manager thread's or a worker process's join, as
    (kind, timeout): what close() waits for, not what the executors' own threads wait for."""
    import multiprocessing.process
    import threading
    from concurrent.futures import process

    seen = []
    real_thread_join, real_process_join = threading.Thread.join, multiprocessing.process.BaseProcess.join

    def thread_join(self, timeout=None):
        if isinstance(self, process._ExecutorManagerThread):
            seen.append(("thread", timeout))
        return real_thread_join(self, timeout)

    def process_join(self, timeout=None):
        if threading.current_thread() is threading.main_thread():
            seen.append(("process", timeout))
        return real_process_join(self, timeout)

    monkeypatch.setattr(threading.Thread, "join", thread_join)
    monkeypatch.setattr(multiprocessing.process.BaseProcess, "join", process_join)
    return seen


def test_closing_a_busy_pool_does_not_wait_for_its_stuck_worker(monkeypatch):
    """A stuck task will not end: close() terminates at once instead of waiting CLOSE_SECONDS for it."""
    from nxgates.core.pool import forked as pool_module

    monkeypatch.setattr(pool_module, "CLOSE_SECONDS", 60.0)
    pool = ProcessWorkerPool(1)
    pool.submit(_sleep, 60.0, worker=0)
    pool.flush()
    time.sleep(0.2)  # the task has started
    processes = list(pool._executors[0]._processes.values())
    seen = _join_timeouts(monkeypatch)
    t0 = time.monotonic()
    pool.close()
    assert time.monotonic() - t0 < 20
    assert all_exited(processes)
    assert [t for kind, t in seen if kind == "thread"] == [0.0]  # the manager thread: not waited for
    assert [t for kind, t in seen if kind == "process"] == [1.0]  # the terminated worker: a second to exit


def test_closing_an_idle_pool_gives_its_workers_close_seconds_in_all(monkeypatch):
    from nxgates.core.pool import forked as pool_module

    pool = ProcessWorkerPool(2)
    processes = started_workers(pool)
    seen = _join_timeouts(monkeypatch)
    pool.close()
    waits = [t for kind, t in seen if kind == "thread"]
    assert len(waits) == 2 and all(0 < t <= pool_module.CLOSE_SECONDS for t in waits)
    assert [p.exitcode for p in processes] == [0, 0]


def test_a_worker_that_ignores_sigterm_is_killed_not_left_running(monkeypatch):
    """A second for SIGTERM, then SIGKILL and a second more: never an unbounded wait."""
    pool = ProcessWorkerPool(1)
    pool.submit(_deaf_sleep, 60.0, worker=0)
    pool.flush()
    time.sleep(0.5)  # the task has started and set its handler
    processes = list(pool._executors[0]._processes.values())
    seen = _join_timeouts(monkeypatch)
    import multiprocessing.connection
    import threading

    probes, real_wait = [], multiprocessing.connection.wait

    def wait(objects, timeout=None):
        if threading.current_thread() is threading.main_thread():
            probes.append(timeout)
        return real_wait(objects, timeout)

    monkeypatch.setattr(multiprocessing.connection, "wait", wait)
    pool.close()
    assert all_exited(processes, seconds=2.0)
    assert [t for kind, t in seen if kind == "process"] == [1.0, 1.0]
    assert probes == [1.0, 0, 1.0]  # the join's wait, the liveness probe (which does not wait), the join's


def test_batches_still_queued_for_a_closed_pool_are_cancelled_not_run():
    """A stuck worker holds its executor: what was handed over behind it is cancelled when the pool closes."""
    pool = ProcessWorkerPool(1)
    pool.submit(_sleep, 60.0, worker=0)
    pool.flush()
    for _ in range(3):
        pool.submit(noop, None, worker=0)
        pool.flush()
    time.sleep(0.2)
    pool.close()
    deadline = time.monotonic() + 5.0  # the executor's manager thread cancels them, after shutdown() returned
    while pool.records[-1].error is None and time.monotonic() < deadline:
        time.sleep(0.01)
    errors = [r.error for r in pool.records]
    assert errors[-1] == "CancelledError: cancelled when the pool closed", errors
