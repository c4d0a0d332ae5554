"""The pool interface on the local executors (threads and forked processes): completion counts, distinct
workers, task errors, bounded waits, what is in flight, its override points, its records."""

import threading
import time

import numpy as np
import pytest

from nxgates.core.pool import Pool, ProcessWorkerPool, ThreadWorkerPool, auto_workers, make_pool, resolve
from nxgates.core.pool.interface import TaskRecord, WaitResult


def noop(ctx, worker):
    return None


def boom(ctx, worker):
    if ctx == 2:
        raise ValueError("example 2 exploded")


def test_auto_workers_is_at_least_two():
    assert auto_workers() >= 2
    assert ThreadWorkerPool(0).n_workers == auto_workers()


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
        handle = pool.register(arr)  # reached by the forked workers; only the handle is pickled
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
    with ThreadWorkerPool(2) as pool:
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
        assert isinstance(pool, Pool) and pool.kind == kind
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


@pytest.mark.parametrize("kind", ["thread", "process"])
def test_what_is_in_flight_is_what_was_handed_over_and_has_not_ended(kind):
    """(Threads wait for a release; a process pool's tasks wait in its queue until the wait flushes them.)"""
    release = threading.Event()
    task = (lambda ctx, w: release.wait(10)) if kind == "thread" else noop
    with make_pool(kind, 2, RefusesTask3) as pool:
        assert pool.in_flight == 0
        for b in range(4):
            pool.submit(task, b)
        assert pool.in_flight == 3  # task 3 was never handed over
        release.set()
        assert pool.wait(4, timeout=60).finished == 3 and pool.in_flight == 0
        with pytest.raises(AttributeError):
            pool.in_flight = 1  # read only


def test_the_interface_leaves_how_tasks_run_to_an_executor():
    class Bare(Pool):
        def _make_executor(self, worker):
            return None

    pool = Bare(1)
    for call in (lambda: pool.submit(noop, 0), lambda: pool.array((1,)), lambda: pool.barrier(1, 1.0)):
        with pytest.raises(NotImplementedError):
            call()
    with pytest.raises(NotImplementedError):
        Pool(1)


def test_records_and_wait_results_start_as_declared():
    record = TaskRecord(3, 1, "example 3")
    assert (record.task, record.worker, record.label) == (3, 1, "example 3")
    assert record.done is False and record.error is None and record.address == ""
    assert WaitResult(True, False, 4) == WaitResult(reached=True, timed_out=False, finished=4)
