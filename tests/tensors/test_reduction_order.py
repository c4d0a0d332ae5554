"""``reduction = tree | sequential``: the tape's two orders, bit for bit against references that are not the
tape (a float32 scalar loop in Python, and in C), on every executor."""

import hashlib

import numpy as np
import pytest

from nxgates.core.mlp import Dims, example_grads, init_data
from nxgates.core.tape import F32, Tape, sequential_sum, tree_sum
from nxgates.gates import dp_train, ta_gradcheck
from nxgates.gates import parallel_grad as pg
from tests.helpers import ctx
from tests.tensors.reference import (
    c_grads,
    compile_c,
    inputs_with_zeros_in_h,
    mlp_grads,
    mlp_loss,
    reduce_scalars,
)

ORDERS = {"tree": tree_sum, "sequential": sequential_sum}
ODD_SIZES = [(5, 3, 2), (7, 4, 3)]


def bits(a):
    return np.asarray(a, F32).view(np.uint32)


@pytest.mark.parametrize("shape, axis", [((13,), 0), ((5, 7), 1), ((7, 5), 0), ((3, 9, 4), 1), ((2, 3, 1), 2),
                                         ((37, 70), 0), ((4, 70, 17), 2), ((3, 11, 64), 1)])
@pytest.mark.parametrize("order", list(ORDERS))
def test_each_reduction_is_its_scalar_loop(shape, axis, order):
    rng = np.random.default_rng(len(shape) * 10 + axis)
    buf = (rng.standard_normal(shape) * np.exp2(rng.integers(-20, 20, shape))).astype(F32)
    np.moveaxis(buf, axis, -1)[..., :1] = -0.0  # every sum starts with a signed zero
    expected = np.apply_along_axis(lambda v: reduce_scalars(list(v), order), axis, buf)
    got = ORDERS[order](buf.copy(), axis)
    assert np.array_equal(bits(got), bits(expected))


@pytest.mark.parametrize("values, expected", [
    ([-0.0, -0.0, -0.0], 0.0),  # the loop starts from +0.0: an all -0.0 sum is +0.0
    ([-0.0], 0.0),
    ([0.0, -0.0], 0.0),
    ([-0.0, 1.0, -1.0], 0.0),
    ([np.inf, 1.0], np.inf),
])
def test_sequential_sum_of_signed_zeros_is_the_loops(values, expected):
    got = sequential_sum(np.array(values, F32), 0)
    assert bits(got) == bits(F32(expected)) == bits(reduce_scalars([F32(v) for v in values], "sequential"))


@pytest.mark.parametrize("shape, axis", [((5, 3), 0), ((5, 70), 0), ((2, 9, 40), 1)])
def test_sums_of_negative_zeros_only_are_positive_zeros_many_or_few_at_once(shape, axis):
    got = sequential_sum(np.full(shape, -0.0, F32), axis)
    assert got.shape == tuple(n for k, n in enumerate(shape) if k != axis)
    assert not np.signbit(got).any()


def test_the_orders_differ_where_rounding_does():
    rng = np.random.default_rng(1)
    buf = (rng.standard_normal((64, 100)) * np.exp2(rng.integers(-10, 10, (64, 100)))).astype(F32)
    assert not np.array_equal(bits(tree_sum(buf.copy(), 1)), bits(sequential_sum(buf.copy(), 1)))


def tape_grads(W1, W2, X, T, order):
    dims = Dims(W1.shape[1], W1.shape[0], W2.shape[0])
    w = np.concatenate([W1.reshape(-1), W2.reshape(-1)])
    tape = Tape(dims.arena, reduce=ORDERS[order])
    rows = np.empty((X.shape[0], dims.n_params), F32)
    losses = [example_grads(tape, dims, w, X[b], T[b], rows[b]) for b in range(X.shape[0])]
    return rows, losses


@pytest.mark.parametrize("order", list(ORDERS))
@pytest.mark.parametrize("D, H, O", ODD_SIZES)
def test_tape_equals_the_python_scalar_loop_with_zeros_in_h(D, H, O, order):
    W1, W2, X, T = inputs_with_zeros_in_h(D, H, O, B=5)
    h0 = W1 @ X[0].astype(np.float64)
    assert h0[0] == 0 and h0[1] == 0  # exact zeros in h, as the inputs promise
    rows, losses = tape_grads(W1, W2, X, T, order)
    for b in range(X.shape[0]):
        assert np.array_equal(bits(rows[b]), bits(mlp_grads(W1, W2, X[b], T[b], order))), b
        assert bits(losses[b]) == bits(mlp_loss(W1, W2, X[b], T[b], order))


