"""Claimable tasks: the process pool makes a flush's movable tasks claimable by the workers it deals tasks to,
the worker done first runs more of them, and each is recorded on the worker that ran it; a worker that dies
holding a claim fails only what it claimed; with one worker dealt tasks, or earlier claimable tasks still in
flight, a movable task runs where it was dealt; the thread pool always runs it there."""

import fcntl
import os
import pickle
import struct
import tempfile
import time

import pytest

from nxgates.core.pool import ProcessWorkerPool, ThreadWorkerPool
from nxgates.core.pool.forked.claims import ClaimableTasks, run_claims
from nxgates.core.pool.interface import CANCELLED
from tests.helpers import HoldingPool


def whoami(ctx, worker):
    """(the worker told, the process that ran the task)."""
    if ctx:
        time.sleep(ctx)
    return worker, os.getpid()


def until(ctx, worker):
    """Hold a worker until directory ``ctx[0]`` holds ``ctx[1]`` files (made by the test, or by :func:`marked`
    tasks; 20 s at most), then as :func:`whoami`."""
    folder, count = ctx
    for _ in range(4000):
        if len(os.listdir(folder)) >= count:
            break
        time.sleep(0.005)
    return whoami(0, worker)


def marked(ctx, worker):
    """As :func:`whoami`, leaving a file of its own in directory ``ctx``."""
    os.close(tempfile.mkstemp(dir=ctx)[0])
    return whoami(0, worker)


def die_now(ctx, worker):
    os._exit(3)


def fail(ctx, worker):
    raise ValueError(f"task {ctx}")


def submit_all(pool, tasks, movable=False, worker=None):
    """Submit ``tasks`` ((fn, ctx) pairs); returns their records and the values each delivered."""
    values = {}
    first = len(pool.records)
    for n, (fn, ctx) in enumerate(tasks):
        pool.submit(fn, ctx, worker=worker, movable=movable, on_result=lambda v, n=first + n: values.__setitem__(n, v))
    return pool.records[first:], values


def started(pool):
    """Fork both workers first, so a test's timings do not include a fork."""
    submit_all(pool, [(whoami, 0), (whoami, 0)])
    assert pool.wait(2, 30).reached


def test_the_worker_done_first_runs_the_movable_tasks_and_their_records_name_it(tmp_path):
    """Worker 0 is held until six movable tasks have run: worker 1, done first, must have run them all (tasks
    left where they were dealt would wait behind worker 0's and keep it held)."""
    with ProcessWorkerPool(2) as pool:
        started(pool)
        own, values = submit_all(pool, [(until, (str(tmp_path), 6)), (whoami, 0)])
        moved, moved_values = submit_all(pool, [(marked, str(tmp_path))] * 6, movable=True)
        assert [r.worker for r in moved] == [0, 1, 0, 1, 0, 1]  # dealt round-robin, as any task
        assert pool.wait(10, 30).reached
        worker1 = values[3][1]
        assert [r.worker for r in moved] == [1] * 6
        assert all(v == (1, worker1) for v in moved_values.values()) and len(moved_values) == 6
        assert pool.tasks_per_worker(pool.records[2:]) == {"0": 1, "1": 7}


def test_without_movable_the_same_tasks_stay_where_they_were_dealt():
    with ProcessWorkerPool(2) as pool:
        submit_all(pool, [(whoami, 0.5), (whoami, 0)])
        dealt, values = submit_all(pool, [(whoami, 0)] * 6)
        assert pool.wait(8, 30).reached
        assert [r.worker for r in dealt] == [0, 1, 0, 1, 0, 1] == [values[r.task][0] for r in dealt]


def test_a_worker_that_dies_holding_a_claim_fails_that_task_alone():
    """The other worker runs the rest; the dead one's claim fails with the line naming it and its exit code."""
    with ProcessWorkerPool(2) as pool:
        submit_all(pool, [(whoami, 0), (whoami, 0)])
        moved, _ = submit_all(pool, [(die_now, None), (whoami, 0.05), (whoami, 0.05), (whoami, 0.05)], movable=True)
        waited = pool.wait(6, 30)
        assert not waited.timed_out and waited.finished == 6 and pool.in_flight == 0
        (dead,) = [w.index for w in pool._executors if w.lost]  # whichever claimed the task first
        assert moved[0].error == f"worker {dead}'s process ended (exit code 3) before answering its tasks"
        assert moved[0].worker == dead
        assert all(r.error is None and r.worker == 1 - dead for r in moved[1:])
        assert pool._claimable is None


