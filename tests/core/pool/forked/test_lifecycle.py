"""Forked workers' lives: the tasks of a worker that died fail naming it and its exit code; closing a pool,
busy, idle or retired, leaves no worker running or unreaped and waits a bounded time; stop signals are held
while forking; a pool nobody closed does not hang the interpreter's exit."""

import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from nxgates.core.pool import ProcessWorkerPool, resolve
from nxgates.core.pool.forked import lifecycle
from nxgates.core.pool.forked import pool as forked_pool
from nxgates.core.pool.interface import CANCELLED
from tests.helpers import process_gone, processes_of, started_workers


def noop(ctx, worker):
    return None


def _sleep(ctx, worker):
    time.sleep(ctx)


def _hang_once_started(ctx, worker):
    """Touch file ``ctx`` (the task has started), then hang."""
    Path(ctx).touch()
    time.sleep(60)


def wait_for_file(path, limit=10.0):
    """Wait until ``path`` exists (a task touched it): at once on an idle machine, ``limit`` s at most."""
    for _ in range(int(limit / 0.005)):
        if path.exists():
            return
        time.sleep(0.005)
    pytest.fail(f"{path.name} not made within {limit} s")


def answer_waiting(worker, limit=10.0):
    """Wait until ``worker`` has written an answer the parent has not read (its answer pipe is readable)."""
    assert select.select([worker.answer_fd], [], [], limit)[0], f"no answer from worker {worker.index}"


def ended(worker, limit=10.0):
    """Wait until ``worker``'s process has ended, without reaping it (its sentinel is readable)."""
    assert select.select([worker.process.sentinel], [], [], limit)[0], f"worker {worker.index} still runs"


def _double(task_ctx, worker):
    return 2 * task_ctx


def exit_codes(processes):
    """Each process's exit code, read without waiting (None: still running or not reaped)."""
    return [p.exitcode for p in processes]


# ---- a worker that dies ---------------------------------------------------------------------------------------------


def die(ctx, worker):
    os.kill(os.getpid(), ctx)
    time.sleep(60)


def exit_now(ctx, worker):
    os._exit(ctx)


@pytest.mark.parametrize(("task", "ctx", "how"), [(die, signal.SIGKILL, "exit code -9, SIGKILL"),
                                                  (exit_now, 7, "exit code 7")])
def test_the_tasks_of_a_worker_that_died_fail_naming_it_and_its_exit_code(capfd, task, ctx, how):
    """Seen at once (not at the timeout); the other worker's tasks complete; the dead worker is not forked again:
    its later tasks fail with the same line."""
    reason = f"worker 0's process ended ({how}) before answering its tasks"
    with ProcessWorkerPool(2) as p:
        p.submit(task, ctx, worker=0)
        p.submit(noop, None, worker=0)
        p.submit(noop, None, worker=1)
        t0 = time.monotonic()
        waited = p.wait(3, 30)
        assert time.monotonic() - t0 < 10 and not waited.timed_out and waited.finished == 3
        assert [r.error for r in p.records] == [reason, reason, None]
        p.submit(noop, None, worker=0)
        p.submit(noop, None, worker=1)
        assert p.wait(3, 30).finished == 5
        assert [r.error for r in p.records[3:]] == [reason, None]
        dead = p._executors[0]
        assert dead.process.exitcode == (-ctx if task is die else ctx) and dead.parent_fds() == ()
        # reaped: nothing left for the exit handler to stop
        assert dead not in lifecycle.RUNNING and p._executors[1] in lifecycle.RUNNING
    assert "Traceback" not in capfd.readouterr().err


def test_what_a_worker_answered_before_it_died_is_delivered():
    """Its answer is still in the pipe when its death is seen: read first, then the rest fail."""
    with ProcessWorkerPool(1) as p:
        started_workers(p)
        p.submit(_double, 5)
        p.flush()
        answer_waiting(p._executors[0])  # answered, not read: nobody waits
        p.submit(die, signal.SIGKILL)
        p.flush()
        ended(p._executors[0])  # dead, not reaped
        waited = p.wait(3, 30)
        assert waited.finished == 3 and p.n_completed() == 2
        assert [r.error for r in p.records[1:]] == [
            None, "worker 0's process ended (exit code -9, SIGKILL) before answering its tasks"]


def test_a_lost_worker_is_read_to_the_end_before_its_tasks_fail():
    with ProcessWorkerPool(1) as p:
        started_workers(p)
        p.submit(_double, 5)
        p.flush()
        answer_waiting(p._executors[0])  # answered, not read
        p.submit(die, signal.SIGKILL)
        p.flush()
        worker = p._executors[0]
        worker.process.join(10)
        p._lose(worker)
        assert [r.error for r in p.records[1:]] == [
            None, "worker 0's process ended (exit code -9, SIGKILL) before answering its tasks"]
        assert p.in_flight == 0 and not worker.unanswered and worker.lost == p.records[2].error


