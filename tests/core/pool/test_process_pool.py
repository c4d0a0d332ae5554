"""The process pool's parts that need little or no worker: its caps, shared arrays and barriers, the parent's
side of the transport (framing, partial writes, delivering answers), and the guards around forking."""

import contextlib
import errno
import os
import pickle
import signal
import struct
import sys
import threading

import numpy as np
import pytest

from nxgates.core import memory
from nxgates.core.cpus import auto_workers
from nxgates.core.pool import ProcessWorkerPool, check_workers, forked, max_process_workers
from nxgates.core.pool.forked import CANCELLED, ForkedWorker
from nxgates.core.pool.shared import TaskRecord
from nxgates.errors import ConfigError

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
        assert pool.wait(3, timeout=60).reached and pool._queued == {}
        assert all(not w.unanswered and not w.unsent for w in pool._executors)


def items_for(records, on_result=None):
    return [(noop, None, r, on_result) for r in records]


def in_flight(pool, records):
    pool._in_flight += len(records)
    return records


def test_a_delivered_batch_gives_each_outcome_to_its_task_in_order():
    got = []
    with ProcessWorkerPool(2) as pool:
        records = in_flight(pool, [TaskRecord(0, 0, "a"), TaskRecord(1, 0, "b"), TaskRecord(2, 0, "c")])
        items = items_for(records[:2], got.append) + items_for(records[2:])
        pool._deliver_batch(items, [(None, 5), ("ValueError: bad", None), (None, 6)])
        assert got == [5] and pool._in_flight == 0
        assert [(r.done, r.error) for r in records] == [(True, None), (True, "ValueError: bad"), (True, None)]
        assert (pool._completed, pool._failed) == (2, 1)


def test_a_batch_answered_with_one_reason_fails_each_of_its_tasks_with_it():
    with ProcessWorkerPool(2) as pool:
        records = in_flight(pool, [TaskRecord(0, 0, "a"), TaskRecord(1, 0, "b")])
        pool._deliver_batch(items_for(records), "SystemExit: 3")
        assert [r.error for r in records] == ["SystemExit: 3"] * 2 and pool._in_flight == 0


def test_a_batch_whose_outcomes_do_not_match_its_tasks_is_refused_and_none_stays_in_flight():
    with ProcessWorkerPool(2) as pool:
        records = in_flight(pool, [TaskRecord(0, 0, "a"), TaskRecord(1, 0, "b")])
        with pytest.raises(ValueError, match="zip"):
            pool._deliver_batch(items_for(records), [(None, 1)])
        assert [r.error for r in records] == [None, CANCELLED] and pool._in_flight == 0


def test_delivering_stopped_by_ctrl_c_cancels_the_tasks_not_yet_delivered():
    """A stop raised in an ``on_result`` leaves no task in flight for ever: the rest are cancelled."""
    got = []

    def on_result(value):
        if value == 2:
            raise KeyboardInterrupt
        got.append(value)

    with ProcessWorkerPool(2) as pool:
        records = in_flight(pool, [TaskRecord(n, 0, str(n)) for n in range(4)])
        with pytest.raises(KeyboardInterrupt):
            pool._deliver_batch(items_for(records, on_result), [(None, n + 1) for n in range(4)])
        assert got == [1] and pool._in_flight == 0
        assert [r.error for r in records] == [None, CANCELLED, CANCELLED, CANCELLED]


@pytest.mark.parametrize(("exitcode", "how"), [
    (-9, "exit code -9, SIGKILL"), (-15, "exit code -15, SIGTERM"), (3, "exit code 3"), (0, "exit code 0"),
    (None, "exit code unknown"), (-200, "exit code -200")])
def test_a_lost_workers_tasks_are_told_which_worker_and_its_exit_code(exitcode, how):
    assert forked._ended_reason(2, exitcode) == f"worker 2's process ended ({how}) before answering its tasks"


def frames(*payloads: bytes) -> bytes:
    return b"".join(struct.pack("<Q", len(p)) + p for p in payloads)


@pytest.fixture
def answer_pipe():
    """A worker as the parent sees it, whose answer pipe the test writes."""
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    worker = ForkedWorker(0)
    worker.answer_fd = read_end
    yield worker, write_end
    for fd in (read_end, write_end):
        with contextlib.suppress(OSError):
            os.close(fd)


def test_answers_are_cut_out_of_the_pipe_whole_whatever_the_pieces(answer_pipe):
    worker, write_end = answer_pipe
    data = frames(b"first", b"", b"third" * 20)
    os.write(write_end, data[:3])
    assert worker.receive() == []  # not even a length yet
    os.write(write_end, data[3:21])  # the first two frames (13 and 8 bytes)
    assert worker.receive() == [b"first", b""]
    os.write(write_end, data[21:])
    assert worker.receive() == [b"third" * 20] and worker.received == bytearray()
    assert worker.receive() == [] and not worker.answers_ended


def test_an_answer_longer_than_one_read_is_read_whole(answer_pipe):
    worker, write_end = answer_pipe
    long = bytes(range(256)) * 1000
    data = frames(long)
    got = []
    threading.Thread(target=lambda: (os.write(write_end, data), os.close(write_end))).start()
    while not worker.answers_ended:
        got += worker.receive(until_end=True)
    assert got == [long]


