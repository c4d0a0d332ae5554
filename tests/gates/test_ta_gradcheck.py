"""The ta-gradcheck gate: green on the real tape, red with a wrong relu derivative."""

import pytest

from nxgates.gates import ta_gradcheck as tg
from tests.conftest import ctx

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