def test_a_movable_task_that_raises_fails_alone():
    with ProcessWorkerPool(2) as pool:
        submit_all(pool, [(whoami, 0), (whoami, 0)])
        moved, values = submit_all(pool, [(whoami, 0), (fail, 7), (whoami, 0)], movable=True)
        assert pool.wait(4, 30).finished == 5
        assert [r.error for r in moved] == [None, "ValueError: task 7", None] and len(values) == 2


def test_a_movable_task_that_leaves_fails_with_the_batch_of_the_worker_that_claimed_it():
    """sys.exit() in a task fails the batch it ran in, so the claims of that worker fail with it too."""
    with ProcessWorkerPool(2) as pool:
        submit_all(pool, [(whoami, 0), (whoami, 0)])
        moved, _ = submit_all(pool, [(leave, 4)], movable=True)
        assert pool.wait(3, 30).finished == 3
        assert moved[0].error == "SystemExit: 4" and pool.in_flight == 0


def leave(ctx, worker):
    raise SystemExit(ctx)


def test_movable_tasks_dealt_to_one_worker_run_there():
    """A pass whose tasks are all dealt to one worker (the single-worker fault) stays on it: only the workers
    a flush deals tasks to share its movable tasks."""
    with ProcessWorkerPool(2) as pool:
        moved, values = submit_all(pool, [(whoami, 0)] * 5, movable=True, worker=0)
        pool.flush()
        assert pool._claimable is None  # nothing shared: the one worker runs them as its own
        assert pool.wait(5, 30).reached
        assert {r.worker for r in moved} == {0} and {v[0] for v in values.values()} == {0}
        assert pool._executors[1].process is None  # never forked


def test_movable_tasks_flushed_while_claimable_ones_are_in_flight_run_where_they_were_dealt(tmp_path):
    with ProcessWorkerPool(2) as pool:
        submit_all(pool, [(until, (str(tmp_path), 1))] * 2)  # both workers held until the second flush
        first, _ = submit_all(pool, [(whoami, 0)] * 2, movable=True)
        pool.flush()
        assert pool._claimable is not None
        second, values = submit_all(pool, [(whoami, 0)] * 4, movable=True)
        pool.flush()
        (tmp_path / "go").touch()
        assert pool.wait(8, 30).reached and pool._claimable is None
        assert [r.worker for r in second] == [0, 1, 0, 1] == [values[r.task][0] for r in second]


def test_closing_a_pool_with_claimable_tasks_in_flight_cancels_each_once():
    pool = ProcessWorkerPool(2)
    submit_all(pool, [(whoami, 60), (whoami, 60)])
    moved, _ = submit_all(pool, [(whoami, 0)] * 3, movable=True)
    pool.flush()
    time.sleep(0.2)
    pool.close()
    assert [r.error for r in pool.records] == [CANCELLED] * 5
    assert (pool.in_flight, pool._completed, pool._failed) == (0, 0, 5) and pool._claimable is None


def test_movable_tasks_dealt_to_a_lost_worker_are_run_by_the_one_left():
    with ProcessWorkerPool(2) as pool:
        submit_all(pool, [(die_now, None), (whoami, 0)])
        assert pool.wait(2, 30).finished == 2 and pool._executors[0].lost
        moved, values = submit_all(pool, [(whoami, 0)] * 4, movable=True)
        assert pool.wait(5, 30).reached
        assert [r.worker for r in moved] == [1] * 4 and {v[0] for v in values.values()} == {1}


def test_movable_tasks_queued_when_the_pool_closes_are_cancelled():
    pool = ProcessWorkerPool(2)
    moved, _ = submit_all(pool, [(whoami, 0)] * 3, movable=True)
    pool.close()
    assert [r.error for r in moved] == [CANCELLED] * 3 and pool.in_flight == 0


def open_fds():
    return len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else 0


def test_movable_tasks_of_a_retired_or_closed_pool_fail_as_the_others_do_and_open_nothing():
    pool = ProcessWorkerPool(2)
    pool.close()
    before = open_fds()
    moved, _ = submit_all(pool, [(whoami, 0)] * 3, movable=True)
    submit_all(pool, [(whoami, 0)] * 2)
    assert pool.wait(5, 5).finished == 5
    assert [r.error for r in moved] == [CANCELLED] * 3 and pool.in_flight == 0
    assert open_fds() == before  # no claim pipe for a pool that takes no tasks


def test_movable_tasks_that_cannot_be_pickled_fail_with_the_reason_and_the_others_run():
    import threading

    with ProcessWorkerPool(2) as pool:
        own, _ = submit_all(pool, [(whoami, 0), (whoami, 0)])
        moved, _ = submit_all(pool, [(whoami, 0), (whoami, threading.Lock())], movable=True)
        assert pool.wait(4, 30).finished == 4
        assert [r.error for r in own] == [None, None]
        assert [r.error for r in moved] == ["TypeError: cannot pickle '_thread.lock' object"] * 2


