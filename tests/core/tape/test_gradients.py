"""The tape's gradients against float64 central differences: each op's, the planted relu fault seen by the
op check, and a whole MLP pass against brute-force float64 differences."""

import numpy as np
import pytest

from nxgates.core.mlp import Dims, example_grads, init_data
from nxgates.core.tape import F32, Tape
from nxgates.gates import ta_gradcheck


@pytest.mark.parametrize("case", ta_gradcheck.OPS, ids=lambda c: c.name)
def test_each_op_matches_float64_central_differences(case):
    v = ta_gradcheck.check_op(case, 1e-6, 10, fault=None)
    assert v.passed and v.worst <= 1, v


def test_wrong_relu_derivative_is_seen_by_the_op_check():
    relu = next(c for c in ta_gradcheck.OPS if c.name == "relu")
    assert not ta_gradcheck.check_op(relu, 1e-6, 10, fault="relu-grad").passed


def test_mlp_grads_match_brute_force_float64_differences():
    """An independent brute-force check of the whole MLP (one whole float64 forward per cell)."""
    dims = Dims(3, 5, 2)
    w, x, t = init_data(dims, 2)
    out = np.empty(dims.n_params, F32)
    example_grads(Tape(dims.arena), dims, w, x[1], t[1], out)

    def loss(wv):
        W1, W2 = wv[:15].reshape(5, 3), wv[15:].reshape(2, 5)
        y = W2 @ np.maximum(W1 @ x[1].astype(float), 0)
        return np.mean((y - t[1]) ** 2)

    w64 = w.astype(float)
    num = [(loss(w64 + e * 1e-6) - loss(w64 - e * 1e-6)) / 2e-6 for e in np.eye(w.size)]
    assert np.allclose(out, num, atol=1e-4)
    assert np.allclose(ta_gradcheck.mlp_numeric(dims, w, x[1], t[1], 1e-6), num, atol=1e-6)
