"""The process pool's scheduling: tasks queue per worker and go over as one batch a worker, forked at its
first; the thread that waits writes the batches and reads and delivers the answers (no helper thread), within
the wait's bounds; a batch or an answer that cannot be pickled fails its tasks; a pool that cannot fork
raises and cancels; arrays and barriers come before the first task."""

import errno
import fcntl
import os
import pickle
import signal
import struct
import sys
import termios
import threading
import time

import numpy as np
import pytest

from nxgates.core import pool
from nxgates.core.cpus import auto_workers
from nxgates.core.pool import ProcessWorkerPool
from nxgates.core.pool.forked import pool as forked_pool
from nxgates.core.pool.interface import CANCELLED
from tests.helpers import HoldingPool, started_workers


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
    return ctx


def which_worker(ctx, worker):
    return ctx, worker, os.getpid()


def test_nothing_is_made_before_the_first_batch_and_each_worker_is_one_forked_process():
    import multiprocessing

    with ProcessWorkerPool(3) as pool:
        assert pool.kind == "process" and pool._mp is multiprocessing.get_context("fork")
        assert pool.n_workers == 3 and [w.index for w in pool._executors] == [0, 1, 2]
        assert all(w.process is None and w.parent_fds() == () for w in pool._executors)  # no pipe, no fork
        pool.submit(noop, 0, worker=1)
        assert all(w.process is None for w in pool._executors)  # queued, not yet flushed
        pool.flush()
        started = pool._executors[1]
        assert [w.process is None for w in pool._executors] == [True, False, True]
        assert type(started.process) is multiprocessing.get_context("fork").Process
        assert started.forked_by == os.getpid() and started.process.name == "nxgates-worker1"
        assert len(started.parent_fds()) == 2 and all(not os.get_blocking(fd) for fd in started.parent_fds())
        assert pool.wait(1, timeout=60).reached
    with ProcessWorkerPool() as pool:
        assert pool.n_workers == auto_workers()


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
        assert pool.wait(3, timeout=60).reached and pool._queued == {}
        assert all(not w.unanswered and not w.unsent for w in pool._executors)


#: set after this module was imported: only a forked worker, a copy of this process, sees the new value
SET_AFTER_IMPORT = "as imported"


def set_after_import(ctx, worker):
    return SET_AFTER_IMPORT


def test_workers_are_forked_whatever_the_default_start_method(monkeypatch):
    import multiprocessing

    monkeypatch.setattr(sys.modules[__name__], "SET_AFTER_IMPORT", "set in the parent")
    previous = multiprocessing.get_start_method(allow_none=True)
    multiprocessing.set_start_method("spawn", force=True)
    got = []
    try:
        with ProcessWorkerPool(2) as pool:
            assert pool._mp is multiprocessing.get_context("fork")
            pool.submit(set_after_import, None, on_result=got.append)
            assert pool.wait(1, timeout=60).reached
    finally:
        multiprocessing.set_start_method(previous, force=True)
    assert got == ["set in the parent"]


# ---- memory the workers share: made before the first task -----------------------------------------------------------


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


def test_shared_arrays_of_numpy_sized_shapes():
    with ProcessWorkerPool(2) as pool:
        a = pool.array((np.int64(3), 2), np.float64)
        assert a.shape == (3, 2) and a.dtype == np.float64 and a.nbytes == 48


def test_arrays_and_barriers_and_registered_objects_must_come_before_the_first_task():
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
            pool.register(1)
        assert str(err.value) == "objects must be registered before the first task starts the workers"
        assert pool.wait(1, timeout=60).reached


# ---- waiting: no helper thread and the wait contract ----------------------------------------------------------------


def _sleep(ctx, worker):
    time.sleep(ctx)


def test_the_parent_runs_no_helper_thread():
    """Answers are read by the thread that waits: no thread wakes while the workers keep the cores busy."""
    seen = []
    before = set(threading.enumerate())
    with ProcessWorkerPool(2) as p:
        for b in range(6):
            p.submit(_double, b, on_result=lambda v: seen.append((v, set(threading.enumerate()) - before,
                                                                      threading.current_thread())))
        assert p.wait(6, 30).reached
        assert set(threading.enumerate()) <= before
    assert sorted(v for v, _, _ in seen) == [0, 2, 4, 6, 8, 10]
    assert all(new == set() and t is threading.current_thread() for _, new, t in seen)