@pytest.mark.parametrize(("exitcode", "how"), [
    (-9, "exit code -9, SIGKILL"), (-15, "exit code -15, SIGTERM"), (3, "exit code 3"), (0, "exit code 0"),
    (None, "exit code unknown"), (-200, "exit code -200")])
def test_a_lost_workers_tasks_are_told_which_worker_and_its_exit_code(exitcode, how):
    assert lifecycle.ended_reason(2, exitcode) == f"worker 2's process ended ({how}) before answering its tasks"


# ---- closing --------------------------------------------------------------------------------------------------------


def test_closing_a_busy_process_pool_terminates_its_workers_at_once(monkeypatch):
    """A run that gives up on a stuck task must not leave a worker behind (the script may os._exit), nor wait
    CLOSE_SECONDS for a task that will not end."""
    monkeypatch.setattr(forked_pool, "CLOSE_SECONDS", 60.0)
    p = ProcessWorkerPool(2)
    p.submit(_sleep, 60.0, worker=0)
    p.submit(noop, None, worker=1)
    assert p.wait(1, 10).finished >= 1
    processes = processes_of(p)
    assert exit_codes(processes) == [None, None]
    t0 = time.monotonic()
    p.close()
    assert time.monotonic() - t0 < 5
    assert exit_codes(processes) == [-signal.SIGTERM] * 2
    assert p.records[0].error == CANCELLED and p.records[1].error is None


def stuck(ctx, worker):
    pids = resolve(ctx)
    pids[worker] = os.getpid()
    time.sleep(60)


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
def test_closing_a_busy_process_pool_ends_its_workers():
    p = ProcessWorkerPool(2)
    pids = p.array((2,), np.int64)
    pids[:] = 0
    handle = p.register(pids)
    p.submit(stuck, handle)
    p.submit(stuck, handle)
    p.flush()
    for _ in range(1000):
        if pids.all():
            break
        time.sleep(0.005)
    assert pids.all() and p.wait(2, timeout=0.0).timed_out
    p.close()
    for _ in range(100):
        if all(process_gone(int(pid)) for pid in pids):
            break
        time.sleep(0.05)
    assert all(process_gone(int(pid)) for pid in pids)


@pytest.mark.parametrize("n_workers", [1, 3])
def test_closing_an_idle_process_pool_lets_every_worker_exit_on_its_own(n_workers):
    """Asked to stop, each worker exits (code 0, not terminated) and is reaped before close() returns."""
    p = ProcessWorkerPool(n_workers)
    processes = started_workers(p)
    p.close()
    assert len(processes) == n_workers and exit_codes(processes) == [0] * n_workers
    assert all(w.parent_fds() == () for w in p._executors)


def keep_alive(ctx, worker):
    """A thread that is not a daemon keeps the worker from exiting once asked to stop (Python joins it)."""
    threading.Thread(target=time.sleep, args=(ctx,)).start()


def test_closing_an_idle_pool_gives_its_workers_close_seconds_in_all(monkeypatch):
    """Workers that do not exit when asked share one deadline (not CLOSE_SECONDS each), then are terminated."""
    monkeypatch.setattr(forked_pool, "CLOSE_SECONDS", 0.6)
    p = ProcessWorkerPool(3)
    for w in range(3):
        p.submit(keep_alive, 60.0, worker=w)
    assert p.wait(3, 30).reached
    processes = processes_of(p)
    t0 = time.monotonic()
    p.close()
    took = time.monotonic() - t0
    assert 0.55 <= took < 1.5, took
    assert exit_codes(processes) == [-signal.SIGTERM] * 3


