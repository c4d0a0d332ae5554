"""The float64 gradient check: the permil rule, and the MLP's central differences against whole forwards."""

import numpy as np
import pytest

from nxgates.core.mlp import Dims
from nxgates.core.numeric import Verdict, compare, mlp_numeric


def test_the_error_is_in_permil_of_the_largest_analytic_gradient_rounded_down():
    analytic = np.array([1.0, -4.0, 2.0])
    numeric = np.array([1.0039, -4.0, 1.9])  # 0.0039 * 1000 / 4 = 0.975, 0.1 * 1000 / 4 = 25
    v = compare(analytic, numeric, 25)
    assert v == Verdict(cells=3, n_pass=3, worst=25, maxabs=4.0)
    assert v.passed
    assert compare(analytic, numeric, 24) == Verdict(3, 2, 25, 4.0)
    assert not compare(analytic, numeric, 24).passed
    assert compare(analytic, numeric, 0) == Verdict(3, 2, 25, 4.0)


def test_an_error_just_short_of_a_whole_permil_rounds_down():
    v = compare(np.array([1.0, 2.0]), np.array([1.0, 0.001]), 999)  # 1.999 * 1000 / 2 = 999.5
    assert v == Verdict(2, 2, 999, 2.0)
    assert compare(np.array([1.0, 2.0]), np.array([1.0, 0.001]), 998) == Verdict(2, 1, 999, 2.0)


@pytest.mark.skipif(np.finfo(np.longdouble).eps == np.finfo(np.float64).eps, reason="long double is double here")
def test_the_rule_is_computed_in_float64_whatever_the_inputs_precision():
    """1.002 - 2**-56 in long double is 1.002 in float64: 0.002 * 1000 / 2 = 1.0000000000000009 permil."""
    numeric = np.array([np.longdouble(1) + np.longdouble("0.002") - np.longdouble(2.0**-56), 2.0], np.longdouble)
    assert compare(np.array([1.0, 2.0]), numeric, 0) == Verdict(2, 1, 1, 2.0)


def test_the_verdict_holds_python_numbers():
    v = compare(np.array([2.0, 1.0], np.float32), np.array([2.5, 1.0]), 300)
    assert v == Verdict(2, 2, 250, 2.0)
    assert type(v.cells) is int and type(v.n_pass) is int and type(v.worst) is int and type(v.maxabs) is float


def test_the_error_is_measured_both_ways():
    v = compare(np.array([10.0, 10.0]), np.array([10.05, 9.95]), 100)
    assert v == Verdict(2, 2, 5, 10.0)
    assert compare(np.array([10.0, 10.0]), np.array([10.05, 9.95]), 4) == Verdict(2, 0, 5, 10.0)


def test_arrays_of_any_shape_are_compared_cell_by_cell():
    analytic = np.array([[1.0, 2.0], [3.0, 8.0]])
    numeric = np.array([1.0, 2.0, 3.0, 8.8])
    assert compare(analytic, numeric, 99) == Verdict(4, 3, 100, 8.0)
    assert compare(numeric, analytic.T.copy(), 100) == Verdict(4, 2, 113, 8.8)  # transposed: 2 and 3 swap


def test_integer_gradients_are_compared_as_float64():
    analytic = np.array([-128, 64], np.int8)  # |-128| does not fit in int8
    assert compare(analytic, np.array([-128.0, 63.0]), 10) == Verdict(2, 2, 7, 128.0)


def test_all_zero_gradients_are_measured_against_a_tiny_floor():
    v = compare(np.zeros(3), np.array([0.0, 1e-33, 0.0]), 1)
    assert v == Verdict(3, 3, 1, 1e-30)
    assert compare(np.zeros(3), np.array([0.0, 2e-33, 0.0]), 1) == Verdict(3, 2, 2, 1e-30)


def test_a_non_finite_numeric_gradient_fails_with_the_largest_error():
    v = compare(np.array([1.0, 2.0, 3.0]), np.array([1.0, np.nan, 3.0]), 1000)
    assert v == Verdict(3, 2, 1 << 62, 3.0)
    assert not v.passed
    assert compare(np.array([1.0, 2.0]), np.array([np.inf, 2.0]), 10**9) == Verdict(2, 1, 1 << 62, 2.0)


def test_a_huge_error_is_capped():
    assert compare(np.array([1e-20, 1.0]), np.array([1e300, 1.0]), 5).worst == 1 << 62


def test_no_cells_is_nothing_to_judge():
    with pytest.raises(ValueError, match="zero-size array"):
        compare(np.zeros(0), np.zeros(0), 5)
    assert not Verdict(0, 0, 0, 1e-30).passed


# ---- the MLP's numeric gradient ---------------------------------------------------------------------------


