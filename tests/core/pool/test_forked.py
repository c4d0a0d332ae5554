"""The process pool with live workers: the parent keeps no helper thread, waits as the pool interface says,
notices a worker that died, and never blocks on a pipe; closing it, busy, idle or retired, leaves no worker
running or unreaped and waits a bounded time; a pool made in a process forked *after* nxgates was imported
works (its workers check their parent against the pid that forked them, not the pid that imported the pool
module, against which every such worker would exit)."""

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from nxgates.core import pool
from nxgates.core.pool import ProcessWorkerPool
from nxgates.core.pool import forked as pool_module
from nxgates.core.pool.forked import CANCELLED
from tests.helpers import process_gone


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


def processes_of(pool):
    return [w.process for w in pool._executors if w.process is not None]


def started_workers(pool):
    """Start each worker of a process pool (a task on each) and return its processes."""
    for w in range(pool.n_workers):
        pool.submit(noop, None, worker=w)
    assert pool.wait(pool.n_completed() + pool.n_workers, 10).reached
    return processes_of(pool)


def exit_codes(processes):
    """Each process's exit code, read without waiting (None: still running or not reaped)."""
    return [p.exitcode for p in processes]


# ---- the parent's side: no thread, the wait contract --------------------------------------------------------


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
        waited = p.wait(1, 0.8)
        took = time.monotonic() - t0
        assert (waited.reached, waited.timed_out, waited.finished) == (False, True, 0)
        assert 0.75 <= took < 5
        assert len(slices) >= 4 and max(slices) <= 0.25
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
        waited = p.wait(1, 1.2)
        used = time.thread_time() - cpu  # about 0.5 ms here; polling every millisecond spends 25 ms
        assert waited.timed_out and used < 0.01, used
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
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        t0 = time.monotonic()
        with pytest.raises(Stop):
            p.wait(1, None)
        assert time.monotonic() - t0 < 2
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        p.close()
    assert p.records[0].error == CANCELLED and p._in_flight == 0


def big_result(ctx, worker):
    return b"r" * ctx


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
            time.sleep(0.2)  # the worker is writing its answer, blocked on the full pipe
            p.submit(big_result, size, on_result=lambda v: got.append(len(v)))
            p.submit(noop, b"b" * size)
            p.flush()  # returns although the pipe cannot take the batch now
            assert p._executors[0].unsent
            assert p.wait(3, 30).reached and got == [size, size]
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


# ---- what the workers send back -----------------------------------------------------------------------------


def unpicklable_result(ctx, worker):
    return threading.Lock() if ctx else os.getpid()


def leave(ctx, worker):
    sys.exit(ctx)


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


# ---- a worker that dies ------------------------------------------------------------------------------------


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
        assert dead not in pool_module._RUNNING and p._executors[1] in pool_module._RUNNING
    assert "Traceback" not in capfd.readouterr().err


def test_what_a_worker_answered_before_it_died_is_delivered():
    """Its answer is still in the pipe when its death is seen: read first, then the rest fail."""
    with ProcessWorkerPool(1) as p:
        started_workers(p)
        p.submit(_double, 5)
        p.flush()
        time.sleep(0.3)  # answered, not read: nobody waits
        p.submit(die, signal.SIGKILL)
        p.flush()
        time.sleep(0.3)  # dead
        waited = p.wait(3, 30)
        assert waited.finished == 3 and p.n_completed() == 2
        assert [r.error for r in p.records[1:]] == [
            None, "worker 0's process ended (exit code -9, SIGKILL) before answering its tasks"]


def test_a_lost_worker_is_read_to_the_end_before_its_tasks_fail():
    with ProcessWorkerPool(1) as p:
        started_workers(p)
        p.submit(_double, 5)
        p.flush()
        time.sleep(0.3)  # answered, not read
        p.submit(die, signal.SIGKILL)
        p.flush()
        worker = p._executors[0]
        worker.process.join(10)
        p._lose(worker)
        assert [r.error for r in p.records[1:]] == [
            None, "worker 0's process ended (exit code -9, SIGKILL) before answering its tasks"]
        assert p._in_flight == 0 and not worker.unanswered and worker.lost == p.records[2].error


# ---- closing ------------------------------------------------------------------------------------------------


def test_closing_a_busy_process_pool_terminates_its_workers_at_once(monkeypatch):
    """A run that gives up on a stuck task must not leave a worker behind (the script may os._exit), nor wait
    CLOSE_SECONDS for a task that will not end."""
    monkeypatch.setattr(pool_module, "CLOSE_SECONDS", 60.0)
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
    monkeypatch.setattr(pool_module, "CLOSE_SECONDS", 0.6)
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
    """A task that ignores SIGTERM (as user code in a plugin's task may) and then hangs."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(ctx)


def test_a_worker_that_ignores_sigterm_is_killed_not_left_running(capfd):
    """A second for SIGTERM, then SIGKILL and a second more: never an unbounded wait, nothing printed."""
    p = ProcessWorkerPool(1)
    p.submit(_deaf_sleep, 60.0, worker=0)
    p.flush()
    time.sleep(0.5)  # the task has started and set its handler
    processes = processes_of(p)
    t0 = time.monotonic()
    p.close()
    took = time.monotonic() - t0
    assert 0.9 <= took < 4, took
    assert exit_codes(processes) == [-signal.SIGKILL]
    assert "Traceback" not in capfd.readouterr().err


def test_tasks_handed_over_or_queued_when_the_pool_closes_are_cancelled_not_run():
    """A stuck worker holds its batches: what was handed over behind it, and what was still queued here,
    fails with the thread pool's words when the pool closes; nothing stays in flight."""
    p = ProcessWorkerPool(1)
    p.submit(_sleep, 60.0, worker=0)
    p.flush()
    for _ in range(3):
        p.submit(noop, None, worker=0)
        p.flush()
    p.submit(noop, None, worker=0)  # queued, never flushed
    time.sleep(0.2)
    p.close()
    assert [r.error for r in p.records] == [CANCELLED] * 5
    assert p._in_flight == 0 and p.n_completed() == 0 and all(r.done for r in p.records)


def test_what_workers_answered_before_a_busy_pool_closed_is_delivered():
    with ProcessWorkerPool(2) as p:
        p.submit(_sleep, 60.0, worker=0)
        p.submit(_double, 4, worker=1)
        p.flush()
        time.sleep(0.3)  # worker 1 has answered; nobody read it
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


def test_close_after_retire_still_terminates_a_stuck_worker():
    p = ProcessWorkerPool(2)
    processes = started_workers(p)
    p.submit(_sleep, 60.0, worker=0)
    p.retire()
    time.sleep(0.2)  # the task has started
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