def test_no_memory_to_pickle_the_movable_tasks_is_this_machines_limit_not_their_fault(monkeypatch):
    real_dumps, calls = pickle.dumps, []

    def dumps(obj, *args):
        calls.append(obj)
        if len(calls) == 1:  # the shared tasks, pickled before any batch
            raise MemoryError
        return real_dumps(obj, *args)

    pool = ProcessWorkerPool(2)
    submit_all(pool, [(whoami, 0), (whoami, 0)])
    moved, _ = submit_all(pool, [(whoami, 0)] * 2, movable=True)
    monkeypatch.setattr(pickle, "dumps", dumps)
    with pytest.raises(MemoryError):
        pool.flush()
    pool.close()  # the tasks never handed over are cancelled, as a batch's are
    assert [r.error for r in moved] == [CANCELLED] * 2 and pool.in_flight == 0


def test_movable_tasks_that_found_no_memory_to_be_offered_run_where_they_were_dealt_once_there_is(monkeypatch):
    real_dumps = pickle.dumps

    def no_memory(obj, *args):
        raise MemoryError

    with ProcessWorkerPool(2) as pool:
        moved, values = submit_all(pool, [(whoami, 0)] * 4, movable=True)  # nothing else queued
        monkeypatch.setattr(pickle, "dumps", no_memory)
        with pytest.raises(MemoryError):
            pool.flush()
        monkeypatch.setattr(pickle, "dumps", real_dumps)
        assert pool.wait(4, 30).reached
        assert [r.worker for r in moved] == [0, 1, 0, 1] == [values[r.task][0] for r in moved]


def test_the_thread_pool_runs_a_movable_task_where_it_was_dealt():
    with ThreadWorkerPool(2) as pool:
        submit_all(pool, [(whoami, 0.3), (whoami, 0)])
        moved, values = submit_all(pool, [(whoami, 0)] * 4, movable=True)
        assert pool.wait(6, 30).reached
        assert [r.worker for r in moved] == [0, 1, 0, 1] == [values[r.task][0] for r in moved]


# ---- the parent's bookkeeping and the worker's claims, without workers ------------------------------------

def in_flight(pool, n):
    """``n`` tasks submitted and held, dealt round-robin; their records."""
    pool.held = []
    for _ in range(n):
        pool.submit(whoami, None)
    return pool.held


def claimable(pool, records, participants):
    group = pool._claimable = ClaimableTasks([(whoami, None, r, None) for r in records], participants)
    return group


def test_each_claimed_task_is_delivered_by_its_worker_and_the_unclaimed_fail_once_none_is_waiting():
    with HoldingPool(2) as pool:
        records = in_flight(pool, 3)
        group = claimable(pool, records, {0, 1})
        pool._claims_answered(group, 1, None, [(0, None, "v"), (2, "ValueError: x", None)])
        assert [(r.done, r.worker, r.error) for r in records] == [
            (True, 1, None), (False, 1, None), (True, 1, "ValueError: x")]
        pool._claims_answered(group, 1, None, [(1, None, "again")])  # a worker answers its claims once
        assert not records[1].done
        pool._claims_answered(group, 0, "worker 0's process ended (exit code 3) before answering its tasks", None)
        assert records[1].error == "worker 0's process ended (exit code 3) before answering its tasks"
        assert records[1].worker == 0  # dealt to 1, claimed by the worker that ended
        assert pool._claimable is None and pool.in_flight == 0 and (pool._completed, pool._failed) == (1, 2)


def test_claimable_tasks_nobody_delivered_fail_with_the_first_reason_a_worker_did_not_answer():
    with HoldingPool(2) as pool:
        records = in_flight(pool, 2)
        group = claimable(pool, records, {0, 1, 2})
        pool._claims_answered(group, 2, "SystemExit: 1", None)
        pool._claims_answered(group, 0, None, [(1, None, "v")])
        pool._claims_answered(group, 1, CANCELLED, None)
        assert [r.error for r in records] == ["SystemExit: 1", None]


def test_a_batch_that_could_not_be_sent_gives_its_claimable_tasks_the_exceptions_words():
    with HoldingPool(2) as pool:
        records = in_flight(pool, 1)
        group = claimable(pool, records, {0, 1})
        pool._claims_answered(group, 0, pickle.PicklingError("cannot pickle 'lock'"), None)
        pool._claims_answered(group, 1, None, [])
        assert records[0].error == "PicklingError: cannot pickle 'lock'"