def _loss(dims, w, x, t):
    W1, W2 = w[: dims.n_w1].reshape(dims.H, dims.D), w[dims.n_w1 :].reshape(dims.O, dims.H)
    y = W2 @ np.maximum(W1 @ x, 0.0)
    return np.mean((y - t) ** 2)


def _whole_forwards(dims, w, x, t, step):
    """Central differences the slow way: two whole float64 forwards per weight."""
    w, x, t = w.astype(np.float64), x.astype(np.float64), t.astype(np.float64)
    g = np.empty(w.size)
    for k in range(w.size):
        plus, minus = w.copy(), w.copy()
        plus[k] += step
        minus[k] -= step
        g[k] = (_loss(dims, plus, x, t) - _loss(dims, minus, x, t)) / (2 * step)
    return g


def _problem(dims, seed):
    rng = np.random.default_rng(seed)
    w = rng.uniform(-1, 1, dims.n_params).astype(np.float32)
    x = rng.uniform(-1, 1, dims.D).astype(np.float32)
    t = rng.uniform(-1, 1, dims.O).astype(np.float32)
    return w, x, t


@pytest.mark.parametrize(("dims", "step"), [(Dims(4, 5, 3), 1e-3), (Dims(3, 7, 2), 0.25), (Dims(6, 2, 4), 0.05)])
def test_the_numeric_gradient_is_the_central_difference_of_whole_forwards(dims, step):
    w, x, t = _problem(dims, seed=dims.D * 100 + dims.H)
    fast = mlp_numeric(dims, w, x, t, step)
    assert fast.shape == (dims.n_params,) and fast.dtype == np.float64
    np.testing.assert_allclose(fast, _whole_forwards(dims, w, x, t, step), rtol=1e-9, atol=1e-11)


def test_a_step_across_the_relus_kink_is_differenced_not_assumed():
    """h[0] is exactly 0 and h[1] is small: +-step lands on both sides of the kink."""
    dims = Dims(2, 3, 2)
    w = np.array([0.5, -0.25, 0.03, 0.01, 1.0, 1.0,  # W1 (3 x 2): h = [0, 0.02, 1.5] for x = [1, 2]
                  1.0, -2.0, 0.5, 0.75, 0.5, -1.0], np.float32)
    x = np.array([1.0, 2.0], np.float32)
    t = np.array([0.25, -0.5], np.float32)
    fast = mlp_numeric(dims, w, x, t, 0.125)
    np.testing.assert_allclose(fast, _whole_forwards(dims, w, x, t, 0.125), rtol=1e-12, atol=1e-14)
    assert fast[0] != 0.0 and fast[1] != 0.0  # relu(0 +- d x) moves y on one side only


def test_a_one_cell_network_gives_the_exact_difference():
    # h = 1, y = 1, t = 0: W1 +-0.5 gives losses 2.25 and 0.25, W2 +-0.5 the same
    assert mlp_numeric(Dims(1, 1, 1), np.array([1.0, 1.0], np.float32), np.array([1.0], np.float32),
                       np.array([0.0], np.float32), 0.5).tolist() == [2.0, 2.0]


def test_wide_inputs_are_differenced_a_few_hidden_rows_at_a_time():
    """With D = 2**20 the rows are taken one at a time: every one of them is still differenced."""
    dims = Dims(1 << 20, 3, 1)
    w = np.zeros(dims.n_params, np.float32)
    w[: dims.n_w1].reshape(3, -1)[:, 0] = [1.0, 2.0, -1.0]
    w[dims.n_w1 :] = [1.0, 0.5, 2.0]
    x = np.zeros(dims.D, np.float32)
    x[0], x[-1] = 1.0, 1.0
    t = np.array([0.0], np.float32)
    g = mlp_numeric(dims, w, x, t, 0.25)
    g1 = g[: dims.n_w1].reshape(3, -1)
    # h = [1, 2, -1], y = 2: dL/dW1[i, j] = 2 y W2[i] x[j] where h[i] > 0
    assert g1[:, 0].tolist() == [4.0, 2.0, 0.0]
    assert g1[:, -1].tolist() == [4.0, 2.0, 0.0]
    assert np.count_nonzero(g1) == 4
    assert g[dims.n_w1 :].tolist() == [4.0, 8.0, 0.0]


def test_a_non_finite_gradient_fails_its_cell_without_a_numpy_warning():
    """A diverged run's gradients: inf and NaN cells fail, the finite ones are judged, and stderr stays clean."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        v = compare(np.array([np.inf, 1.0, np.nan]), np.array([1.0, 1.0, 1.0]), 10)
        w = compare(np.array([1e308, -1e308]), np.array([-1e308, 1e308]), 10)
    assert (v.cells, v.n_pass, v.worst) == (3, 0, 1 << 62)
    assert (w.cells, w.n_pass) == (2, 0)
