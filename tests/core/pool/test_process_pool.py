"""The process pool's parts that need no worker: its caps, shared arrays and barriers, batch results, and the
guards around forking."""

import os
import signal
import threading
import types
from concurrent.futures import Future, process

import numpy as np
import pytest

from nxgates.core import memory
from nxgates.core.cpus import auto_workers
from nxgates.core.pool import ProcessWorkerPool, check_workers, forked, max_process_workers
from nxgates.core.pool.shared import TaskRecord
from nxgates.errors import ConfigError, ResourceError

MIB = 1 << 20


@pytest.mark.parametrize(("cpus", "available", "expected"), [
    (2, 64 << 30, 16),  # by CPUs: 8 per CPU
    (3, 64 << 30, 24),
    (2, 1200 * MIB, 9),  # by memory: half of it, 64 MiB per worker, rounded down
    (2, 2048 * MIB, 16),
    (2, 100 * MIB, 2),  # never fewer than two
])
def test_process_workers_are_capped_by_cpus_then_memory(monkeypatch, cpus, available, expected):
    monkeypatch.setattr(forked, "auto_workers", lambda: cpus)
    monkeypatch.setattr(memory, "available_bytes", lambda: available)
    cap = max_process_workers()
    assert cap == expected and type(cap) is int


def test_too_many_process_workers_is_a_usage_error_naming_the_cap(monkeypatch):
    monkeypatch.setattr(forked, "max_process_workers", lambda: 16)
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
    monkeypatch.setattr(forked, "max_process_workers", lambda: 3)
    with pytest.raises(ConfigError, match="workers=4 .*at most 3"):
        ProcessWorkerPool(4)


def test_each_worker_is_one_forked_process_started_quietly():
    import multiprocessing

    with ProcessWorkerPool(3) as pool:
        assert pool.kind == "process" and pool._mp is multiprocessing.get_context("fork")
        assert pool.n_workers == 3 and len(pool._executors) == 3
        ex = pool._executors[1]
        assert ex._max_workers == 1 and ex._mp_context is pool._mp
        assert ex._initializer is forked._quiet_worker and ex._initargs == (os.getpid(),)
        assert pool._queued == {} and pool._pending == {} and pool._retired == ([], [])
        assert pool._workers() == ([], [None, None, None])  # nothing forked before the first batch
    with ProcessWorkerPool() as pool:
        assert pool.n_workers == auto_workers()


def test_shared_arrays_are_zeroed_shared_memory_of_the_asked_shape():
    with ProcessWorkerPool(2) as pool:
        a = pool.array((2, 3))
        assert a.shape == (2, 3) and a.dtype == np.float32 and not a.any()
        b = pool.array((5,), np.int64)
        assert b.shape == (5,) and b.dtype == np.int64 and b.base is not None
        assert pool.array((0, 4)).shape == (0, 4)
        assert pool.array(()).shape == ()
        b[:] = 7
        assert b.tolist() == [7] * 5


def test_arrays_and_barriers_and_shared_objects_must_come_before_the_first_task():
    with ProcessWorkerPool(2) as pool:
        barrier = pool.barrier(3, timeout=2.5)
        assert barrier.parties == 3 and barrier._timeout == 2.5
        pool.submit(noop, 0)
        with pytest.raises(RuntimeError) as err:
            pool.array((2,))
        assert str(err.value) == "shared arrays must be made before the first task starts the workers"
        with pytest.raises(RuntimeError) as err:
            pool.barrier(2, timeout=1)
        assert str(err.value) == "a barrier must be made before the first task starts the workers"
        with pytest.raises(RuntimeError) as err:
            pool.share(1)
        assert str(err.value) == "objects must be shared before the first task starts the workers"
        assert pool.wait(1, timeout=60).reached


def noop(ctx, worker):
    return ctx


def which_worker(ctx, worker):
    return ctx, worker, os.getpid()


def test_each_batch_runs_in_its_own_worker_process_with_its_worker_number():
    got = []
    with ProcessWorkerPool(2) as pool:
        for b in range(4):
            pool.submit(which_worker, b, on_result=got.append)
        assert pool.wait(4, timeout=60).reached
    assert sorted((ctx, worker) for ctx, worker, _ in got) == [(0, 0), (1, 1), (2, 0), (3, 1)]
    pids = {worker: {pid for _, w, pid in got if w == worker} for worker in (0, 1)}
    assert len(pids[0]) == len(pids[1]) == 1 and pids[0] != pids[1] and os.getpid() not in pids[0] | pids[1]


def test_tasks_queue_per_worker_until_flushed():
    with ProcessWorkerPool(2) as pool:
        for b in range(3):
            pool.submit(noop, b)
        assert sorted(pool._queued) == [0, 1]
        assert [[(fn, ctx) for fn, ctx, _, _ in items] for _, items in sorted(pool._queued.items())] == [
            [(noop, 0), (noop, 2)], [(noop, 1)]]
        assert pool.wait(3, timeout=60).reached and pool._queued == {} and pool._pending == {}


