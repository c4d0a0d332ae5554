"""The thread pool, exactly: dealing, records, counts, waiting, results handed back, registered objects, closing
quietly."""

import logging
import threading
import types
from concurrent.futures import CancelledError, Future

import numpy as np
import pytest

from nxgates.core.cpus import auto_workers
from nxgates.core.pool import ThreadWorkerPool, resolve
from nxgates.core.pool.interface import TaskRecord, WaitResult
from nxgates.core.pool.local import future_error


def scaled(ctx, worker):
    return ctx * 10 + worker


def on_which_thread(ctx, worker):
    return threading.current_thread().name


def fail_on_odd(ctx, worker):
    if ctx % 2:
        raise ValueError(f"odd {ctx}")
    return ctx


def test_a_new_pool_is_empty_with_one_executor_per_worker():
    with ThreadWorkerPool(3) as pool:
        assert pool.n_workers == 3 and len(pool._executors) == 3
        assert pool.records == [] and pool.started is False and pool.n_submitted == 0 and pool.n_completed() == 0
        assert (pool._completed, pool._failed, pool.in_flight) == (0, 0, 0)
        assert pool.kind == "thread" and pool.remote is False
        assert pool.health([]) == ([], {})
    with ThreadWorkerPool() as pool:
        assert pool.n_workers == auto_workers() == len(pool._executors)


def test_tasks_are_dealt_round_robin_to_named_worker_threads():
    values = {}
    with ThreadWorkerPool(3) as pool:
        assert [pool.worker_for(t) for t in range(7)] == [0, 1, 2, 0, 1, 2, 0]
        for b in range(6):
            assert pool.submit(on_which_thread, b, on_result=lambda v, b=b: values.__setitem__(b, v)) == b
        assert pool.wait(6, timeout=30) == WaitResult(True, False, 6)
        assert [r.worker for r in pool.records] == [0, 1, 2, 0, 1, 2]
        assert [values[b].startswith(f"nxgates-worker{b % 3}_") for b in range(6)] == [True] * 6
        assert pool.workers_used(pool.records) == {0, 1, 2}
        assert pool.tasks_per_worker(pool.records) == {"0": 2, "1": 2, "2": 2}


def test_a_task_gets_its_context_and_worker_and_its_value_reaches_on_result():
    got = []
    with ThreadWorkerPool(2) as pool:
        pool.submit(scaled, 4, on_result=got.append)
        pool.submit(scaled, 5, worker=0, on_result=got.append)
        pool.submit(scaled, 6)  # no on_result: the value is dropped
        assert pool.wait(3, timeout=30).reached
    assert sorted(got) == [40, 50]
    assert [(r.task, r.worker, r.label, r.done, r.error) for r in pool.records] == [
        (0, 0, "task 0", True, None), (1, 0, "task 1", True, None), (2, 0, "task 2", True, None)]


def test_submit_records_labels_numbers_and_the_start():
    release = threading.Event()
    with ThreadWorkerPool(2) as pool:
        assert pool.submit(lambda ctx, w: release.wait(10), None, label="first") == 0
        assert pool.started is True and pool.n_submitted == 1 and pool.in_flight == 1
        assert pool.submit(scaled, 1) == 1
        assert [r.label for r in pool.records] == ["first", "task 1"]
        release.set()
        assert pool.wait(2, timeout=30) == WaitResult(True, False, 2)
        assert pool.in_flight == 0 and pool.n_completed() == 2


def test_failures_are_recorded_with_their_type_and_counted_apart():
    with ThreadWorkerPool(2) as pool:
        for b in range(4):
            pool.submit(fail_on_odd, b)
        res = pool.wait(4, timeout=30)
        assert res == WaitResult(False, False, 4)
        assert [r.error for r in pool.records] == [None, "ValueError: odd 1", None, "ValueError: odd 3"]
        assert (pool._completed, pool._failed, pool.in_flight) == (2, 2, 0) and pool.n_completed() == 2
        assert pool.workers_used(pool.records) == {0}
        assert pool.tasks_per_worker(pool.records) == {"0": 2}


def test_a_failing_on_result_fails_its_task():
    def refuse(value):
        raise RuntimeError(f"cannot store {value}")

    with ThreadWorkerPool(1) as pool:
        pool.submit(scaled, 2, on_result=refuse)
        assert pool.wait(1, timeout=30) == WaitResult(False, False, 1)
        assert pool.records[0].error == "RuntimeError: cannot store 20"