def test_the_end_of_the_answer_pipe_is_noticed(answer_pipe):
    worker, write_end = answer_pipe
    os.write(write_end, frames(b"last") + b"\x09")
    os.close(write_end)
    assert worker.receive(until_end=True) == [b"last"]
    assert worker.answers_ended and worker.received == bytearray(b"\x09")


def test_the_parent_writes_what_a_pipe_takes_and_never_blocks():
    """A batch longer than the pipe holds: what does not fit now waits for the next chance, in order."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    worker = ForkedWorker(0)
    worker.task_fd = write_end
    try:
        payload = os.urandom(200_000)
        worker.send(payload)  # returns at once: the pipe holds 64 KiB
        assert worker.unsent
        worker.send(b"second")
        received = b""
        while worker.unsent:
            received += os.read(read_end, 1 << 20)
            worker.send_some()
        received += os.read(read_end, 1 << 20)
        assert received == frames(payload, b"second")
    finally:
        os.close(read_end)
        os.close(write_end)


def test_writing_to_a_worker_that_is_gone_drops_what_was_unsent():
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    os.close(read_end)
    worker = ForkedWorker(0)
    worker.task_fd = write_end
    try:
        worker.send(b"batch")  # EPIPE: no exception, nothing left to write; the sentinel says why
        assert not worker.unsent
    finally:
        os.close(write_end)


def test_the_stop_frame_is_queued_once_and_only_for_a_worker_that_runs():
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    worker = ForkedWorker(0)
    worker.ask_to_stop()
    assert not worker.stopping and not worker.unsent  # never forked: nothing to stop
    worker.process, worker.task_fd = object(), write_end
    try:
        worker.ask_to_stop()
        worker.ask_to_stop()
        assert worker.stopping and os.read(read_end, 100) == struct.pack("<Q", 0)
    finally:
        os.close(read_end)
        os.close(write_end)


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
        monkeypatch.setattr(forked.pickle, "dumps", no_memory)
        with pytest.raises(MemoryError):
            pool.flush()
        monkeypatch.undo()
    assert pool.records[0].error == CANCELLED


def test_an_answer_that_cannot_be_unpickled_fails_its_batch():
    with ProcessWorkerPool(1) as pool:
        worker = pool._executors[0]
        records = in_flight(pool, [TaskRecord(0, 0, "a"), TaskRecord(1, 0, "b")])
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
    assert pool.records[0].error == CANCELLED and pool._in_flight == 0


def test_a_pool_whose_fork_was_refused_forks_and_shares_tasks_once_it_can(monkeypatch):
    """The claim pipe made for the refused fork was closed with it; the next fork makes another."""
    real_pipe = os.pipe

    def pipe():
        monkeypatch.setattr(os, "pipe", real_pipe)  # refuse once: the worker's first pipe, after the claim pipe's
        raise OSError(errno.EMFILE, "Too many open files")

    with ProcessWorkerPool(2) as pool:
        pool._claim_pipe()
        monkeypatch.setattr(os, "pipe", pipe)
        pool.submit(noop, 1)
        with pytest.raises(OSError):
            pool.wait(1, timeout=60)
        assert pool._claims is None
        pool.submit(noop, 2)
        for n in range(4):
            pool.submit(noop, n, movable=True)
        assert pool.wait(6, timeout=60).reached


def blocked_stop_signals():
    return set(signal.pthread_sigmask(signal.SIG_BLOCK, [])) & {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


def test_stop_signals_are_held_while_forking_in_the_main_thread():
    assert forked.STOP_SIGNALS == (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    before = blocked_stop_signals()
    with forked._stop_signals_deferred():
        assert blocked_stop_signals() == {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    assert blocked_stop_signals() == before


def test_a_worker_is_forked_with_the_stop_signals_held_and_they_are_released_after(monkeypatch):
    import multiprocessing.process

    held, real_start = [], multiprocessing.process.BaseProcess.start

    def start(self):
        held.append(blocked_stop_signals())
        real_start(self)

    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", start)
    before = blocked_stop_signals()
    with ProcessWorkerPool(2) as pool:
        pool.submit(noop, 1)
        pool.submit(noop, 2)
        pool.flush()
        assert held == [{signal.SIGINT, signal.SIGTERM, signal.SIGHUP}] * 2
        assert blocked_stop_signals() == before
        assert pool.wait(2, timeout=60).reached


def test_off_the_main_thread_stop_signals_are_not_held():
    seen = []

    def body():
        with forked._stop_signals_deferred():
            seen.append(blocked_stop_signals())

    t = threading.Thread(target=body)
    t.start()
    t.join(5)
    assert seen == [set()]


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


def test_shared_arrays_of_numpy_sized_shapes():
    with ProcessWorkerPool(2) as pool:
        a = pool.array((np.int64(3), 2), np.float64)
        assert a.shape == (3, 2) and a.dtype == np.float64 and a.nbytes == 48
