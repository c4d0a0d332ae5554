"""The dp-train gate (nxgates/gates/dp_train/gate.py): the same bits on every executor and worker count, the update
rule, each check red; and its pieces: two runs' weights compared and reported cell by cell, D4 against central
differences, and every line it prints."""

import threading
import warnings

import numpy as np
import pytest

from nxgates.core import chunks
from nxgates.core.mlp import Dims, MlpInputs, example_grads, init_data
from nxgates.core.numeric import compare, mlp_numeric
from nxgates.core.pool import TaskRecord
from nxgates.core.tape import F32, Tape, constf, tree_sum
from nxgates.core.train import batch_mean
from nxgates.errors import ConfigError
from nxgates.gatekit import RunContext
from nxgates.gates import dp_train as dp
from nxgates.gates.dp_train import gate
from nxgates.gates.dp_train.training import SgdTrainer, TrainingJob, TrainingRun
from tests.helpers import Units, ctx

SEED = {"D": 8, "H": 16, "O": 4, "B": 8, "steps": 5, "lr_num": 1, "lr_den": 8, "workers": 0, "executor": "thread",
        "step_exp": 6, "tol_permil": 10, "d4_examples": 0}


def by_name(out):
    return {c.name: c.passed for c in out.checks}


def red(out):
    return {name for name, ok in by_name(out).items() if not ok}


def plain_sgd(D, H, O, B, steps, lr):
    """The training loop written out: per-example rows, the tree over examples column by column, w - lr*g."""
    dims = Dims(D, H, O)
    w, x, t = init_data(dims, B)
    tape, losses = Tape(dims.arena), []
    for _ in range(steps):
        rows = np.empty((B, dims.n_params), F32)
        ls = np.array([example_grads(tape, dims, w, x[b], t[b], rows[b]) for b in range(B)], F32)
        losses.append(float(tree_sum(ls, 0) / F32(B)))
        g = np.array([tree_sum(rows[:, j].copy(), 0) / F32(B) for j in range(dims.n_params)], F32)
        w = w - lr * g
    return w, losses


def test_seed_size_is_green_and_prints_every_step():
    out = dp.run(ctx(SEED))
    assert by_name(out) == dict.fromkeys(dp.GATE.checks, True)
    lines = [getattr(i, "text", "") for i in out.items]
    assert sum(t.startswith(" step ") and "mean loss=" in t for t in lines) == 5
    m = out.metrics
    assert len(m["losses"]) == m["steps"] == 5 and all(isinstance(v, float) for v in m["losses"])
    assert m["losses"][-1] < m["losses"][0]
    assert (m["workers"], m["workers_d2"]) == (2, 3) and len(m["weights_sha256"]) == 64


@pytest.mark.parametrize("D,H,O,B,steps", [(8, 16, 4, 8, 5), (5, 3, 2, 7, 3), (13, 6, 3, 2, 2)])
def test_the_gate_trains_exactly_as_the_written_out_loop(D, H, O, B, steps):
    import hashlib

    params = {**SEED, "D": D, "H": H, "O": O, "B": B, "steps": steps}
    out = dp.run(ctx(params))
    w, losses = plain_sgd(D, H, O, B, steps, constf(1, 8))
    assert out.metrics["weights_sha256"] == hashlib.sha256(w.astype(F32).tobytes()).hexdigest()
    assert out.metrics["losses"] == losses


def test_every_executor_and_worker_count_gives_the_same_bits():
    runs = [dp.run(ctx({**SEED, "executor": e, "workers": n})) for e in ("thread", "process") for n in (2, 3, 5)]
    assert all(all(by_name(out).values()) for out in runs)
    assert len({out.metrics["weights_sha256"] for out in runs}) == 1
    assert len({tuple(out.metrics["losses"]) for out in runs}) == 1
    assert {out.metrics["workers_d2"] for out in runs} == {3, 4, 6}