def test_a_wait_returns_at_once_when_nothing_is_left_in_flight():
    """A task the pool never hands over (a subclass's accepts()) is lost: reported, not waited for."""

    class DropsSecond(ProcessWorkerPool):
        def accepts(self, task):
            return task != 1

    with DropsSecond(2) as p:
        for b in range(3):
            p.submit(noop, b)
        t0 = time.monotonic()
        waited = p.wait(3, 30)
        assert time.monotonic() - t0 < 10
        assert (waited.reached, waited.timed_out, waited.finished) == (False, False, 2)


def test_a_wait_is_bounded_by_its_timeout_and_sleeps_in_short_slices(monkeypatch):
    """A stuck task: the wait ends at its timeout, having slept at most 0.25 s at a time (Ctrl-C stays prompt)."""
    slices = []
    real_exchange = ProcessWorkerPool._exchange

    def exchange(self, seconds):
        slices.append(seconds)
        real_exchange(self, seconds)

    monkeypatch.setattr(ProcessWorkerPool, "_exchange", exchange)
    p = ProcessWorkerPool(1)
    try:
        p.submit(_sleep, 60.0)
        t0 = time.monotonic()
        waited = p.wait(1, 0.55)
        took = time.monotonic() - t0
        assert (waited.reached, waited.timed_out, waited.finished) == (False, True, 0)
        assert 0.5 <= took < 5
        assert len(slices) >= 3 and max(slices) <= 0.25
        slices.clear()
        assert p.wait(1, 0.0).timed_out and len(slices) == 1 and slices[0] == 0.0
    finally:
        p.close()


def test_a_wait_returns_once_its_target_is_reached_with_other_tasks_still_running():
    p = ProcessWorkerPool(2)
    try:
        p.submit(_sleep, 60.0, worker=1)
        p.submit(_double, 4, worker=0)
        t0 = time.monotonic()
        waited = p.wait(1, 20)
        assert (waited.reached, waited.timed_out, waited.finished) == (True, False, 1)
        assert time.monotonic() - t0 < 10
    finally:
        p.close()


def test_a_wait_sleeps_in_the_kernel_rather_than_spinning():
    """Waiting on a stuck task costs the waiting thread almost no CPU: a poll that returned at once would take
    a core from the workers while they run."""
    p = ProcessWorkerPool(1)
    try:
        p.submit(_sleep, 60.0)
        p.flush()
        cpu = time.thread_time()
        waited = p.wait(1, 0.6)
        used = time.thread_time() - cpu  # about 0.5 ms here; polling every millisecond spends some 20 ms
        assert waited.timed_out and used < 0.005, used
    finally:
        p.close()


def test_a_wait_with_no_time_left_still_takes_the_answers_that_are_there():
    with ProcessWorkerPool(1) as p:
        started_workers(p)
        p.submit(_double, 4)
        p.flush()
        deadline = time.monotonic() + 10
        while not p.wait(2, 0.0).reached:  # a caller polling without waiting
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert p.n_completed() == 2


def test_a_wait_without_a_timeout_is_stopped_promptly_by_a_signal():
    """Ctrl-C (here SIGALRM raising) ends a wait on a stuck task at once; closing then cancels the task."""

    class Stop(Exception):
        pass

    def stop(signum, frame):
        raise Stop

    previous = signal.signal(signal.SIGALRM, stop)
    p = ProcessWorkerPool(1)
    try:
        p.submit(_sleep, 60.0)
        signal.setitimer(signal.ITIMER_REAL, 0.1)
        t0 = time.monotonic()
        with pytest.raises(Stop):
            p.wait(1, None)
        assert time.monotonic() - t0 < 2
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        p.close()
    assert p.records[0].error == CANCELLED and p.in_flight == 0


def big_result(ctx, worker):
    return b"r" * ctx


def filling(fd, limit=30.0):
    """Wait until the pipe read at ``fd`` is half full (of what F_GETPIPE_SZ says it takes): its writer, with
    far more than that to write, is blocked on it or about to be."""
    size = fcntl.fcntl(fd, 1032)  # F_GETPIPE_SZ
    for _ in range(int(limit / 0.005)):
        if struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0" * 4))[0] >= size // 2:
            return
        time.sleep(0.005)
    pytest.fail(f"the pipe did not fill within {limit} s")