class Holding(ThreadWorkerPool):
    """A thread pool that holds its tasks' records instead of running them, so a test delivers their outcomes."""

    def __init__(self, n_workers):
        super().__init__(n_workers)
        self.held = []

    def _dispatch(self, worker, fn, ctx, record, on_result):
        self.held.append(record)


def test_an_error_given_as_text_is_recorded_as_is():
    with Holding(1) as pool:
        pool.submit(scaled, 0, label="remote")
        (record,) = pool.held
        pool._deliver(record, "KilledWorker: lost", lambda: pytest.fail("no value for a failed task"), None)
        assert record.done and record.error == "KilledWorker: lost" and pool._failed == 1 and pool.in_flight == 0


def test_wait_stops_at_the_target_or_when_nothing_is_in_flight():
    release = threading.Event()
    with ThreadWorkerPool(2) as pool:
        assert pool.wait(0, timeout=None) == WaitResult(True, False, 0)
        assert pool.wait(3, timeout=None) == WaitResult(False, False, 0)  # nothing in flight: nothing to wait for
        pool.submit(scaled, 1)
        pool.submit(lambda ctx, w: release.wait(10), None)
        assert pool.wait(1, timeout=None) == WaitResult(True, False, pool._completed + pool._failed)
        assert pool.wait(2, timeout=0.2) == WaitResult(False, True, 1)
        assert pool.wait(2, timeout=0) == WaitResult(False, True, 1)
        release.set()
        assert pool.wait(2, timeout=None) == WaitResult(True, False, 2)


def test_wait_with_a_timeout_and_nothing_left_returns_at_once():
    with ThreadWorkerPool(1) as pool:
        pool.submit(fail_on_odd, 1)
        assert pool.wait(1, timeout=30) == WaitResult(False, False, 1)


class Refuses:
    def accepts(self, task):
        return task != 1


def test_a_task_not_accepted_is_recorded_and_never_runs():
    ran = []
    pool_class = type("RefusesWorkerPool", (Refuses, ThreadWorkerPool), {})
    with pool_class(2) as pool:
        for b in range(3):
            assert pool.submit(lambda ctx, w: ran.append(ctx), b) == b
        assert pool.wait(3, timeout=30) == WaitResult(False, False, 2)
        assert sorted(ran) == [0, 2] and [r.done for r in pool.records] == [True, False, True]
        assert pool.n_submitted == 3
    assert ThreadWorkerPool(1).accepts(7) is True


def test_arrays_and_barriers_for_threads():
    with ThreadWorkerPool(2) as pool:
        a = pool.array((2, 3))
        assert a.shape == (2, 3) and a.dtype == np.float32
        assert pool.array((4,), np.int64).dtype == np.int64
        barrier = pool.barrier(2, timeout=5)
        assert isinstance(barrier, threading.Barrier) and barrier.parties == 2 and barrier._timeout == 5
        other = threading.Thread(target=barrier.wait)
        other.start()
        barrier.wait()
        other.join(5)
        lonely = pool.barrier(2, timeout=0.05)
        with pytest.raises(threading.BrokenBarrierError):
            lonely.wait()


def test_registered_objects_are_reachable_until_the_pool_closes():
    pool = ThreadWorkerPool(1)
    first, second = pool.register({"a": 1}), pool.register([2])
    assert first != second and resolve(first) == {"a": 1} and resolve(second) == [2]
    assert pool._registered == [first, second]
    pool.submit(scaled, 0)
    third = pool.register("after start")  # threads share this memory: registering after the start is fine
    assert resolve(third) == "after start"
    pool.close()
    assert pool._registered == []
    for handle in (first, second, third):
        with pytest.raises(KeyError):
            resolve(handle)


def test_closing_an_idle_pool_joins_its_threads():
    pool = ThreadWorkerPool(2)
    pool.submit(scaled, 0)
    pool.submit(scaled, 1)
    pool.wait(2, timeout=30)
    threads = [t for t in threading.enumerate() if t.name.startswith("nxgates-worker")]
    with pool as entered:
        assert entered is pool
    assert all(ex._shutdown for ex in pool._executors)
    assert not any(t.is_alive() for ex in pool._executors for t in ex._threads)
    assert threads


def test_closing_a_busy_pool_cancels_what_is_queued_without_waiting():
    release = threading.Event()
    pool = ThreadWorkerPool(1)
    pool.submit(lambda ctx, w: release.wait(10), None)
    pool.submit(scaled, 1)
    pool.close()  # returns while the first task still runs
    assert pool.records[1].error == "CancelledError: cancelled when the pool closed"
    assert pool.records[0].done is False
    release.set()
    pool.wait(2, timeout=10)
    assert pool.records[0].done is True


