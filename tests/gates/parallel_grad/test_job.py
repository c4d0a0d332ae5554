"""The job parallel-grad's tasks share and the tasks themselves, called in this process: the rows they
write, the counts a re-run task leaves, start-up, and what a copy of the job carries to a remote worker."""

import pickle
import threading

import numpy as np
import pytest

from nxgates.core.mlp import Dims, MlpInputs, example_grads, init_examples, init_weights
from nxgates.core.pool.handles import forget, register
from nxgates.core.tape import F32, Tape, sequential_sum
from nxgates.gates.parallel_grad import job as job_module
from nxgates.gates.parallel_grad.job import (
    GradJob,
    TaskContext,
    first_movable,
    movable_slots,
    prepare_task,
    run_task,
    store_row,
)

#: NP = 1350: more than 1024 cells, so start-up touches two cells per row
DIMS = Dims(40, 30, 5)
NP = DIMS.n_params
CHUNK = 4


def make_job(outputs=(True, False), serial=True, n_workers=2, rows_shared=True, given=None, inputs_by_index=False,
             first=0):
    w = init_weights(DIMS, given)
    x, t = init_examples(DIMS, first, first + CHUNK, given)
    outs = [np.zeros((CHUNK, NP), F32) if o else None for o in outputs]
    job = GradJob(DIMS, w, w[: DIMS.n_w1].reshape(DIMS.H, DIMS.D).T.copy(), x.copy(), t.copy(), outs, None,
                  rows_shared=rows_shared, n_workers=n_workers, inputs_by_index=inputs_by_index, given=given)
    if serial:
        job.serial, job.counted = np.zeros((2, CHUNK, NP), F32), np.full((2, CHUNK), -1, np.int64)
    return job


@pytest.fixture
def shared():
    handles = []

    def share(job):
        handles.append(register(job))
        return handles[-1]

    yield share
    for h in handles:
        forget(h)


def reference(b, given=None):
    """Example ``b``'s gradient row, computed on a fresh tape."""
    x, t = init_examples(DIMS, b, b + 1, given)
    out = np.empty(NP, F32)
    example_grads(Tape(DIMS.arena), DIMS, init_weights(DIMS, given), x[0], t[0], out)
    return out


def bits(a):
    return np.asarray(a).tobytes()


# ---- the job's per-worker state ----

def test_each_worker_gets_its_own_arena_once_with_the_jobs_reduction():
    job = make_job()
    job.reduce = sequential_sum
    a0, a1 = job.arena(0), job.arena(1)
    assert a0 is not a1 and job.arena(0) is a0 and set(job.arenas) == {0, 1}
    assert a0.capacity == DIMS.arena and a0.reduce is sequential_sum


def test_the_shared_arena_fault_gives_every_worker_the_one_arena():
    job = make_job()
    job.shared_arena = Tape(DIMS.arena)
    assert job.arena(0) is job.shared_arena and job.arena(3) is job.shared_arena and job.arenas == {}


def test_each_worker_has_one_rerun_row():
    job = make_job()
    r0 = job.rerun_row(0)
    assert r0.shape == (NP,) and r0.dtype == F32
    assert job.rerun_row(0) is r0 and job.rerun_row(1) is not r0 and set(job.rerun_rows) == {0, 1}


# ---- start-up ----

def test_start_up_records_the_pass_and_touches_only_this_workers_rows(shared):
    job = make_job(outputs=(True, True), n_workers=2)
    prepare_task(shared(job), 1)
    assert set(job.arenas) == {1} and job.rerun_rows == {}
    tape = job.arenas[1]
    assert list(tape.programs) == [("mlp", DIMS, True)]
    ref = Tape(DIMS.arena)
    example_grads(ref, DIMS, job.w, job.x[0], job.t[0], np.empty(NP, F32), w1_t=job.w1_t)
    assert bits(tape.vals) == bits(ref.vals) and bits(tape.grads) == bits(ref.grads)
    for g in job.outputs:
        assert np.isnan(g).sum() == 4
        assert np.isnan(g[[1, 3]][:, [0, 1024]]).all()