def test_a_finished_batch_delivers_each_outcome_to_its_task():
    got = []
    with ProcessWorkerPool(2) as pool:
        records = [TaskRecord(0, 0, "a"), TaskRecord(1, 0, "b"), TaskRecord(2, 0, "c")]
        items = [(noop, None, records[0], got.append), (noop, None, records[1], got.append),
                 (noop, None, records[2], None)]
        future = Future()
        pool._pending[future] = (0, items)
        pool._in_flight = 3
        future.set_result([(None, 5), (ValueError("bad"), None), (None, 6)])
        pool._finish_batch(items, future)
        assert got == [5] and pool._pending == {} and pool._in_flight == 0
        assert [(r.done, r.error) for r in records] == [(True, None), (True, "ValueError: bad"), (True, None)]
        assert (pool._completed, pool._failed) == (2, 1)


def test_a_cancelled_batch_fails_each_of_its_tasks():
    with ProcessWorkerPool(2) as pool:
        records = [TaskRecord(0, 0, "a"), TaskRecord(1, 0, "b")]
        items = [(noop, None, r, None) for r in records]
        future = Future()
        future.cancel()
        pool._in_flight = 2
        pool._finish_batch(items, future)
        assert [r.error for r in records] == ["CancelledError: cancelled when the pool closed"] * 2


def test_manager_thread_failures_are_recorded_and_other_threads_passed_on(monkeypatch):
    passed = []
    monkeypatch.setattr(threading, "excepthook", passed.append)
    forked._watch_manager_threads()
    hook = threading.excepthook
    assert hook is not passed.append and hook.nxgates_manager_hook is True
    forked._watch_manager_threads()
    assert threading.excepthook is hook  # installed once
    manager = process._ExecutorManagerThread.__new__(process._ExecutorManagerThread)
    failure = RuntimeError("can't start new thread")
    hook(threading.ExceptHookArgs((RuntimeError, failure, None, manager)))
    assert forked._MANAGER_FAILURES[manager] is failure and passed == []
    other = threading.ExceptHookArgs((KeyError, KeyError("x"), None, threading.current_thread()))
    hook(other)
    assert passed == [other]


def blocked_stop_signals():
    return set(signal.pthread_sigmask(signal.SIG_BLOCK, [])) & {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


def test_stop_signals_are_held_while_forking_in_the_main_thread():
    assert forked.STOP_SIGNALS == (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    before = blocked_stop_signals()
    with forked._stop_signals_deferred():
        assert blocked_stop_signals() == {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    assert blocked_stop_signals() == before


def test_off_the_main_thread_stop_signals_are_not_held():
    seen = []

    def body():
        with forked._stop_signals_deferred():
            seen.append(blocked_stop_signals())

    t = threading.Thread(target=body)
    t.start()
    t.join(5)
    assert seen == [set()]


def test_a_batch_whose_outcomes_do_not_match_its_tasks_is_refused():
    with ProcessWorkerPool(2) as pool:
        items = [(noop, None, TaskRecord(0, 0, "a"), None), (noop, None, TaskRecord(1, 0, "b"), None)]
        future = Future()
        future.set_result([(None, 1)])
        pool._in_flight = 2
        with pytest.raises(ValueError, match="zip"):
            pool._finish_batch(items, future)


def test_workers_are_forked_whatever_the_default_start_method():
    import multiprocessing

    previous = multiprocessing.get_start_method(allow_none=True)
    multiprocessing.set_start_method("spawn", force=True)
    try:
        with ProcessWorkerPool(2) as pool:
            fork = multiprocessing.get_context("fork")
            assert pool._mp is fork and all(ex._mp_context is fork for ex in pool._executors)
    finally:
        multiprocessing.set_start_method(previous, force=True)


def test_shared_arrays_of_numpy_sized_shapes():
    with ProcessWorkerPool(2) as pool:
        a = pool.array((np.int64(3), 2), np.float64)
        assert a.shape == (3, 2) and a.dtype == np.float64 and a.nbytes == 48


class EndedThread:
    def is_alive(self):
        return False


def test_batches_of_a_manager_thread_that_ended_fail_with_its_reason():
    with ProcessWorkerPool(2) as pool:
        ended = EndedThread()
        real = pool._executors
        alive = threading.current_thread()
        pool._executors = [types.SimpleNamespace(_executor_manager_thread=t, _processes={})
                           for t in (alive, ended, ended)]
        forked._MANAGER_FAILURES[ended] = ValueError("boom")
        records = [TaskRecord(0, 0, "a"), TaskRecord(1, 1, "b"), TaskRecord(2, 2, "c")]
        futures = [Future(), Future(), Future()]
        pool._pending = {f: (w, [(noop, None, records[w], None)]) for w, f in enumerate(futures)}
        pool._in_flight = 3
        pool._check_alive()
        assert list(pool._pending) == [futures[0]] and pool._in_flight == 1
        assert [r.error for r in records] == [None] + ["the pool's manager thread ended: ValueError('boom')"] * 2
        pool._executors = real


def test_a_manager_thread_the_system_refused_is_a_resource_error():
    with ProcessWorkerPool(2) as pool:
        ended = EndedThread()
        real = pool._executors
        pool._executors = [types.SimpleNamespace(_executor_manager_thread=ended, _processes={})] * 2
        forked._MANAGER_FAILURES[ended] = MemoryError("no stack")
        pool._pending = {Future(): (0, [(noop, None, TaskRecord(0, 0, "a"), None)])}
        with pytest.raises(ResourceError) as err:
            pool._check_alive()
        assert str(err.value) == ("the system refused the process pool a thread (MemoryError: no stack; a tight "
                                  "ulimit -v leaves no room for thread stacks); raise the limit or use fewer workers")
        pool._executors = real