def test_a_large_batch_and_a_large_answer_at_once_do_not_deadlock():
    """The worker writes a large answer while the parent writes a large batch to it: the parent writes only
    what the pipe takes and reads meanwhile, so neither waits on the other for ever."""

    class Hung(Exception):
        pass

    def hung(signum, frame):
        raise Hung

    size = 4 << 20  # far more than a pipe holds, either way
    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(60)
    try:
        with ProcessWorkerPool(1) as p:
            got = []
            p.submit(big_result, size, on_result=lambda v: got.append(len(v)))
            p.flush()
            filling(p._executors[0].answer_fd)  # the worker is writing its answer, soon blocked on the pipe
            p.submit(big_result, size, on_result=lambda v: got.append(len(v)))
            p.submit(noop, b"b" * size)
            p.flush()  # returns although the pipe cannot take the batch now
            assert p._executors[0].unsent
            assert p.wait(3, 30).reached and got == [size, size]
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


# ---- delivering answers ---------------------------------------------------------------------------------------------


def items_for(records, on_result=None):
    return [(noop, None, r, on_result) for r in records]


def in_flight(pool, n):
    """``n`` tasks submitted and held; their records."""
    pool.held = []
    for _ in range(n):
        pool.submit(noop, None, worker=0)
    return pool.held


def test_a_delivered_batch_gives_each_outcome_to_its_task_in_order():
    got = []
    with HoldingPool(2) as pool:
        records = in_flight(pool, 3)
        items = items_for(records[:2], got.append) + items_for(records[2:])
        pool._deliver_batch(items, [(None, 5), ("ValueError: bad", None), (None, 6)])
        assert got == [5] and pool.in_flight == 0
        assert [(r.done, r.error) for r in records] == [(True, None), (True, "ValueError: bad"), (True, None)]
        assert (pool._completed, pool._failed) == (2, 1)


def test_a_batch_answered_with_one_reason_fails_each_of_its_tasks_with_it():
    with HoldingPool(2) as pool:
        records = in_flight(pool, 2)
        pool._deliver_batch(items_for(records), "SystemExit: 3")
        assert [r.error for r in records] == ["SystemExit: 3"] * 2 and pool.in_flight == 0


def test_a_batch_whose_outcomes_do_not_match_its_tasks_is_refused_and_none_stays_in_flight():
    with HoldingPool(2) as pool:
        records = in_flight(pool, 2)
        with pytest.raises(ValueError, match="zip"):
            pool._deliver_batch(items_for(records), [(None, 1)])
        assert [r.error for r in records] == [None, CANCELLED] and pool.in_flight == 0


def test_delivering_stopped_by_ctrl_c_cancels_the_tasks_not_yet_delivered():
    """A stop raised in an ``on_result`` leaves no task in flight for ever: the rest are cancelled."""
    got = []

    def on_result(value):
        if value == 2:
            raise KeyboardInterrupt
        got.append(value)

    with HoldingPool(2) as pool:
        records = in_flight(pool, 4)
        with pytest.raises(KeyboardInterrupt):
            pool._deliver_batch(items_for(records, on_result), [(None, n + 1) for n in range(4)])
        assert got == [1] and pool.in_flight == 0
        assert [r.error for r in records] == [None, CANCELLED, CANCELLED, CANCELLED]


def frames(*payloads: bytes) -> bytes:
    return b"".join(struct.pack("<Q", len(p)) + p for p in payloads)


def test_an_answer_that_cannot_be_unpickled_fails_its_batch():
    with HoldingPool(1) as pool:
        worker = pool._executors[0]
        records = in_flight(pool, 2)
        worker.unanswered.append(items_for(records))
        read_end, write_end = os.pipe()
        os.set_blocking(read_end, False)
        worker.answer_fd = read_end
        os.write(write_end, frames(b"not a pickle", pickle.dumps([])))
        os.close(write_end)
        worker.unanswered.append([])
        pool._take_answers(worker)
        assert {r.error for r in records} == {"the worker's answer cannot be unpickled: UnpicklingError: "
                                              "invalid load key, 'n'."}
        assert not worker.unanswered
        os.close(read_end)
        worker.answer_fd = -1


