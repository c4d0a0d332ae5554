"""dp-train's training pieces one at a time (nxgates/gates/dp_train/training.py): the job a remote worker
gets, a pool task, a trainer's runs, and the completion-order fault's order."""

import pickle
import warnings

import numpy as np

from nxgates.core.mlp import Dims, example_grads
from nxgates.core.pool import TaskRecord, make_pool
from nxgates.core.pool.handles import register
from nxgates.core.tape import F32, Tape, constf, tree_sum
from nxgates.core.train import batch_mean, tree_leaf_order
from nxgates.gatekit import RunContext
from nxgates.gates._tape_faults import ReluGradEverywhereTape
from nxgates.gates.dp_train import training
from nxgates.gates.dp_train.training import SgdTrainer, TrainingJob, TrainTask
from tests.helpers import ctx

DIMS = Dims(2, 3, 2)  # W1 is 3 x 2 (cells 0..5), W2 is 2 x 3 (cells 6..11)


def row_of(job, b, w=None):
    """Example ``b``'s gradient row and loss on a fresh tape, at ``w`` (default: the job's weights)."""
    row = np.empty(job.dims.n_params, F32)
    w = job.w if w is None else w
    loss = example_grads(Tape(job.dims.arena), job.dims, w, job.x[b], job.t[b], row)
    return row, loss


def test_a_job_sent_to_a_remote_worker_keeps_its_data_and_gets_fresh_buffers():
    job = TrainingJob.make(DIMS, 5, "stale-weights")
    job.arena(0)
    copy = pickle.loads(pickle.dumps(job))
    assert copy.remote and copy.arenas == {} and copy.fault == "stale-weights"
    assert copy.grads.shape == job.grads.shape == (2, 5, 12) and copy.grads.dtype == F32
    assert copy.losses.shape == (5,) and copy.losses.dtype == F32
    for name in ("w", "w1_t", "w_prev", "w1_t_prev", "x", "t"):
        assert np.array_equal(getattr(copy, name), getattr(job, name)), name
    assert not job.remote and set(job.arenas) == {0} and job.losses is not None


def test_a_job_streams_chunks_of_32_mib_of_rows_locally_and_256_mib_on_a_cluster():
    """NP=9: 32 MiB hold 932067 rows, fewer than B=2^20; 256 MiB hold the whole batch."""
    dims, B = Dims(2, 3, 1), 1 << 20
    assert TrainingJob.make(dims, B, None).grads.shape == (2, 932067, 9)
    assert TrainingJob.make(dims, B, None, remote=True).grads.shape == (2, B, 9)


def test_the_weights_a_step_shares_are_copies_of_the_current_and_previous_ones():
    job = TrainingJob.make(DIMS, 3, None)
    job.w_prev[...] = job.w * F32(3)
    shared = job.weights()
    for got, own in zip(shared, (job.w, job.w1_t, job.w_prev, job.w1_t_prev), strict=True):
        assert np.array_equal(got, own) and got is not own
    assert np.array_equal(shared[1], job.w[:6].reshape(3, 2).T)


def test_a_local_task_writes_its_row_and_loss_into_the_shared_job_and_returns_nothing():
    job = TrainingJob.make(DIMS, 4, None)
    handle = register(job)
    assert training.run_task(TrainTask(handle, 2, 1, 3), worker=0) is None
    row, loss = row_of(job, 2)
    assert np.array_equal(job.grads[1, 3], row) and job.losses[2] == loss


def test_a_remote_task_takes_the_steps_weights_it_is_given_and_returns_its_row_and_loss():
    job = pickle.loads(pickle.dumps(TrainingJob.make(DIMS, 4, None)))
    moved = (job.w * F32(0.5)).astype(F32)
    t = moved[: DIMS.n_w1].reshape(DIMS.H, DIMS.D).T.copy()
    handle, weights = register(job), register((moved, t, job.w_prev.copy(), job.w1_t_prev.copy()))
    row, loss = training.run_task(TrainTask(handle, 1, 0, 2, weights), worker=0)
    want_row, want_loss = row_of(job, 1, moved)
    assert np.array_equal(row, want_row) and loss == want_loss and np.array_equal(job.w, moved)
    assert np.array_equal(job.grads[0, 2], want_row)


