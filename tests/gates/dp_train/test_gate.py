"""The dp-train gate: the same bits on every executor and worker count, the update rule, each check red."""

import threading

import numpy as np
import pytest

from nxgates.core import chunks
from nxgates.core.mlp import Dims, example_grads, init_data
from nxgates.core.pool import TaskRecord
from nxgates.core.tape import F32, Tape, constf, tree_sum
from nxgates.errors import ConfigError
from nxgates.gates import dp_train as dp
from tests.helpers import ctx

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
    import warnings

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
    import warnings

    from nxgates.tensors.mlp_spec import MLP_INPUTS

    arrays = {k: np.zeros_like(v) for k, v in MLP_INPUTS.make(SEED).items()}
    arrays["W1"][...] = 1
    arrays["X"][...] = F32(2.5e19)  # h = 2e20 in every hidden unit; W2 = 0, so y = 0 and dW1 = 0
    arrays["T"][...] = F32(-1e18)  # dy = 5e17: dW2 = dy * h = 1e38 per example
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = dp.run(ctx({**SEED, "workers": 2}, inputs=arrays))
    assert not out.checks[2].passed and out.checks[2].detail.startswith("diverged: weights not finite after step")
