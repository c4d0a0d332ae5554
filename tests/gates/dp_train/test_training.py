"""dp-train's training pieces one at a time: the job a remote worker gets, a pool task, the completion-order
fault's order, and how two runs' weights are compared and reported."""

import pickle
import warnings

import numpy as np
import pytest
from nxgates.core.pool.shared import register

from nxgates.core.mlp import Dims, MlpInputs, example_grads, init_data
from nxgates.core.numeric import compare, mlp_numeric
from nxgates.core.pool import TaskRecord, make_pool
from nxgates.core.tape import F32, Tape, constf, tree_sum
from nxgates.core.train import batch_mean, tree_leaf_order
from nxgates.errors import ConfigError
from nxgates.gatekit import RunContext
from nxgates.gates._tape_faults import ReluGradEverywhereTape
from nxgates.gates.dp_train import gate, training
from nxgates.gates.dp_train.training import SgdTrainer, TrainingJob, TrainingRun, TrainTask
from tests.helpers import Units, ctx

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


# ---- comparing and reporting runs -----------------------------------------------------------------------


def a_run(label, *weights, problem=""):
    return TrainingRun(label, 2, weights=[np.array(w, F32) for w in weights], problem=problem)


BASE = [0.5] * 12


def moved(cells):
    w = list(BASE)
    for k, v in cells.items():
        w[k] = v
    return w


@pytest.mark.parametrize("k,name", [(0, "W1[0, 0]"), (1, "W1[0, 1]"), (5, "W1[2, 1]"), (6, "W2[0, 0]"),
                                    (8, "W2[0, 2]"), (9, "W2[1, 0]"), (11, "W2[1, 2]")])
def test_cell_names_count_rows_and_columns_within_each_tensor(k, name):
    assert gate.cell_name(DIMS, k) == name


@pytest.mark.parametrize("value,text", [(0.1, "0.1 (0x3dcccccd)"), (-2.0, "-2.0 (0xc0000000)"),
                                        (F32(1e-45), "1e-45 (0x00000001)")])
def test_bits_show_a_float32s_repr_and_its_raw_bits(value, text):
    assert gate._bits(value) == text


def test_equal_runs_report_their_steps_and_weights():
    assert gate.compare_runs(a_run("serial", BASE, BASE, BASE), a_run("2 workers", BASE, BASE, BASE), DIMS) == (
        True, "serial vs 2 workers: 3 steps x 12 weights")


def test_a_stopped_run_fails_with_its_reason_the_others_first():
    ok = a_run("serial", BASE)
    assert gate.compare_runs(ok, a_run("3 workers", problem="step 0: lost"), DIMS) == (
        False, "3 workers run stopped: step 0: lost")
    assert gate.compare_runs(a_run("2 workers", problem="step 1: boom"), ok, DIMS) == (
        False, "2 workers run stopped: step 1: boom")
    assert gate.compare_runs(a_run("2 workers", problem="a"), a_run("3 workers", problem="b"), DIMS) == (
        False, "3 workers run stopped: b")


def test_runs_of_different_lengths_fail_with_both_counts():
    assert gate.compare_runs(a_run("serial", BASE, BASE), a_run("2 workers", BASE), DIMS) == (
        False, "serial ran 2 steps, 2 workers 1")


def test_differing_runs_name_where_they_part_and_up_to_six_steps_cell_counts():
    ref = a_run("serial", *[BASE] * 9)
    steps = [BASE, moved({7: 0.25}), *[moved({1: 1.0, 9: -0.0})] * 7]
    ok, why = gate.compare_runs(ref, a_run("2 workers", *steps), DIMS)
    assert not ok
    assert why == ("serial vs 2 workers: first part at step 1, W2[0, 1] 0.5 (0x3f000000) vs 0.25 (0x3e800000); "
                   "step 1: 1 cells, step 2: 2 cells, step 3: 2 cells, step 4: 2 cells, step 5: 2 cells, "
                   "step 6: 2 cells")


def test_where_runs_part_compares_bits_so_minus_zero_differs():
    ref = a_run("a", moved({3: 0.0}))
    assert gate.where_runs_part(ref, a_run("b", moved({3: -0.0})), DIMS) == (
        "first part at step 0, W1[1, 1] 0.0 (0x00000000) vs -0.0 (0x80000000)")


def test_where_runs_part_looks_only_at_the_steps_both_ran():
    assert gate.where_runs_part(a_run("a", BASE, BASE), a_run("b", BASE), DIMS) == "no step differs"
    assert gate.where_runs_part(a_run("a", BASE, moved({2: 1.0})), a_run("b", BASE, moved({4: 1.0})), DIMS) == (
        "first part at step 1, W1[1, 0] 1.0 (0x3f800000) vs 0.5 (0x3f000000)")


# ---- D4 -------------------------------------------------------------------------------------------------


