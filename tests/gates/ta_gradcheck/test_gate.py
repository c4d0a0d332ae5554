"""The ta-gradcheck gate: green on the real tape, red with a wrong relu derivative."""

import numpy as np
import pytest

from nxgates.core.mlp import Dims, init_data
from nxgates.gates import ta_gradcheck as tg
from tests.helpers import ctx

SEED = {"D": 8, "H": 16, "O": 4, "B": 8, "step_exp": 6, "tol_permil": 10}


def test_green_at_seed_sizes():
    out = tg.run(ctx(SEED))
    assert all(c.passed for c in out.checks)
    assert [c.name for c in out.checks] == list(tg.GATE.checks)
    assert out.metrics["mlp_cells"] == 8 * 192


@pytest.mark.parametrize("D,H,O,B", [(3, 5, 2, 2), (17, 6, 3, 3), (40, 24, 7, 2)])
def test_green_at_other_sizes(D, H, O, B):
    out = tg.run(ctx({**SEED, "D": D, "H": H, "O": O, "B": B}))
    assert all(c.passed for c in out.checks)


def test_wrong_relu_derivative_fails_relu_and_mlp():
    out = tg.run(ctx(SEED, fault="relu-grad"))
    failed = {c.name for c in out.checks if not c.passed}
    assert failed == {"op relu", "MLP per-example grads"}


def test_compare_rule_matches_the_lora_gate():
    assert tg.compare([10.0, -5.0], [10.0, -5.0], 0).passed
    v = tg.compare([10.0, -5.0], [10.0, -5.75], 70)  # 0.75 / 10 = 75 permil
    assert (v.n_pass, v.worst) == (1, 75)


def _whole_forward_differences(dims, w, x, t, step):
    """The definition: a whole float64 forward per moved weight, ``(L(+d) - L(-d)) / 2d``."""
    w, x, t = w.astype(np.float64), x.astype(np.float64), t.astype(np.float64)

    def loss(v):
        W1, W2 = v[: dims.n_w1].reshape(dims.H, dims.D), v[dims.n_w1 :].reshape(dims.O, dims.H)
        return np.mean((W2 @ np.maximum(W1 @ x, 0.0) - t) ** 2)

    out = []
    for n in range(w.size):
        moved = []
        for sign in (1.0, -1.0):
            v = w.copy()
            v[n] += sign * step
            moved.append(loss(v))
        out.append((moved[0] - moved[1]) / (2 * step))
    return np.array(out)


@pytest.mark.parametrize("kink", [False, True])
def test_mlp_differences_equal_whole_forwards(kink):
    """The O(H*D + H*O) differences are the whole forwards' (to float64 rounding), also where a move of
    W1 crosses relu's kink (h[0] set within d*|x| of 0: one side moves h[0] and the other does not)."""
    dims = Dims(5, 7, 3)
    w, x, t = init_data(dims, 1)
    w, x, t = w.astype(np.float64), x[0].astype(np.float64), t[0].astype(np.float64)
    step = 1e-6
    if kink:
        w[0] -= (w[: dims.D] @ x - 0.3 * step * abs(x[0])) / x[0]  # h[0] = 0.3 d |x[0]| > 0
    fast = tg.mlp_numeric(dims, w, x, t, step)
    whole = _whole_forward_differences(dims, w, x, t, step)
    assert np.max(np.abs(fast - whole)) <= 1e-7 * np.max(np.abs(whole))
    if kink:  # W1[0, 0]'s +-d moves of h[0] are d|x0| and 0.3 d|x0| (relu clips the other 0.7): 1.3 / 2
        W2 = w[dims.n_w1 :].reshape(dims.O, dims.H)
        residual = W2 @ np.maximum(w[: dims.n_w1].reshape(dims.H, dims.D) @ x, 0.0) - t
        derivative = 2 * (residual @ W2[:, 0]) * x[0] / dims.O  # on the active side of the kink
        assert abs(fast[0] / derivative - 0.65) < 1e-3