def test_start_up_also_touches_the_rows_any_worker_may_write(shared):
    job = make_job(outputs=(True, True), n_workers=2)
    job.claimable_slots = [2]
    prepare_task(shared(job), 1)
    for g in job.outputs:
        assert np.isnan(g).sum() == 6 and np.isnan(g[[1, 2, 3]][:, [0, 1024]]).all()


@pytest.mark.parametrize(("n", "workers", "first"), [
    (40, 2, 30), (16, 2, 12), (10, 2, 8), (9, 2, 9), (8, 2, 8), (1, 2, 1), (64, 4, 48), (20, 4, 20)])
def test_a_pass_moves_its_last_quarter_once_every_worker_has_four_tasks_of_its_own(n, workers, first):
    assert first_movable(n, workers) == first


def test_the_movable_slots_of_a_batch_are_those_of_its_full_chunks_and_its_last():
    assert movable_slots(256, 40, 2) == [*range(12, 16), *range(30, 40)]
    assert movable_slots(80, 40, 2) == list(range(30, 40))
    assert movable_slots(8, 8, 2) == []


def test_start_up_touches_the_private_rerun_row_where_there_is_no_rerun_output(shared):
    job = make_job(outputs=(True, False), n_workers=2)
    job.rerun_row(0)[...] = 0
    prepare_task(shared(job), 0)
    assert np.isnan(job.outputs[0]).sum() == 4 and np.isnan(job.outputs[0][[0, 2]][:, [0, 1024]]).all()
    row = job.rerun_rows[0]
    assert set(job.rerun_rows) == {0}
    assert np.isnan(row).sum() == 2 and np.isnan(row[[0, 1024]]).all()


# ---- the tasks ----

def test_a_first_pass_task_writes_its_examples_row_and_counts_nothing(shared):
    job = make_job(first=4)
    assert run_task(TaskContext(shared(job), 0, 2, 6, 0), 1) is None
    assert bits(job.outputs[0][2]) == bits(reference(6))
    assert job.outputs[0][[0, 1, 3]].any() == np.False_
    assert (job.counted == -1).all() and job.rerun_rows == {}
    assert list(job.arenas) == [1] and list(job.arenas[1].programs) == [("mlp", DIMS, True)]


def test_a_rerun_task_counts_t1_and_t3_for_its_slot(shared):
    job = make_job(first=4)
    handle = shared(job)
    ref = reference(5)
    job.serial[1, 1] = ref
    job.serial[1, 1, [3, 7, 11]] += 1  # the serial row differs from the first pass's in 3 cells
    job.outputs[0][1] = ref
    job.outputs[0][1, [20, 21]] += 1  # and the first pass's row from the re-run's in 2
    assert run_task(TaskContext(handle, 1, 1, 5, 1), 0) is None
    assert bits(job.rerun_rows[0]) == bits(ref) and set(job.rerun_rows) == {0}
    assert job.counted[:, 1].tolist() == [5, 2]
    assert (job.counted[:, [0, 2, 3]] == -1).all()


def test_a_rerun_task_reads_the_serial_half_it_is_told(shared):
    job = make_job()
    ref = reference(0)
    job.serial[0, 0] = ref
    job.outputs[0][0] = ref
    run_task(TaskContext(shared(job), 1, 0, 0, 0), 0)
    assert job.counted[:, 0].tolist() == [0, 0]


def test_without_serial_rows_a_rerun_task_counts_nothing(shared):
    job = make_job(outputs=(True, True), serial=False)
    run_task(TaskContext(shared(job), 1, 3, 3, 0), 1)
    assert bits(job.outputs[1][3]) == bits(reference(3)) and job.counted is None and job.rerun_rows == {}


def test_a_remote_copys_task_returns_its_row_and_makes_inputs_from_the_index(shared):
    job = pickle.loads(pickle.dumps(make_job(serial=False, rows_shared=False, inputs_by_index=True)))
    assert job.remote
    job.x[...], job.t[...] = 0, 0  # a remote copy's chunk inputs are stale: the index decides
    row = run_task(TaskContext(shared(job), 0, 2, 9, 0), 0)
    assert np.shares_memory(row, job.outputs[0][2]) and bits(row) == bits(reference(9))