# ---- what cannot be handed over -------------------------------------------------------------------------------------


def unpicklable_ctx():
    return threading.Lock()


def test_a_batch_that_cannot_be_pickled_fails_its_tasks_and_does_not_raise():
    with ProcessWorkerPool(2) as pool:
        pool.submit(noop, unpicklable_ctx(), worker=0)
        pool.submit(noop, 1, worker=0)
        pool.submit(noop, 2, worker=1)
        waited = pool.wait(3, timeout=60)
        assert not waited.reached and waited.finished == 3
        assert [r.error for r in pool.records] == ["TypeError: cannot pickle '_thread.lock' object"] * 2 + [None]
        assert pool._executors[0].process is None  # nothing to send: not forked


def test_no_memory_to_pickle_a_batch_is_this_machines_limit_not_the_tasks_fault(monkeypatch):
    def no_memory(obj, protocol=None):
        raise MemoryError

    with ProcessWorkerPool(1) as pool:
        pool.submit(noop, 1)
        monkeypatch.setattr(forked_pool.pickle, "dumps", no_memory)
        with pytest.raises(MemoryError):
            pool.flush()
        monkeypatch.undo()
    assert pool.records[0].error == CANCELLED


def test_tasks_for_a_retired_pool_fail_saying_so():
    with ProcessWorkerPool(2) as pool:
        pool.retire()
        pool.submit(noop, 1)
        waited = pool.wait(1, timeout=60)
        assert not waited.reached and pool.records[0].error == "the pool was retired: it takes no more tasks"


def test_tasks_for_a_closed_pool_are_cancelled():
    pool = ProcessWorkerPool(1)
    pool.submit(noop, 1)
    assert pool.wait(1, timeout=60).reached
    pool.close()
    pool.submit(noop, 2)
    waited = pool.wait(2, timeout=60)
    assert not waited.reached and waited.finished == 2 and pool.records[1].error == CANCELLED


@pytest.mark.parametrize("refused", ["second pipe", "fork"])
def test_a_refused_pipe_or_fork_raises_leaves_nothing_open_and_the_tasks_are_cancelled(monkeypatch, refused):
    """EMFILE (ulimit -n) or EAGAIN (ulimit -u) reaches the runner, which reports this machine's limit (exit 2)."""
    import multiprocessing.process

    real_pipe, pipes = os.pipe, []

    def pipe():  # the pool's claim pipe, then the worker's two
        if refused == "second pipe" and len(pipes) == 2:
            raise OSError(errno.EMFILE, "Too many open files")
        pipes.append(real_pipe())
        return pipes[-1]

    def start(self):
        raise OSError(errno.EAGAIN, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "pipe", pipe)
    if refused == "fork":
        monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", start)
    pool = ProcessWorkerPool(2)
    pool.submit(noop, 1)
    with pytest.raises(OSError) as err:
        pool.wait(1, timeout=60)
    assert err.value.errno == (errno.EMFILE if refused == "second pipe" else errno.EAGAIN)
    for fd in (fd for p in pipes for fd in p):
        with pytest.raises(OSError):
            os.fstat(fd)
    assert pool._executors[0].process is None and sorted(pool._queued) == [0]
    pool.close()
    assert pool.records[0].error == CANCELLED and pool.in_flight == 0


def test_a_pool_whose_fork_was_refused_forks_and_shares_tasks_once_it_can(monkeypatch):
    """The claim pipe made for the refused fork was closed with it; the next fork makes another."""
    real_pipe = os.pipe

    def pipe():
        monkeypatch.setattr(os, "pipe", real_pipe)  # refuse once: the worker's first pipe, after the claim pipe's
        raise OSError(errno.EMFILE, "Too many open files")

    with ProcessWorkerPool(2) as pool:
        pool._claim_pipe.ends()
        monkeypatch.setattr(os, "pipe", pipe)
        pool.submit(noop, 1)
        with pytest.raises(OSError):
            pool.wait(1, timeout=60)
        assert pool._claim_pipe.fds is None
        pool.submit(noop, 2)
        for n in range(4):
            pool.submit(noop, n, movable=True)
        assert pool.wait(6, timeout=60).reached