@pytest.mark.parametrize("executor", ["thread", "process"])
@pytest.mark.parametrize("fault, expected", [("completion-order", {dp.D1, dp.D2}), ("stale-weights", {dp.D1, dp.D2}),
                                             ("wrong-sign", {dp.D3}), ("relu-grad", {dp.D4})])
def test_each_fault_turns_its_checks_red(executor, fault, expected):
    out = dp.run(ctx({**SEED, "executor": executor}, fault=fault))
    assert red(out) == expected
    assert set(dp.FAULTS[fault].caught_by) <= red(out)


@pytest.mark.parametrize("executor", ["thread", "process"])
def test_a_batch_streamed_one_example_at_a_time_trains_the_same_bits(monkeypatch, executor):
    """The batch gradient is the tree over the examples however the batch is chunked: one example per
    chunk gives the one-chunk run's weights, losses and D4 (over part of the batch, kept as it streams)."""
    params = {**SEED, "D": 6, "H": 5, "O": 3, "B": 13, "d4_examples": 5, "executor": executor}
    whole = dp.run(ctx(params))
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 1)  # chunk_examples: one example (one round of 1)
    streamed = dp.run(ctx(params))
    assert all(by_name(whole).values()) and all(by_name(streamed).values())
    for key in ("weights_sha256", "losses", "d4_worst_permil"):
        assert streamed.metrics[key] == whole.metrics[key], key
    assert red(dp.run(ctx(params, fault="stale-weights"))) == {dp.D1, dp.D2}
    # one example a chunk finishes in the tree's order on any worker count: D2 cannot tell them apart then
    assert red(dp.run(ctx(params, fault="completion-order"))) == {dp.D1}


def test_memory_is_planned_per_chunk_not_per_batch():
    large = {**SEED, "D": 784, "H": 256, "O": 10, "steps": 4}
    dp.validate({**large, "B": 1 << 20})  # a million examples a step: streamed, so not refused
    with pytest.raises(Exception, match="memory budget"):
        dp.validate({**large, "B": 1 << 20, "d4_examples": (1 << 20) - 1})  # D4 keeps its rows: refused


def test_stale_weights_differ_from_step_1_on_only():
    """Step 0 has no previous weights: the fault shows from the first step whose weights moved."""
    out = dp.run(ctx(SEED, fault="stale-weights"))
    detail = next(c.detail for c in out.checks if c.name == dp.D1)
    assert "step 0" not in detail and "step 1:" in detail


def test_finish_order_is_worker_by_worker():
    records = [TaskRecord(task=10 + b, worker=b % 3, label=f"task {b}", done=True) for b in range(8)]
    assert dp.finish_order(records) == [0, 3, 6, 1, 4, 7, 2, 5]


def test_a_task_that_raises_fails_d1_and_d2_with_the_reason(monkeypatch):
    real = dp.TrainingJob.example

    def broken(self, b, row, worker):
        if b == 3 and threading.current_thread().name.startswith("nxgates-worker"):  # a pool's task, not serial
            raise RuntimeError("boom")
        real(self, b, row, worker)

    monkeypatch.setattr(dp.TrainingJob, "example", broken)
    out = dp.run(ctx(SEED))
    assert red(out) == {dp.D1, dp.D2}
    detail = next(c.detail for c in out.checks if c.name == dp.D1)
    assert "run stopped: step 0: example 3 on worker 0: RuntimeError: boom" in detail  # task 6 of 8 (tree order)


def test_d4_over_part_of_the_batch_and_the_medium_preset():
    out = dp.run(ctx({**SEED, "D": 64, "H": 32, "O": 10, "B": 16, "lr_den": 64, "d4_examples": 4}))
    assert all(by_name(out).values()), by_name(out)
    assert "mean of 4/16 examples" in next(c.detail for c in out.checks if c.name == dp.D4)


