"""The worker pool: completion counts, distinct workers, task errors, bounded waits, its override points (and
parallel-grad's pool faults, planted through them)."""

import threading
import time

import numpy as np
import pytest

from nxgates.core.pool import ProcessWorkerPool, WorkerPool, auto_workers, make_pool, resolve
from nxgates.gates.parallel_grad.faults import DropTask, SingleWorker


def noop(ctx, worker):
    return None


def boom(ctx, worker):
    if ctx == 2:
        raise ValueError("example 2 exploded")


def test_auto_workers_is_at_least_two():
    assert auto_workers() >= 2
    assert WorkerPool(0).n_workers == auto_workers()


@pytest.mark.parametrize("kind", ["thread", "process"])
def test_all_tasks_complete_on_distinct_workers(kind):
    with make_pool(kind, 2) as pool:
        for b in range(8):
            pool.submit(noop, b, label=f"example {b}")
        res = pool.wait(8, timeout=30)
        assert res.reached and not res.timed_out
        assert pool.n_completed() == 8
        assert pool.workers_used(pool.records) == {0, 1}
        assert [r.worker for r in pool.records] == [0, 1] * 4


def test_process_workers_write_shared_arrays():
    with ProcessWorkerPool(2) as pool:
        arr = pool.array((6,), np.int64)
        arr[...] = -1
        handle = pool.share(arr)  # reached by the forked workers; only the handle is pickled
        for i in range(6):
            pool.submit(_write_shared, (handle, i))
        pool.wait(6, timeout=30)
    assert arr.tolist() == [0, 1, 0, 1, 0, 1]


def _write_shared(ctx, worker):
    handle, i = ctx
    resolve(handle)[i] = worker


def test_process_pool_refuses_arrays_after_start():
    with ProcessWorkerPool(2) as pool:
        pool.submit(noop, 0)
        pool.wait(1, timeout=30)
        with pytest.raises(RuntimeError):
            pool.array((2,))


@pytest.mark.parametrize("kind", ["thread", "process"])
def test_a_raising_task_is_recorded_and_does_not_hang(kind):
    with make_pool(kind, 2) as pool:
        for b in range(4):
            pool.submit(boom, b, label=f"example {b}")
        res = pool.wait(4, timeout=30)
        assert not res.reached and not res.timed_out and res.finished == 4
        (bad,) = [r for r in pool.records if r.error]
        assert bad.label == "example 2" and "example 2 exploded" in bad.error
        assert pool.n_completed() == 3


def test_wait_is_bounded_by_its_timeout():
    release = threading.Event()
    with WorkerPool(2) as pool:
        pool.submit(lambda ctx, w: release.wait(10), None)
        t0 = time.monotonic()
        res = pool.wait(1, timeout=0.3)
        assert res.timed_out and not res.reached
        assert time.monotonic() - t0 < 2
        release.set()


class OnWorker0:
    def worker_for(self, task):
        return 0


class RefusesTask3:
    def accepts(self, task):
        return task != 3


@pytest.mark.parametrize("kind", ["thread", "process"])
def test_a_class_in_front_of_the_pool_overrides_where_tasks_go(kind):
    with make_pool(kind, 2, OnWorker0) as pool:
        assert isinstance(pool, WorkerPool) and pool.kind == kind
        for b in range(6):
            pool.submit(noop, b)
        assert pool.wait(6, timeout=30).reached
        assert pool.workers_used(pool.records) == {0}


def test_a_task_the_pool_does_not_accept_is_recorded_and_never_runs():
    with make_pool("process", 2, RefusesTask3) as pool:
        for b in range(5):
            pool.submit(noop, b, label=f"example {b}")
        res = pool.wait(5, timeout=60)
        assert not res.reached and not res.timed_out
        assert [r.label for r in pool.records if not r.done] == ["example 3"]


def test_single_worker_fault_puts_everything_on_worker_0():
    with make_pool("thread", 2, SingleWorker) as pool:
        for b in range(6):
            pool.submit(noop, b)
        assert pool.wait(6, timeout=30).reached
        assert pool.workers_used(pool.records) == {0}


def test_dropped_task_is_reported_at_once_not_waited_for():
    with make_pool("thread", 2, DropTask) as pool:
        for b in range(8):
            pool.submit(noop, b, label=f"example {b}")
        t0 = time.monotonic()
        res = pool.wait(8, timeout=60)
        assert time.monotonic() - t0 < 5
        assert not res.reached and not res.timed_out
        assert [r.label for r in pool.records if not r.done] == ["example 3"]


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
