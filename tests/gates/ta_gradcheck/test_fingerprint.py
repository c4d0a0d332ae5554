"""The ta-gradcheck gate's fingerprint: per op and for the MLP the cells checked, passed and the worst
error; a wrong relu derivative moves relu's figures and the MLP's, no other op's."""

from nxgates.baseline.compare import figure_lines
from nxgates.gates import ta_gradcheck as tg
from tests.helpers import ctx

SEED = {"D": 8, "H": 16, "O": 4, "B": 8, "step_exp": 6, "tol_permil": 10}


def test_every_op_and_the_mlp_pin_their_figures():
    out = tg.run(ctx(SEED))
    figures = out.fingerprints
    per_op = [f"{c.name}_{f}" for c in tg.OPS for f in ("cells", "cells_passed", "worst_permil", "max_abs_grad")]
    assert list(figures) == [*per_op, "mlp_cells", "mlp_cells_passed", "mlp_worst_permil"]
    assert figures["matvec_cells"] == 5 * 7 + 7 and figures["matvec_cells_passed"] == figures["matvec_cells"]
    assert isinstance(figures["matvec_max_abs_grad"], float)
    for name in ("mlp_cells", "mlp_cells_passed", "mlp_worst_permil"):
        assert figures[name] == out.metrics[name]


def test_a_wrong_relu_derivative_moves_relu_and_the_mlp_alone():
    lines = list(figure_lines("ta-gradcheck", tg.run(ctx(SEED)).fingerprints,
                              tg.run(ctx(SEED, fault="relu-grad")).fingerprints))
    moved = {line.split(":")[0].split()[1] for line in lines}
    assert {"relu_cells_passed", "relu_worst_permil", "mlp_cells_passed", "mlp_worst_permil"} <= moved
    assert all(name.startswith(("relu_", "mlp_")) for name in moved), moved
