"""What runs inside a forked worker, called here directly (mutation testing cannot see what runs only in a
forked worker): the serve loop and its framing, the answers, and the worker's start-up; then the same seen
from a live pool."""

import contextlib
import os
import pickle
import signal
import struct
import sys
import threading

import pytest

from nxgates.core.pool import ProcessWorkerPool
from nxgates.core.pool.forked import child
from nxgates.core.pool.forked.child import _end_with_parent, _quiet_worker
from nxgates.core.pool.forked.lifecycle import STOP_SIGNALS
from tests.helpers import add, fail_on_two


@pytest.fixture
def recorded_signals(monkeypatch):
    calls = []
    monkeypatch.setattr(signal, "signal", lambda sig, handler: calls.append(("signal", sig, handler)))
    monkeypatch.setattr(signal, "pthread_sigmask", lambda how, sigs: calls.append(("mask", how, tuple(sigs))))
    monkeypatch.setattr(child, "_end_with_parent", lambda parent: calls.append(("parent", parent)))
    return calls


def test_a_worker_leaves_stop_signals_to_its_parent(recorded_signals):
    _quiet_worker(4321)
    assert recorded_signals == [
        ("signal", signal.SIGINT, signal.SIG_IGN),
        ("signal", signal.SIGTERM, signal.SIG_DFL),
        ("signal", signal.SIGHUP, signal.SIG_IGN),
        ("mask", signal.SIG_UNBLOCK, STOP_SIGNALS),
        ("parent", 4321),
    ]
    assert STOP_SIGNALS == (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def test_without_sighup_or_sigmask_a_worker_sets_what_there_is(recorded_signals, monkeypatch):
    monkeypatch.delattr(signal, "SIGHUP")
    monkeypatch.delattr(signal, "pthread_sigmask")
    _quiet_worker(7)
    assert recorded_signals == [
        ("signal", signal.SIGINT, signal.SIG_IGN),
        ("signal", signal.SIGTERM, signal.SIG_DFL),
        ("parent", 7),
    ]


class Exited(Exception):
    pass


@pytest.fixture
def fake_libc(monkeypatch):
    """ctypes.CDLL and os._exit replaced: what the worker asked of the kernel, and whether it left."""
    import ctypes

    calls = []

    class Libc:
        def prctl(self, *args):
            calls.append(("prctl", *args))
            return 0

    def cdll(name, **kwargs):
        calls.append(("CDLL", name, kwargs))
        return Libc()

    def exit_(code):
        calls.append(("_exit", code))
        raise Exited

    monkeypatch.setattr(ctypes, "CDLL", cdll)
    monkeypatch.setattr(os, "_exit", exit_)
    monkeypatch.setattr(sys, "platform", "linux")
    return calls


def test_on_linux_a_worker_asks_for_sigterm_when_its_parent_dies(fake_libc):
    _end_with_parent(os.getppid())
    assert fake_libc == [("CDLL", None, {"use_errno": True}), ("prctl", 1, int(signal.SIGTERM), 0, 0, 0)]


def test_a_worker_whose_parent_already_died_exits_at_once(fake_libc):
    with pytest.raises(Exited):
        _end_with_parent(os.getppid() + 1)
    assert fake_libc[-1] == ("_exit", 1)


def test_elsewhere_than_linux_a_worker_asks_nothing(fake_libc, monkeypatch):
    monkeypatch.setattr(sys, "platform", "darwin")
    _end_with_parent(os.getppid() + 1)
    assert fake_libc == []


@pytest.mark.parametrize("missing", [OSError("no libc"), AttributeError("no prctl")])
def test_without_prctl_a_worker_carries_on(fake_libc, monkeypatch, missing):
    import ctypes

    def cdll(name, **kwargs):
        raise missing

    monkeypatch.setattr(ctypes, "CDLL", cdll)
    _end_with_parent(os.getppid() + 1)  # cannot ask: does not exit either
    assert fake_libc == []


# ---- the serve loop and its frames ---------------------------------------------------------------------------


def frame(payload: bytes) -> bytes:
    return struct.pack("<Q", len(payload)) + payload


def batch(*tasks) -> bytes:
    return frame(pickle.dumps(list(tasks)))


def read_answers(fd: int) -> list:
    """Every answer frame on ``fd`` up to end of file, unpickled."""
    data = b""
    while chunk := os.read(fd, 1 << 16):
        data += chunk
    answers = []
    while data:
        (length,) = struct.unpack_from("<Q", data)
        answers.append(pickle.loads(data[8:8 + length]))
        data = data[8 + length:]
    return answers


@pytest.fixture
def serve(monkeypatch):
    """``serve`` run here on two fresh pipes, its start-up recorded instead of done (it would ignore Ctrl-C
    and ask for SIGTERM when pytest's parent dies): write the task pipe, call it, then read what it answered."""
    started = []
    monkeypatch.setattr(child, "_quiet_worker", started.append)
    monkeypatch.setattr(child, "_run_as_batch", lambda: started.append("batch"))
    task_read, task_write = os.pipe()
    answer_read, answer_write = os.pipe()

    def run(sent: bytes, worker: int = 0, end: bool = False, inherited: tuple = ()) -> list:
        os.write(task_write, sent)
        if end:
            os.close(task_write)
        child.serve(4321, worker, task_read, answer_write, inherited)
        os.close(answer_write)
        return read_answers(answer_read)

    yield run, started
    for fd in (task_read, task_write, answer_read, answer_write):
        with contextlib.suppress(OSError):
            os.close(fd)


def test_a_worker_answers_each_batch_in_order_until_the_stop_frame(serve):
    run, started = serve
    sent = batch((add, 1), (add, 2)) + batch((fail_on_two, 2)) + frame(b"") + batch((add, 9))
    assert run(sent, worker=3) == [[(None, 31), (None, 32)], [("ValueError: task 2 on worker 3 failed", None)]]
    assert started == [4321, "batch"]  # quieted first, with the pid that forked it; then a batch job


def test_a_worker_stops_at_the_end_of_its_task_pipe(serve):
    run, _ = serve
    assert run(batch((add, 5)), end=True) == [[(None, 5)]]


@pytest.mark.parametrize("where", ["in the pickle", "in the length"])
def test_a_worker_stops_at_end_of_file_inside_a_frame(serve, where):
    run, _ = serve
    sent = batch((add, 5))
    assert run(sent[:-3] if where == "in the pickle" else sent[:5], end=True) == []


def test_a_worker_closes_the_parent_ends_it_inherited(serve):
    run, _ = serve
    spare_read, spare_write = os.pipe()
    os.close(spare_read)
    run(frame(b""), inherited=(spare_write, 10_000))  # one not open: ignored
    with pytest.raises(OSError):
        os.fstat(spare_write)


RAN = []


def noted(ctx, worker):
    RAN.append(ctx)
    return ctx


def test_a_worker_whose_parent_stopped_reading_ends_quietly(monkeypatch):
    """Its first answer meets a pipe nobody reads (EPIPE): it returns at once, raising nothing, and runs no
    batch after it although one is waiting."""
    monkeypatch.setattr(child, "_quiet_worker", lambda parent: None)
    monkeypatch.setattr(child, "_run_as_batch", lambda: None)  # the test process keeps its scheduling
    monkeypatch.setattr(sys.modules[__name__], "RAN", [])
    task_read, task_write = os.pipe()
    answer_read, answer_write = os.pipe()
    os.close(answer_read)
    os.write(task_write, batch((noted, 1)) + batch((noted, 2)))
    try:
        assert child.serve(1, 0, task_read, answer_write, ()) is None
        assert RAN == [1]  # the first batch ran, its answer found no reader, and the worker ended there
        os.close(task_write)
        assert os.read(task_read, 1 << 16) == batch((noted, 2))  # the second batch is still unread
    finally:
        os.close(task_read)
        os.close(answer_write)


def test_a_batch_and_an_answer_larger_than_a_pipe_cross_it_in_pieces(monkeypatch):
    """Both are longer than a pipe holds: the worker reads the batch and writes the answer in pieces, while
    the other side (threads here) writes and reads."""
    monkeypatch.setattr(child, "_quiet_worker", lambda parent: None)
    monkeypatch.setattr(child, "_run_as_batch", lambda: None)  # the test process keeps its scheduling
    big = b"x" * (3 << 16)
    task_read, task_write = os.pipe()
    answer_read, answer_write = os.pipe()
    answers = []

    def parent_writes():
        os.write(task_write, batch((echo, big)))
        os.close(task_write)

    threads = [threading.Thread(target=parent_writes),
               threading.Thread(target=lambda: answers.append(read_answers(answer_read)))]
    for t in threads:
        t.start()
    child.serve(1, 0, task_read, answer_write, ())
    os.close(answer_write)
    for t in threads:
        t.join(10)
    os.close(task_read)
    os.close(answer_read)
    assert answers == [[[(None, big)]]]


def test_frames_queued_behind_a_batch_read_in_pieces_are_read_whole(monkeypatch):
    """A large batch, a small one and the stop frame written back to back: reading the first in pieces takes no
    byte of the frames behind it, so both batches are answered and the worker stops."""
    monkeypatch.setattr(child, "_quiet_worker", lambda parent: None)
    monkeypatch.setattr(child, "_run_as_batch", lambda: None)
    big = b"y" * (3 << 16)
    task_read, task_write = os.pipe()
    answer_read, answer_write = os.pipe()
    answers = []

    def parent_writes():
        os.write(task_write, batch((echo, big)) + batch((add, 5)) + frame(b""))  # write() takes it in pieces

    threads = [threading.Thread(target=parent_writes),
               threading.Thread(target=lambda: answers.append(read_answers(answer_read)))]
    for t in threads:
        t.start()
    worker = threading.Thread(target=child.serve, args=(1, 0, task_read, answer_write, ()), daemon=True)
    worker.start()
    worker.join(10)
    stopped = not worker.is_alive()  # at the stop frame, not at end of file
    os.close(task_write)  # (a worker that lost its place in the frames ends here instead of waiting for ever)
    worker.join(10)
    os.close(answer_write)
    for t in threads:
        t.join(10)
    os.close(task_read)
    os.close(answer_read)
    assert stopped and answers == [[[(None, big)], [(None, 5)]]]


def echo(ctx, worker):
    return ctx


def leave(ctx, worker):
    sys.exit(ctx)


def unpicklable(ctx, worker):
    return threading.Lock() if ctx else ctx


def test_an_answer_carries_each_error_as_its_record_shows_it():
    answer = pickle.loads(child.answer(pickle.dumps([(add, 1), (fail_on_two, 2)]), 1))
    assert answer == [(None, 11), ("ValueError: task 2 on worker 1 failed", None)]


def test_a_result_that_cannot_be_pickled_fails_only_its_task():
    answer = pickle.loads(child.answer(pickle.dumps([(unpicklable, 0), (unpicklable, 1), (unpicklable, 0)]), 0))
    assert answer[0] == answer[2] == (None, 0)
    assert answer[1] == ("the task's result cannot be sent back: TypeError: cannot pickle '_thread.lock' object",
                         None)


def test_a_task_that_calls_sys_exit_fails_its_batch_and_the_worker_lives_on():
    assert pickle.loads(child.answer(pickle.dumps([(add, 1), (leave, 3)]), 0)) == "SystemExit: 3"


def test_a_batch_that_cannot_be_read_fails_as_a_whole():
    assert pickle.loads(child.answer(b"not a pickle", 0)).startswith("UnpicklingError: ")


def _policy(ctx, worker):
    return os.sched_getscheduler(0)


@pytest.mark.skipif(not hasattr(os, "SCHED_BATCH"), reason="SCHED_BATCH is Linux's")
def test_a_forked_worker_runs_as_a_batch_job():
    """Its wake-ups do not preempt the parent while it hands out a pass's batches."""
    got = []
    with ProcessWorkerPool(2) as pool:
        for w in range(2):
            pool.submit(_policy, None, worker=w, on_result=got.append)
        assert pool.wait(2, 30).reached
    assert got == [os.SCHED_BATCH, os.SCHED_BATCH] and os.sched_getscheduler(0) != os.SCHED_BATCH


def test_running_as_a_batch_job_is_asked_for_and_a_refusal_or_its_absence_is_no_error(monkeypatch):
    asked = []

    def setscheduler(pid, policy, param):
        asked.append((pid, policy, param.sched_priority))

    monkeypatch.setattr(os, "SCHED_BATCH", 3, raising=False)
    monkeypatch.setattr(os, "sched_setscheduler", setscheduler, raising=False)
    child._run_as_batch()
    assert asked == [(0, 3, 0)]

    def refuse(pid, policy, param):
        raise PermissionError("not here")

    monkeypatch.setattr(os, "sched_setscheduler", refuse)
    child._run_as_batch()  # runs on as it is
    monkeypatch.delattr(os, "SCHED_BATCH")
    child._run_as_batch()  # nothing to ask for


# ---- seen from a live pool -----------------------------------------------------------------------------------


def signals_left_to_the_parent(ctx, worker):
    assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


def test_forked_workers_leave_ctrl_c_to_the_parent():
    with ProcessWorkerPool(2) as p:
        for b in range(2):
            p.submit(signals_left_to_the_parent, b)
        assert p.wait(2, timeout=30).reached
        assert [r.error for r in p.records] == [None, None]




def _double(task_ctx, worker):
    return 2 * task_ctx


def noop(ctx, worker):
    return None


def processes_of(pool):
    return [w.process for w in pool._executors if w.process is not None]


def exit_codes(processes):
    """Each process's exit code, read without waiting (None: still running or not reaped)."""
    return [p.exitcode for p in processes]


def unpicklable_result(ctx, worker):
    return threading.Lock() if ctx else os.getpid()


def test_a_result_that_cannot_be_pickled_fails_its_task_and_the_worker_serves_on():
    pids = []
    with ProcessWorkerPool(1) as p:
        for ctx in (0, 1, 0):
            p.submit(unpicklable_result, ctx, on_result=pids.append)
        waited = p.wait(3, 30)
        p.submit(unpicklable_result, 0, on_result=pids.append)
        assert p.wait(3, 30).reached and waited.finished == 3
    assert [r.error for r in p.records] == [
        None, "the task's result cannot be sent back: TypeError: cannot pickle '_thread.lock' object", None, None]
    assert len(set(pids)) == 1 and len(pids) == 3


def test_a_task_that_calls_sys_exit_fails_its_batch_and_the_worker_serves_on(capfd):
    with ProcessWorkerPool(1) as p:
        p.submit(noop, None)
        p.submit(leave, 3)
        p.wait(2, 30)
        p.submit(_double, 2)
        assert p.wait(1, 30).reached
        processes = processes_of(p)
    assert [r.error for r in p.records] == ["SystemExit: 3", "SystemExit: 3", None]
    assert exit_codes(processes) == [0]
    assert "Traceback" not in capfd.readouterr().err