def test_a_remote_result_lands_in_its_row_and_loss():
    job = TrainingJob.make(DIMS, 3, None)
    row = np.zeros(DIMS.n_params, F32)
    training.store_example(job, 1, row, (np.arange(12, dtype=F32), F32(2.5)))
    assert np.array_equal(row, np.arange(12, dtype=F32)) and job.losses[1] == F32(2.5)


def test_the_stale_worker_computes_with_the_previous_weights_and_the_others_with_the_current():
    job = TrainingJob.make(DIMS, 3, "stale-weights")
    job.w[...] = job.w * F32(2)
    job.refresh_transpose()
    for worker, w in ((training.STALE_WORKER, job.w_prev), (0, job.w), (2, job.w)):
        row = np.empty(DIMS.n_params, F32)
        job.example(0, row, worker)
        assert np.array_equal(row, row_of(job, 0, w)[0]), worker


def test_what_travels_is_the_data_and_the_shape_of_the_rows_never_the_rows_losses_or_arenas():
    job = TrainingJob.make(DIMS, 5, None)
    job.arena(3)
    state = job.__getstate__()
    assert state["grads"] == (2, 5, 12) and state["losses"] is None and state["arenas"] == {} and state["remote"]
    assert state["x"] is job.x and state["fault"] is None


def test_each_worker_gets_its_own_arena_once_on_the_fault_plants_tape():
    def reduce(buf, axis):
        return tree_sum(buf, axis)

    job = TrainingJob.make(DIMS, 3, None, reduce=reduce)
    first = job.arena(1)
    assert type(first) is Tape and first.capacity == DIMS.arena and first.reduce is reduce
    assert job.arena(1) is first and job.arena(2) is not first and set(job.arenas) == {1, 2}
    faulty = TrainingJob.make(DIMS, 3, "relu-grad").arena(0)
    assert type(faulty) is ReluGradEverywhereTape and faulty.reduce is tree_sum


def test_a_task_runs_on_the_arena_of_its_worker():
    job = TrainingJob.make(DIMS, 4, "stale-weights")
    job.w[...] = job.w * F32(2)
    job.refresh_transpose()
    handle = register(job)
    training.run_task(TrainTask(handle, 0, 0, 0), worker=training.STALE_WORKER)
    assert set(job.arenas) == {training.STALE_WORKER}
    assert np.array_equal(job.grads[0, 0], row_of(job, 0, job.w_prev)[0])


def test_an_example_at_diverging_weights_warns_nothing():
    """A diverged run is D3's to report; pool threads do not inherit the trainer's error state."""
    job = TrainingJob.make(DIMS, 3, None)
    job.w[...] = job.w * F32(1e20)
    job.refresh_transpose()
    row = np.empty(DIMS.n_params, F32)
    with warnings.catch_warnings(), np.errstate(over="warn", invalid="warn"):
        warnings.simplefilter("error")
        job.example(0, row, 0)
    assert not np.all(np.isfinite(row))


def test_finish_order_sorts_by_worker_then_by_task_number():
    records = [TaskRecord(task=t, worker=w, label="") for t, w in ((10, 1), (11, 0), (12, 1), (13, 0), (14, 2))]
    records[1], records[3] = TaskRecord(task=13, worker=0, label=""), TaskRecord(task=11, worker=0, label="")
    assert training.finish_order(records) == [3, 1, 0, 2, 4]