def test_a_future_error_is_its_exception_or_a_cancellation():
    done = Future()
    done.set_result(1)
    assert future_error(done) is None
    failed = Future()
    failed.set_exception(KeyError("x"))
    assert isinstance(future_error(failed), KeyError)
    cancelled = Future()
    cancelled.cancel()
    error = future_error(cancelled)
    assert type(error) is CancelledError and str(error) == "cancelled when the pool closed"


def test_tasks_per_worker_counts_by_address_when_there_is_one():
    records = [TaskRecord(0, 0, "a", done=True, address="tcp://b:2"), TaskRecord(1, 1, "b", done=True),
               TaskRecord(2, 0, "c", done=True, address="tcp://a:1"), TaskRecord(3, 0, "d", done=True, error="x"),
               TaskRecord(4, 2, "e", done=False), TaskRecord(5, 0, "f", done=True, address="tcp://b:2")]
    with ThreadWorkerPool(1) as pool:
        assert list(pool.tasks_per_worker(records).items()) == [("1", 1), ("tcp://a:1", 1), ("tcp://b:2", 2)]
        assert pool.workers_used(records) == {0, 1}


class RecordingCondition(threading.Condition):
    """The pool's condition, recording how long each wait may last."""

    def __init__(self):
        super().__init__()
        self.waits = []

    def wait(self, timeout=None):
        self.waits.append(timeout)
        return super().wait(timeout)


class FakeClock:
    """monotonic() gives the listed times, then one second more at each call."""

    def __init__(self, *times):
        self.times = list(times)
        self.now = times[-1]

    def monotonic(self):
        if self.times:
            return self.times.pop(0)
        self.now += 1
        return self.now


def test_waits_are_short_never_past_the_deadline_and_count_failures(monkeypatch):
    from nxgates.core.pool import interface

    release = threading.Event()
    with ThreadWorkerPool(2) as pool:
        pool._cv = RecordingCondition()
        pool.submit(lambda ctx, w: release.wait(10), None)
        pool.submit(fail_on_odd, 1)
        while not pool.records[1].done:
            threading.Event().wait(0.01)
        clock = FakeClock(100.0, 102.0, 104.9, 105.0)
        monkeypatch.setattr(interface, "time", types.SimpleNamespace(monotonic=clock.monotonic))
        waits_before = len(pool._cv.waits)
        assert pool.wait(2, timeout=5) == WaitResult(False, True, 1)
        assert pool._cv.waits[waits_before:] == [0.25, pytest.approx(0.1)]
        release.set()


def test_a_deadline_less_than_a_second_away_is_still_waited_for(monkeypatch):
    from nxgates.core.pool import interface

    release = threading.Event()
    with ThreadWorkerPool(1) as pool:
        pool.submit(lambda ctx, w: release.wait(10), None)
        times = [100.0]  # the deadline is 105; from then on it is always 104.5

        def frozen():
            return times.pop(0) if times else 104.5

        monkeypatch.setattr(interface, "time", types.SimpleNamespace(monotonic=frozen))
        threading.Timer(0.3, release.set).start()
        assert pool.wait(1, timeout=5) == WaitResult(True, False, 1)


def test_without_a_timeout_waits_stay_short_until_the_target(monkeypatch):
    release = threading.Event()
    with ThreadWorkerPool(1) as pool:
        pool._cv = RecordingCondition()
        pool.submit(lambda ctx, w: release.wait(10), None)
        threading.Timer(0.6, release.set).start()
        assert pool.wait(1, timeout=None) == WaitResult(True, False, 1)
        assert pool._cv.waits and set(pool._cv.waits) == {0.25}


def test_tasks_cancelled_at_close_are_quiet(caplog):
    """Ctrl-C closes the pool with tasks queued: each is recorded as cancelled, none logs a traceback."""
    release = threading.Event()
    p = ThreadWorkerPool(1)
    p.submit(lambda ctx, w: release.wait(10), None)
    for b in range(5):
        p.submit(lambda ctx, w: None, b)
    with caplog.at_level(logging.DEBUG, logger="concurrent.futures"):
        p.close()
    release.set()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert [r.error for r in p.records[1:]] == ["CancelledError: cancelled when the pool closed"] * 5