def numeric_mean(dims, k, step):
    w, x, t = init_data(dims, k)
    return sum(mlp_numeric(dims, w, x[b], t[b], step) for b in range(k)) / k


@pytest.mark.parametrize("keep", [0, 2])
def test_d4_compares_the_mean_of_the_checked_examples_with_their_central_differences(keep):
    job = TrainingJob.make(DIMS, 4, None)
    run = SgdTrainer(job, constf(1, 8), ctx({})).train(2, "serial", keep_rows=keep)
    k = keep or 4
    analytic = batch_mean(run.grads0) if keep else run.g0
    v = gate.check_d4(DIMS, run, k, 1e-4, 7)
    assert v == compare(analytic, numeric_mean(DIMS, k, 1e-4), 7) and v.cells == 12 and v.passed


def test_d4_over_part_of_the_batch_differs_from_d4_over_all_of_it():
    job = TrainingJob.make(DIMS, 4, None)
    run = SgdTrainer(job, constf(1, 8), ctx({})).train(2, "serial", keep_rows=1)
    assert gate.check_d4(DIMS, run, 1, 1e-4, 0).worst < 50
    assert gate.check_d4(DIMS, run, 1, 1e-4, 0) != compare(run.g0, numeric_mean(DIMS, 1, 1e-4), 0)


def test_d4_differentiates_the_given_inputs_not_the_seeds():
    rng = np.random.default_rng(7)
    arrays = [rng.uniform(-1, 1, shape).astype(F32) for shape in ((3, 2), (2, 3), (4, 2), (4, 2))]
    given = MlpInputs(*arrays)
    run = SgdTrainer(TrainingJob.make(DIMS, 4, None, given=given), constf(1, 8), ctx({})).train(2, "serial")
    w, x, t = init_data(DIMS, 4, given)
    numeric = sum(mlp_numeric(DIMS, w, x[b], t[b], 1e-4) for b in range(4)) / 4
    v = gate.check_d4(DIMS, run, 4, 1e-4, 5, given)
    assert v == compare(run.g0, numeric, 5) and v.passed
    assert not gate.check_d4(DIMS, run, 4, 1e-4, 5).passed


# ---- the gate's report ----------------------------------------------------------------------------------

SMALL = {"D": 3, "H": 4, "O": 2, "B": 4, "steps": 3, "lr_num": 1, "lr_den": 8, "workers": 2, "executor": "thread",
         "step_exp": 6, "tol_permil": 10, "d4_examples": 0}
HEADER = ("nx_dp_train: 3 steps of minibatch SGD (B=4, lr=constf(1,8)=0.125) on the f32 autograd; batch gradient = "
          "pairwise tree over the examples / B")


def shown(out):
    return [(i.level, i.text) if hasattr(i, "level") else (i.name, i.passed, i.detail) for i in out.items]


def test_a_green_run_prints_every_step_and_check():
    out = gate.run(ctx(SMALL))
    assert shown(out) == [
        ("info", HEADER),
        ("info", " step 0: mean loss=0.309053361"),
        ("info", " step 1: mean loss=0.285563558"),
        ("info", " step 2: mean loss=0.265123188"),
        ("info", " executor=thread workers=2 and 3"),
        (gate.D1, True, "serial vs 2 workers: 3 steps x 20 weights"),
        (gate.D2, True, "2 workers vs 3 workers: 3 steps x 20 weights"),
        (gate.D3, True, "0.309053361 -> 0.265123188 over 3 steps"),
        (gate.D4, True, "mean of 4/4 examples: 20/20 cells within 10permil (worst=0permil of max|grad|=0.171805)"),
    ]
    m = out.metrics
    assert {k: v for k, v in m.items() if not k.endswith("_seconds")} == {
        "losses": [0.30905336141586304, 0.28556355834007263, 0.265123188495636],
        "weights_sha256": "f0060b25ef596146541a861f57000b860d1433448d38247a4ba1aaa09a9e9c46",
        "steps": 3, "workers": 2, "workers_d2": 3, "executor": "thread", "lr": 0.125, "d4_worst_permil": 0}
    assert all(isinstance(m[k], float) and m[k] > 0 for k in ("serial_seconds", "parallel_seconds",
                                                                "parallel_d2_seconds"))
    assert out.digest == "2fb103f292f8395b591c7bc8c94f7c2730976ad9164a1b5f95357ac02cd89563"
    assert out.green.startswith("DP-TRAIN GREEN -- data-parallel SGD on the worker pool is bit-identical to serial")
    assert out.red == "DP-TRAIN RED -- data-parallel training is not correct (see FAIL lines)"