def test_claimable_tasks_every_worker_answered_without_running_fail_saying_so():
    with HoldingPool(2) as pool:
        records = in_flight(pool, 1)
        group = claimable(pool, records, {0, 1})
        pool._claims_answered(group, 0, None, [])
        pool._claims_answered(group, 1, None, [])
        assert records[0].error == "no worker claimed it" and pool.in_flight == 0
        assert records[0].worker == 0  # no worker to blame: the record keeps the worker it was dealt to


def claims(*indices):
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    os.write(write_end, b"".join(struct.pack("<I", i) for i in indices))
    return read_end, write_end


def test_a_worker_claims_until_the_pipe_is_empty_and_runs_each_claimed_task():
    read_end, write_end = claims(2, 0)
    blob = pickle.dumps([(whoami, 0), (fail, 1), (whoami, 0)])
    try:
        assert run_claims((read_end, blob), 5) == [(2, None, (5, os.getpid())), (0, None, (5, os.getpid()))]
        assert run_claims((read_end, blob), 5) == []
        os.write(write_end, struct.pack("<I", 1))
        assert run_claims((read_end, blob), 5) == [(1, "ValueError: task 1", None)]
    finally:
        os.close(read_end)
        os.close(write_end)


def unpicklable(ctx, worker):
    import threading

    return threading.Lock() if ctx else ctx


def test_a_claimed_result_that_cannot_be_pickled_fails_only_its_task():
    read_end, write_end = claims(0, 1)
    try:
        outcomes = run_claims((read_end, pickle.dumps([(unpicklable, 0), (unpicklable, 1)])), 0)
    finally:
        os.close(read_end)
        os.close(write_end)
    assert outcomes[0] == (0, None, 0)
    assert outcomes[1] == (1, "the task's result cannot be sent back: TypeError: cannot pickle '_thread.lock' "
                              "object", None)


def test_a_worker_stops_claiming_at_a_claim_cut_short_and_still_checks_what_it_ran():
    read_end, write_end = claims(0)
    os.write(write_end, b"\x01\x00")  # half a claim: nothing a worker can run
    try:
        outcomes = run_claims((read_end, pickle.dumps([(unpicklable, 1)])), 0)
    finally:
        os.close(read_end)
        os.close(write_end)
    assert outcomes == [(0, "the task's result cannot be sent back: TypeError: cannot pickle '_thread.lock' "
                            "object", None)]


@pytest.mark.skipif(not hasattr(fcntl, "F_SETPIPE_SZ"), reason="a pipe's size is set with F_SETPIPE_SZ (Linux)")
def test_movable_tasks_beyond_what_the_claim_pipe_takes_run_where_they_were_dealt():
    with ProcessWorkerPool(2) as pool:
        fcntl.fcntl(pool._claim_pipe.ends()[1], fcntl.F_SETPIPE_SZ, 4096)  # one page: 1024 claims
        submit_all(pool, [(whoami, 0.3), (whoami, 0.3)])
        moved, values = submit_all(pool, [(whoami, 0)] * 1100, movable=True)
        pool.flush()
        assert len(pool._claimable.items) == 1024
        assert pool.wait(1102, 60).reached
        assert [r.worker for r in moved[1024:]] == [0, 1] * 38 == [values[r.task][0] for r in moved[1024:]]


def test_a_worker_with_nothing_to_claim_does_not_read_the_claimable_tasks():
    read_end, write_end = claims()
    try:
        assert run_claims((read_end, b"not a pickle"), 0) == []
    finally:
        os.close(read_end)
        os.close(write_end)


def test_claims_left_by_workers_that_died_are_emptied_before_the_next_claimable_tasks():
    """A claim nobody took (its workers gone) must not be read as one of the next flush's: task 0 would run
    twice and count twice. A worker answers its batches in order, so once each worker has answered one more
    batch, every claim of the flush before it has been run and delivered: a task run twice would have
    counted by then."""
    with ProcessWorkerPool(2) as pool:
        os.write(pool._claim_pipe.ends()[1], struct.pack("<II", 0, 0))
        submit_all(pool, [(whoami, 0), (whoami, 0)])
        submit_all(pool, [(whoami, 0)] * 2, movable=True)
        assert pool.wait(4, 30).reached
        after, _ = submit_all(pool, [(whoami, 0)] * 2)  # one more batch for each worker
        assert [r.worker for r in after] == [0, 1]
        waited = pool.wait(7, 30)  # one more than there are tasks: returns once nothing is in flight
        assert not waited.timed_out and waited.finished == 6 and pool._claimable is None
        assert pool.n_completed() == 6 and pool._failed == 0 and pool.in_flight == 0