def test_a_serial_run_keeps_step_0s_first_rows_in_example_order():
    job = TrainingJob.make(DIMS, 5, None)
    first = [row_of(job, b)[0] for b in range(5)]
    run = SgdTrainer(job, constf(1, 8), ctx({})).train(2, "serial", keep_rows=3)
    assert run.label == "serial" and run.workers == 0 and len(run.weights) == len(run.losses) == 2
    assert np.array_equal(run.grads0, np.stack(first[:3]))
    assert np.array_equal(run.g0, batch_mean(np.stack(first)))
    assert set(job.arenas) == {0}


def test_a_run_keeps_no_rows_unless_asked_and_kept_rows_are_float32():
    job = TrainingJob.make(DIMS, 4, None)
    trainer = SgdTrainer(job, constf(1, 8), ctx({}))
    assert trainer.train(1, "serial").grads0.shape == (0, 12)
    kept = SgdTrainer(TrainingJob.make(DIMS, 4, None), constf(1, 8), ctx({})).train(1, "serial", keep_rows=2)
    assert kept.grads0.dtype == F32 and kept.grads0.shape == (2, 12)


def test_a_trainer_reduces_one_batch_gradient_without_training():
    job = TrainingJob.make(DIMS, 5, None)
    g = SgdTrainer(job, constf(1, 8), ctx({})).reduce()
    assert np.array_equal(g, batch_mean(np.stack([row_of(job, b)[0] for b in range(5)])))


def test_a_run_times_its_steps(monkeypatch):
    ticks = iter([100.0, 102.5])
    monkeypatch.setattr(training.time, "perf_counter", lambda: next(ticks))
    run = SgdTrainer(TrainingJob.make(DIMS, 3, None), constf(1, 8), ctx({})).train(2, "serial")
    assert run.seconds == 2.5


def test_completion_order_folds_the_rows_worker_by_worker_then_divides_by_b():
    """Two threads, tasks dealt round-robin: the fold takes the even slots, then the odd ones."""
    pool = make_pool("thread", 2)
    try:
        job = TrainingJob.make(DIMS, 6, "completion-order", pool.array)
        rows = {b: row_of(job, b)[0] for b in range(6)}
        run = SgdTrainer(job, constf(1, 8), ctx({}), pool).train(1, "2 workers")
    finally:
        pool.close()
    order = tree_leaf_order(6).tolist()
    acc = rows[order[0]].copy()
    for slot in (2, 4, 1, 3, 5):
        acc = acc + rows[order[slot]]
    assert run.workers == 2 and np.array_equal(run.g0, acc / F32(6))


BASE = [0.5] * 12


def moved(cells):
    w = list(BASE)
    for k, v in cells.items():
        w[k] = v
    return w


def _pool_run(monkeypatch, task, deadline=None):
    """Two steps of a 4-example job on two threads, each task run by ``task``; the run's record."""
    import time

    monkeypatch.setattr(training, "run_task", task)
    pool = make_pool("thread", 2)
    try:
        job = TrainingJob.make(DIMS, 4, None, pool.array)
        context = RunContext(params={}, deadline=None if deadline is None else time.monotonic() + deadline)
        return SgdTrainer(job, constf(1, 8), context, pool).train(2, "2 workers")
    finally:
        pool.close()


def test_a_task_that_raises_stops_the_run_with_its_error(monkeypatch):
    real = training.run_task

    def failing(task, worker):
        if task.example == 2:
            raise ValueError("no row for you")
        return real(task, worker)

    run = _pool_run(monkeypatch, failing)
    assert run.problem.startswith("step 0: example 2 on worker ") and run.problem.endswith("no row for you")
    assert run.weights == [] and run.losses == []


def test_a_task_that_outlives_the_deadline_stops_the_run_as_never_completed(monkeypatch):
    import threading

    release = threading.Event()
    real = training.run_task

    def stuck(task, worker):
        if task.example == 1:
            release.wait(30)
        return real(task, worker)

    try:
        run = _pool_run(monkeypatch, stuck, deadline=0.3)
    finally:
        release.set()
    assert run.problem.startswith("step 0: example ") and run.problem.endswith(": never completed")