@pytest.mark.parametrize("D, H, O", [*ODD_SIZES, (100, 64, 10)])
def test_tape_equals_a_c_program_in_both_orders(tmp_path, D, H, O):
    exe = compile_c(tmp_path)
    if exe is None:
        pytest.skip("no C compiler (cc, gcc or clang) on PATH")
    W1, W2, X, T = inputs_with_zeros_in_h(D, H, O, B=4, seed=D)
    seen = {}
    for order in ORDERS:
        rows, _ = tape_grads(W1, W2, X, T, order)
        assert np.array_equal(bits(rows), bits(c_grads(exe, W1, W2, X, T, order))), order
        seen[order] = rows
    if D == 100:  # at a real size the two orders are two different answers
        assert not np.array_equal(bits(seen["tree"]), bits(seen["sequential"]))


PG = {"D": 5, "H": 3, "O": 2, "B": 7, "workers": 2}


@pytest.mark.parametrize("executor, workers", [("thread", 2), ("process", 3)])
def test_parallel_grad_sequential_is_the_scalar_loop_on_every_executor(executor, workers):
    dims = Dims(5, 3, 2)
    w, x, t = init_data(dims, 7)
    W1, W2 = w[: dims.n_w1].reshape(3, 5), w[dims.n_w1 :].reshape(2, 3)
    reference = np.stack([mlp_grads(W1, W2, x[b], t[b], "sequential") for b in range(7)])
    out = pg.run(ctx({**PG, "executor": executor, "workers": workers, "reduction": "sequential"}))
    assert all(c.passed for c in out.checks), [(c.name, c.detail) for c in out.checks]
    assert out.digest == hashlib.sha256(reference.tobytes()).hexdigest()


def test_parallel_grad_tree_default_keeps_its_digest():
    run = {**PG, "D": 8, "H": 16, "O": 4, "B": 8, "executor": "thread"}
    tree = pg.run(ctx({**run, "reduction": "tree"})).digest
    assert tree == pg.run(ctx(run)).digest == "3814f0647e698ab85f962a8cd3131eb7945b24dbeaa63924daabc93b0117ae71"
    assert pg.run(ctx({**run, "reduction": "sequential"})).digest != tree


DP = {"D": 7, "H": 4, "O": 3, "B": 6, "steps": 3, "lr_num": 1, "lr_den": 20, "workers": 2, "step_exp": 3,
      "tol_permil": 30, "d4_examples": 0}


def test_dp_train_sequential_is_bit_identical_across_executors():
    digests = set()
    for executor in ("thread", "process"):
        out = dp_train.run(ctx({**DP, "executor": executor, "reduction": "sequential"}))
        assert all(c.passed for c in out.checks), [(c.name, c.detail) for c in out.checks]
        digests.add(out.digest)
    assert len(digests) == 1
    assert digests != {dp_train.run(ctx({**DP, "executor": "thread", "reduction": "tree"})).digest}


def test_ta_gradcheck_is_green_in_both_orders():
    params = {"D": 7, "H": 4, "O": 3, "B": 3, "step_exp": 3, "tol_permil": 10}
    for order in ORDERS:
        out = ta_gradcheck.run(ctx({**params, "reduction": order}))
        assert all(c.passed for c in out.checks), (order, [(c.name, c.detail) for c in out.checks])


def test_reduction_option_is_the_set_parameter(invoke):
    a = invoke("run", "parallel-grad", "--reduction", "sequential", "--json", "-", "--executor", "thread")
    b = invoke("run", "parallel-grad", "--set", "reduction=sequential", "--json", "-", "--executor", "thread")
    assert a.exit_code == b.exit_code == 0
    import json

    ma, mb = (json.loads(r.stdout)["gates"][0] for r in (a, b))
    assert ma["params"]["reduction"] == "sequential"
    assert ma["metrics"]["grads_sha256"] == mb["metrics"]["grads_sha256"]


def test_an_unknown_reduction_is_a_usage_error(invoke):
    r = invoke("run", "parallel-grad", "--reduction", "pairwise")
    assert r.exit_code == 2
    assert "reduction must be one of tree, sequential" in r.stderr