def _deaf_sleep(ctx, worker):
    """A task that ignores SIGTERM (as user code in a plugin's task may), says so (touches file ``ctx``), and
    then hangs."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    Path(ctx).touch()
    time.sleep(60)


def test_a_worker_that_ignores_sigterm_is_killed_not_left_running(capfd, tmp_path):
    """A second for SIGTERM, then SIGKILL and a second more: never an unbounded wait, nothing printed."""
    p = ProcessWorkerPool(1)
    p.submit(_deaf_sleep, str(tmp_path / "deaf"), worker=0)
    p.flush()
    wait_for_file(tmp_path / "deaf")  # the task has started and set its handler
    processes = processes_of(p)
    t0 = time.monotonic()
    p.close()
    took = time.monotonic() - t0
    assert 0.9 <= took < 4, took
    assert exit_codes(processes) == [-signal.SIGKILL]
    assert "Traceback" not in capfd.readouterr().err


def test_tasks_handed_over_or_queued_when_the_pool_closes_are_cancelled_not_run(tmp_path):
    """A stuck worker holds its batches: what was handed over behind it, and what was still queued here,
    fails with the thread pool's words when the pool closes; nothing stays in flight."""
    p = ProcessWorkerPool(1)
    p.submit(_hang_once_started, str(tmp_path / "started"), worker=0)
    p.flush()
    for _ in range(3):
        p.submit(noop, None, worker=0)
        p.flush()
    p.submit(noop, None, worker=0)  # queued, never flushed
    wait_for_file(tmp_path / "started")
    p.close()
    assert [r.error for r in p.records] == [CANCELLED] * 5
    assert p.in_flight == 0 and p.n_completed() == 0 and all(r.done for r in p.records)


def test_what_workers_answered_before_a_busy_pool_closed_is_delivered():
    with ProcessWorkerPool(2) as p:
        p.submit(_sleep, 60.0, worker=0)
        p.submit(_double, 4, worker=1)
        p.flush()
        answer_waiting(p._executors[1])  # worker 1 has answered; nobody read it
    assert [r.error for r in p.records] == [CANCELLED, None] and p.n_completed() == 1


def test_retired_workers_finish_their_tasks_then_exit_before_close():
    """retire(): the tasks already submitted (even those still queued here) run, then each worker exits on
    its own (exit code 0), so close() does not wait for the exits."""
    p = ProcessWorkerPool(2)
    try:
        processes = started_workers(p)
        for _ in range(4):
            p.submit(noop, None)  # queued, not yet handed over
        p.retire()
        assert p.wait(6, 10).reached
        for process in processes:
            process.join(10)  # not terminated by anyone: they exit by themselves
        assert exit_codes(processes) == [0, 0]
    finally:
        p.close()


def test_close_after_retire_still_terminates_a_stuck_worker(tmp_path):
    p = ProcessWorkerPool(2)
    processes = started_workers(p)
    p.submit(_hang_once_started, str(tmp_path / "started"), worker=0)
    p.retire()
    wait_for_file(tmp_path / "started")
    processes[1].join(10)  # the idle worker, asked to stop by retire(), exits on its own
    assert exit_codes(processes) == [None, 0]
    p.close()
    assert exit_codes(processes) == [-signal.SIGTERM, 0]


def test_a_worker_sees_end_of_file_when_the_parent_closes_its_pipe():
    """Each worker closed the parent's ends it inherited, its own and its elder siblings': the parent going
    away (its ends closed) ends every worker, even without PR_SET_PDEATHSIG."""
    p = ProcessWorkerPool(2)
    processes = started_workers(p)
    first = p._executors[0]
    os.close(first.task_fd)  # as the parent's exit would; worker 1 was forked holding a copy of it
    spare_read, first.task_fd = os.pipe()  # where close() writes its stop frame instead
    os.set_blocking(first.task_fd, False)
    try:
        processes[0].join(10)
        assert exit_codes(processes) == [0, None]
    finally:
        p.close()
        os.close(spare_read)
    assert exit_codes(processes) == [0, 0]


UNCLOSED = """
import sys, time
from nxgates.core.pool import make_pool
def noop(ctx, worker):
    return None
pool = make_pool("process", 2)
for w in range(2):
    pool.submit(noop, None, worker=w)
assert pool.wait(2, 30).reached
print(*(w.process.pid for w in pool._executors))
del pool  # never closed, even unreachable: the interpreter's exit must not wait for its idle workers
"""


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
def test_a_pool_nobody_closed_does_not_hang_the_interpreters_exit():
    """multiprocessing joins every child at exit, and an idle worker waits for its next batch for ever: the
    pool's own exit handler ends them first."""
    r = subprocess.run([sys.executable, "-c", UNCLOSED], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    pids = [int(pid) for pid in r.stdout.split()]
    assert len(pids) == 2 and all(process_gone(pid) for pid in pids)


# ---- stop signals held while forking --------------------------------------------------------------------------------


def blocked_stop_signals():
    return set(signal.pthread_sigmask(signal.SIG_BLOCK, [])) & {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


def test_stop_signals_are_held_while_forking_in_the_main_thread():
    assert lifecycle.STOP_SIGNALS == (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    before = blocked_stop_signals()
    with lifecycle.stop_signals_deferred():
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
        with lifecycle.stop_signals_deferred():
            seen.append(blocked_stop_signals())

    t = threading.Thread(target=body)
    t.start()
    t.join(5)
    assert seen == [set()]