def test_tasks_on_given_inputs_use_them(shared):
    rng = np.random.default_rng(3)
    given = MlpInputs(rng.standard_normal((DIMS.H, DIMS.D)).astype(F32),
                      rng.standard_normal((DIMS.O, DIMS.H)).astype(F32),
                      rng.standard_normal((12, DIMS.D)).astype(F32), rng.standard_normal((12, DIMS.O)).astype(F32))
    job = make_job(given=given, inputs_by_index=True)
    run_task(TaskContext(shared(job), 0, 0, 11, 0), 0)
    assert bits(job.outputs[0][0]) == bits(reference(11, given))
    assert bits(job.outputs[0][0]) != bits(reference(11))


def test_the_drifting_example_drifts_in_a_task(shared):
    job = make_job()
    job.fault = "nondeterministic"
    job.evaluations[1] = 3
    run_task(TaskContext(shared(job), 0, 1, 1, 0), 0)
    assert bits(job.outputs[0][1]) != bits(reference(1)) and job.evaluations == {1: 4}


def test_a_task_that_dies_before_the_barrier_breaks_it_for_the_others(shared):
    class Broken:
        aborted = 0

        def wait(self):
            raise threading.BrokenBarrierError

        def abort(self):
            self.aborted += 1

    job = make_job()
    job.barrier = Broken()
    with pytest.raises(threading.BrokenBarrierError):
        run_task(TaskContext(shared(job), 0, 0, 0, 0), 0)
    assert job.barrier.aborted == 1 and job.first_done == {0}


def test_a_task_that_fails_without_a_barrier_raises_its_own_error(shared, monkeypatch):
    def boom(*args, **kwargs):
        raise ValueError("boom")

    monkeypatch.setattr(job_module, "example_grads", boom)
    job = make_job()
    with pytest.raises(ValueError, match="boom"):
        run_task(TaskContext(shared(job), 0, 0, 0, 0), 0)
    job.fault, job.evaluations[1] = "nondeterministic", 2  # hooks, but no barrier
    with pytest.raises(ValueError, match="boom"):
        run_task(TaskContext(shared(job), 0, 1, 1, 0), 0)


def test_a_returned_row_lands_in_the_gates_array_and_none_changes_nothing():
    rows = np.zeros((3, 4), F32)
    store_row(rows, 1, np.arange(4, dtype=F32))
    store_row(rows, 2, None)
    assert rows.tolist() == [[0, 0, 0, 0], [0, 1, 2, 3], [0, 0, 0, 0]]


# ---- what travels ----

def _busy_job(rows_shared):
    job = make_job(rows_shared=rows_shared)
    job.arena(0), job.rerun_row(0)
    job.first_done.add(1)
    job.evaluations[1] = 2
    return job


def test_a_copy_with_shared_rows_keeps_them_and_drops_this_processes_state():
    job = _busy_job(True)
    state = job.__getstate__()
    assert state["outputs"] is job.outputs and state["remote"] is False
    assert (state["arenas"], state["rerun_rows"], state["first_done"], state["evaluations"]) == ({}, {}, set(), {})
    assert "lock" not in state and state["w"] is job.w and state["dims"] == DIMS
    assert job.arenas and job.rerun_rows and job.first_done and job.evaluations  # the original keeps its own


def test_a_copy_without_shared_rows_makes_its_own_and_returns_rows():
    job = _busy_job(False)
    state = job.__getstate__()
    assert state["outputs"] is None and state["remote"] is True
    copy = pickle.loads(pickle.dumps(job))
    assert copy.remote is True and len(copy.outputs) == 2
    assert all(o.shape == (CHUNK, NP) and o.dtype == F32 for o in copy.outputs)
    assert copy.outputs[0] is not copy.outputs[1]
    assert copy.lock is not job.lock and copy.lock.acquire(blocking=False)
    assert bits(copy.w) == bits(job.w) and copy.dims == DIMS and copy.arenas == {} and copy.evaluations == {}


def test_a_copy_with_shared_rows_keeps_their_contents():
    job = _busy_job(True)
    job.outputs[0][1, 5] = 7
    copy = pickle.loads(pickle.dumps(job))
    assert copy.remote is False and copy.outputs[1] is None and copy.outputs[0][1, 5] == 7
    assert copy.lock.acquire(blocking=False)