def test_validation():
    with pytest.raises(ConfigError, match="workers=1"):
        dp.validate({**SEED, "workers": 1})
    with pytest.raises(ConfigError, match="d4_examples=9 exceeds the batch B=8"):
        dp.validate({**SEED, "d4_examples": 9})
    with pytest.raises(Exception, match="memory budget"):
        dp.validate({**SEED, "D": 1 << 20, "H": 1 << 20})


@pytest.mark.parametrize("executor", ["thread", "process"])
def test_a_diverging_rate_fails_d3_cleanly_and_stops_training(executor):
    import json

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no RuntimeWarning escapes either
        out = dp.run(ctx({**SEED, "lr_num": 1000000, "executor": executor}))
    assert red(out) == {dp.D3}
    assert "diverged: weights not finite after step 2" in next(c.detail for c in out.checks if c.name == dp.D3)
    assert out.metrics["losses"][-1] is None and len(out.metrics["losses"]) == 3
    json.dumps(out.metrics, allow_nan=False)


def test_d3_compares_the_last_loss_with_the_first_not_the_second():
    """lr = 2: the loss rises at step 1, then falls below where it started: D3 passes."""
    out = dp.run(ctx({**SEED, "workers": 2, "lr_num": 2, "lr_den": 1, "steps": 6}))
    losses = out.metrics["losses"]
    assert losses[1] > losses[0] > losses[-1]
    assert out.checks[2].passed and out.checks[2].detail == "0.531552434 -> 0.0130384853 over 6 steps"


def test_a_loss_that_does_not_move_fails_d3():
    """Zero weights, inputs and targets: every gradient is 0 and the loss stays at 0, which is not a fall."""
    from nxgates.tensors.mlp_spec import MLP_INPUTS

    zeros = {k: np.zeros_like(v) for k, v in MLP_INPUTS.make(SEED).items()}
    out = dp.run(ctx({**SEED, "workers": 2}, inputs=zeros))
    assert out.metrics["losses"] == [0.0] * 5
    assert (out.checks[2].passed, out.checks[2].detail) == (False, "0 -> 0 over 5 steps")


def test_d4_differences_step_by_ten_to_the_minus_step_exp():
    """A coarse step (10^-1) shows its truncation error, at its own size: 35 permil, not another step's."""
    out = dp.run(ctx({**SEED, "workers": 2, "step_exp": 1, "tol_permil": 0}))
    assert out.checks[3].detail == "mean of 8/8 examples: 176/192 cells within 0permil (worst=35permil of " \
                                   "max|grad|=0.269414)"


def test_the_green_verdict_says_what_was_proven():
    out = dp.run(ctx({**SEED, "workers": 2}))
    assert out.green == ("DP-TRAIN GREEN -- data-parallel SGD on the worker pool is bit-identical to serial SGD "
                         "at every step, across worker counts; the loss falls and the batch gradient is right.")


def test_a_diverging_run_fails_d3_quietly():
    """Every example's dW2 is finite (about 1e38) and their sum is not: the step's gradient overflows float32
    in the tree over the batch. D3 says so, and numpy's overflow warnings stay off stderr."""

    from nxgates.tensors.mlp_spec import MLP_INPUTS

    arrays = {k: np.zeros_like(v) for k, v in MLP_INPUTS.make(SEED).items()}
    arrays["W1"][...] = 1
    arrays["X"][...] = F32(2.5e19)  # h = 2e20 in every hidden unit; W2 = 0, so y = 0 and dW1 = 0
    arrays["T"][...] = F32(-1e18)  # dy = 5e17: dW2 = dy * h = 1e38 per example
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = dp.run(ctx({**SEED, "workers": 2}, inputs=arrays))
    assert not out.checks[2].passed and out.checks[2].detail.startswith("diverged: weights not finite after step")


DIMS = Dims(2, 3, 2)  # W1 is 3 x 2 (cells 0..5), W2 is 2 x 3 (cells 6..11)


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