def test_the_baseline_pins_losses_and_every_steps_w1_and_w2_apart():
    f = gate.run(ctx(SMALL)).fingerprints
    assert list(f) == ["losses", "W1_steps", "W2_steps", "d4_worst_permil"]
    assert f["losses"]["values"] == [0.30905336141586304, 0.28556355834007263, 0.265123188495636]
    assert (f["W1_steps"]["shape"], f["W2_steps"]["shape"]) == ([3, 4, 3], [3, 2, 4])
    assert f["W1_steps"]["values"][:2] == [-0.6201595664024353, 0.24521185457706451]
    assert f["W2_steps"]["values"][:2] == [0.1035243421792984, -0.6092056035995483]
    assert f["d4_worst_permil"] == 0


def test_a_diverging_run_fails_d3_with_the_step_and_reports_no_infinite_loss():
    out = gate.run(ctx({**SMALL, "lr_num": 1000000}))
    assert shown(out)[3] == ("info", " step 2: mean loss=inf")
    assert shown(out)[7] == (gate.D3, False, "diverged: weights not finite after step 2 (loss 0.309053361 -> inf); "
                                             "use a smaller lr")
    assert out.metrics["losses"] == [0.30905336141586304, 4.14757432632279e16, None]


def test_a_rising_loss_fails_d3():
    out = gate.run(ctx(SMALL, fault="wrong-sign"))
    assert shown(out)[7] == (gate.D3, False, "0.309053361 -> 0.363340199 over 3 steps")


def test_d4_over_part_of_the_batch_names_its_share_and_tolerance():
    out = gate.run(ctx({**SMALL, "d4_examples": 2, "tol_permil": 0}, fault="relu-grad"))
    assert shown(out)[8] == (gate.D4, False, "mean of 2/4 examples: 13/20 cells within 0permil (worst=767permil of "
                                             "max|grad|=0.196668)")


def test_a_scheduler_address_is_refused_for_a_local_executor():
    with pytest.raises(ConfigError, match=r"^a scheduler address applies to executor=dask, not executor=thread$"):
        gate.run(ctx(SMALL, scheduler="tcp://127.0.0.1:9"))


def test_auto_runs_a_small_net_on_threads_with_the_workers_given_and_counts_every_step():
    """Progress: one unit of steps x three runs (serial and the two pools)."""
    units = Units()
    out = gate.run(RunContext(params={**SMALL, "executor": "auto", "workers": 3}, progress=units))
    assert ("info", " executor=thread workers=3 and 4") in shown(out)
    assert (out.metrics["executor"], out.metrics["workers"], out.metrics["workers_d2"]) == ("thread", 3, 4)
    assert units.units == [["training steps", 9, 9]]


def test_every_run_sums_in_the_chosen_reduction_order():
    """D=8 H=16: the tree and a sequential loop round the tape's sums differently; all three runs agree."""
    p = {**SMALL, "D": 8, "H": 16, "O": 4, "B": 8, "steps": 2}
    shas = set()
    for reduction in ("tree", "sequential"):
        out = gate.run(ctx({**p, "reduction": reduction}))
        assert all(c.passed for c in out.checks), reduction
        shas.add(out.metrics["weights_sha256"])
    assert shas == {"f2ed9c6ca699265966608ab961086daa7a4c60a859cebdedd7f4146acff5a735",
                    "c46b0fdab3e684a1d2a48ef768b4134e160fdfb6a26da7817ac0073080654860"}


def test_every_run_trains_on_the_given_inputs():
    rng = np.random.default_rng(5)
    arrays = {"W1": rng.uniform(-1, 1, (4, 3)).astype(F32), "W2": rng.uniform(-1, 1, (2, 4)).astype(F32),
              "X": rng.uniform(-1, 1, (4, 3)).astype(F32), "T": rng.uniform(-1, 1, (4, 2)).astype(F32)}
    out = gate.run(ctx(SMALL, inputs=arrays))
    assert all(c.passed for c in out.checks)
    assert out.metrics["weights_sha256"] == "5ce384bd8785d865dacb5e548f5a9259b70b2403d792d53a60c1bc7d582cff1b"


def test_auto_forks_processes_from_16384_weights():
    out = gate.run(ctx({**SMALL, "D": 127, "H": 128, "O": 1, "B": 2, "steps": 2, "lr_den": 0, "executor": "auto"}))
    assert out.metrics["executor"] == "process"


def test_runs_that_part_are_reported_from_the_first_differing_cell():
    out = gate.run(ctx(SMALL, fault="stale-weights"))
    assert [(c.passed, c.detail) for c in out.checks[:2]] == [
        (False, "serial vs 2 workers: first part at step 1, W1[0, 0] -0.6159952 (0xbf1db1dd) vs -0.6157362 "
                "(0xbf1da0e3); step 1: 20 cells, step 2: 20 cells"),
        (False, "2 workers vs 3 workers: first part at step 1, W1[0, 0] -0.6157362 (0xbf1da0e3) vs -0.61531913 "
                "(0xbf1d858e); step 1: 20 cells, step 2: 20 cells"),
    ]


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
