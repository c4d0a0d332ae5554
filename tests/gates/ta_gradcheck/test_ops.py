"""ta-gradcheck op by op: its inputs, the central differences it takes, and every line and figure it reports."""

import numpy as np
import pytest

from nxgates.core.mlp import REDUCTIONS
from nxgates.core.numeric import Verdict
from nxgates.core.tape import F32, ArenaFull, Tape, tree_sum
from nxgates.gatekit import Line, RunContext
from nxgates.gates import ta_gradcheck as tg
from nxgates.gates._tape_faults import ReluGradEverywhereTape
from tests.helpers import Units, ctx

SMALL = {"D": 3, "H": 4, "O": 2, "B": 3, "step_exp": 6, "tol_permil": 10}


def shown(out):
    return [(i.level, i.text) if isinstance(i, Line) else (i.name, i.passed, i.detail) for i in out.items]


def test_values_walk_thirteen_odd_sixteenths_from_the_salt():
    v = tg._values(6, 3)
    assert v.dtype == F32
    assert v.tolist() == [-7 / 16, 7 / 16, -5 / 16, 9 / 16, -3 / 16, 11 / 16]
    assert tg._values(3, 11).tolist() == [9 / 16, -3 / 16, 11 / 16]


def test_values_are_never_zero_and_stay_within_thirteen_sixteenths():
    v = tg._values(13 * 5, 0)
    assert np.all(v != 0) and np.abs(v).max() == F32(13 / 16) and len(set(v.tolist())) == 13


def test_tape_for_plants_the_relu_fault_through_its_tape_class():
    def reduce(buf, axis):
        return tree_sum(buf, axis)

    plain, faulty = tg.tape_for(None, 100, reduce), tg.tape_for("relu-grad", 50)
    assert type(plain) is Tape and plain.capacity == 100 and plain.reduce is reduce
    assert type(faulty) is ReluGradEverywhereTape and faulty.capacity == 50 and faulty.reduce is tree_sum


# the checked op's verdict at d=1e-6, tolerance 0: every input cell, the largest analytic gradient
VERDICTS = {
    "matvec": Verdict(42, 42, 0, 0.97265625),
    "matmul": Verdict(32, 32, 0, 1.01171875),
    "add": Verdict(12, 12, 0, 0.8125),
    "mul": Verdict(12, 12, 0, 0.24609375),
    "relu": Verdict(9, 9, 0, 0.5625),
    "sum": Verdict(10, 10, 0, 0.5625),
    "mse": Verdict(8, 8, 0, 0.38671875),
}


@pytest.mark.parametrize("case", tg.OPS, ids=lambda c: c.name)
def test_each_op_matches_its_float64_differences_exactly_at_tolerance_0(case):
    assert tg.check_op(case, 1e-6, 0, None) == VERDICTS[case.name]


def test_a_wrong_relu_derivative_fails_the_five_negative_inputs():
    relu = next(c for c in tg.OPS if c.name == "relu")
    assert tg.check_op(relu, 1e-3, 0, "relu-grad") == Verdict(9, 4, 1000, 0.8125)


def test_an_op_twice_its_reference_fails_by_the_ratio_of_each_weight_to_the_largest():
    """Tape 2x, reference x, weights (9, -3, 11, -1)/16: each cell is off by |w| / (2 * 11/16) of max|ana|."""
    twice = tg.OpCase("twice", ((4,),), lambda t, n: t.add(n[0], n[0]), lambda a: a[0])
    assert tg.check_op(twice, 1e-3, 136, None) == Verdict(4, 2, 500, 1.375)
    assert tg.check_op(twice, 1e-3, 135, None).n_pass == 1


def test_differences_of_a_curved_reference_are_central():
    """x^3 against the tape's x*x*x: a one-sided or mis-scaled difference is off by far more than 1 permil."""
    cube = tg.OpCase("cube", ((5,),), lambda t, n: t.mul(t.mul(n[0], n[0]), n[0]), lambda a: a[0] ** 3)
    v = tg.check_op(cube, 1e-4, 0, None)
    assert (v.cells, v.n_pass, v.worst) == (5, 5, 0)


def test_every_input_of_a_two_input_op_gets_its_own_values():
    """mul's gradients are the other input times the weights: a shared salt would make them equal."""
    mul = next(c for c in tg.OPS if c.name == "mul")
    seen = []
    probe = tg.OpCase("probe", mul.shapes, lambda t, n: t.mul(n[0], n[1]),
                      lambda a: seen.append([x.copy() for x in a]) or a[0] * a[1])
    tg.check_op(probe, 1e-6, 0, None)
    first = seen[0]
    assert first[0].tolist() == [v / 16 for v in (-7, 7, -5, 9, -3, 11)]
    assert first[1].tolist() == [v / 16 for v in (-3, 11, -1, -13, 1, -11)]
    assert len(seen) == 1 + 2 * 12


def test_the_memory_asked_for_is_four_gradient_copies_a_fixed_arena_and_the_batch(monkeypatch):
    asked = []
    monkeypatch.setattr(tg, "require", lambda nbytes, what: asked.append((nbytes, what)))
    tg.validate({**SMALL, "D": 5, "H": 7, "O": 3, "B": 11})
    assert asked == [(8 * (4 * (35 + 21) + (1 << 23)) + 4 * 11 * (5 + 3), "ta-gradcheck at D=5 H=7 O=3")]


def test_a_green_run_prints_every_op_and_the_mlp():
    out = tg.run(ctx(SMALL))
    assert shown(out) == [
        ("info", "nx_ta_gradcheck: f32 tape autograd vs float64 central differences (d=1e-6, tol=10permil of "
                 "max|grad|)"),
        ("op matvec", True, "42/42 cells (worst=0permil of max|grad|=0.972656)"),
        ("op matmul", True, "32/32 cells (worst=0permil of max|grad|=1.01172)"),
        ("op add", True, "12/12 cells (worst=0permil of max|grad|=0.8125)"),
        ("op mul", True, "12/12 cells (worst=0permil of max|grad|=0.246094)"),
        ("op relu", True, "9/9 cells (worst=0permil of max|grad|=0.5625)"),
        ("op sum", True, "10/10 cells (worst=0permil of max|grad|=0.5625)"),
        ("op mse", True, "8/8 cells (worst=0permil of max|grad|=0.386719)"),
        ("info", " MLP per-example: 60/60 cells over 3 examples (worst=0permil)"),
        ("MLP per-example grads", True, "3 examples x 20 cells, worst=0permil"),
    ]
    assert out.metrics == {"ops_passed": 7, "ops": 7, "mlp_cells": 60, "mlp_cells_passed": 60,
                           "mlp_worst_permil": 0}
    assert out.digest == "7:60:0"
    assert out.green == "TA-GRADCHECK GREEN 8/8 -- every autograd op and the MLP match float64 differences"


def test_a_wrong_relu_derivative_run_reports_the_failing_op_and_examples():
    out = tg.run(ctx(SMALL, fault="relu-grad"))
    lines = shown(out)
    assert lines[5] == ("op relu", False, "4/9 cells (worst=1000permil of max|grad|=0.8125)")
    assert lines[8:] == [("info", " MLP per-example: 48/60 cells over 3 examples (worst=787permil)"),
                         ("MLP per-example grads", False, "12 cells wrong in examples 0, 1, 2")]
    assert out.metrics == {"ops_passed": 6, "ops": 7, "mlp_cells": 60, "mlp_cells_passed": 48,
                           "mlp_worst_permil": 787}
    assert out.digest == "6:48:787"
    assert out.red == "TA-GRADCHECK RED 6/8 -- an autograd gradient is wrong"
    f = out.fingerprints
    assert [f[f"relu_{k}"] for k in ("cells", "cells_passed", "worst_permil", "max_abs_grad")] == [9, 4, 1000, 0.8125]
    assert [f[f"mlp_{k}"] for k in ("cells", "cells_passed", "worst_permil")] == [60, 48, 787]
    assert list(f)[:4] == ["matvec_cells", "matvec_cells_passed", "matvec_worst_permil", "matvec_max_abs_grad"]


def test_at_most_eight_failing_examples_are_named():
    out = tg.run(ctx({**SMALL, "B": 10}, fault="relu-grad"))
    assert out.checks[-1].detail.endswith(" cells wrong in examples 0, 1, 2, 3, 4, 5, 6, 7")


def test_the_checks_are_every_op_then_the_mlp():
    assert tg.GATE.checks == ("op matvec", "op matmul", "op add", "op mul", "op relu", "op sum", "op mse",
                              "MLP per-example grads")


def test_the_mlp_is_differentiated_in_the_chosen_reduction_order(monkeypatch):
    used = []
    real = tg.tape_for

    def recording(fault, capacity, reduce=tree_sum):
        used.append(reduce)
        return real(fault, capacity, reduce)

    monkeypatch.setattr(tg, "tape_for", recording)
    for order in ("tree", "sequential"):
        used.clear()
        assert all(c.passed for c in tg.run(ctx({**SMALL, "reduction": order})).checks)
        assert set(used) == {REDUCTIONS[order]}


def test_units_at_relus_kink_are_not_judged_in_either_order():
    """Example 5's ten hidden units sit at h = 0 in exact arithmetic: the last bits of a tree or a sequential
    sum put them on either side of the kink, so their W1 rows are counted apart, never judged by a coin toss."""
    p = {"D": 200, "H": 64, "O": 10, "B": 6, "step_exp": 1, "tol_permil": 29}
    for order in ("tree", "sequential"):
        out = tg.run(ctx({**p, "reduction": order}))
        assert (out.digest, out.checks[-1].passed) == ("6:78640:0", True)
        assert out.checks[-1].detail == "6 examples x 13440 cells, worst=0permil; 2000 cells at relu's kink not judged"


def test_the_mlp_is_checked_on_given_inputs():
    arrays = {"W1": np.full((4, 3), 0.5, F32), "W2": np.full((2, 4), -0.25, F32),
              "X": np.array([[1, -1, 0.5], [-2, 1, 1], [0.25, 0.5, -1]], F32), "T": np.ones((3, 2), F32)}
    out = tg.run(ctx(SMALL, fault="relu-grad", inputs=arrays))
    # example 1's units all sit at h = 0 (W1 is 0.5 everywhere, x = [-2, 1, 1]): only example 2 is judged wrong
    assert out.digest == "6:36:1000"
    assert out.checks[-1].detail == "12 cells wrong in examples 2; 12 cells at relu's kink not judged"


def test_progress_counts_the_mlp_examples():
    units = Units()
    tg.run(RunContext(params=dict(SMALL), progress=units))
    assert units.units == [["MLP examples", 3, 3]]


def test_an_op_is_differentiated_in_the_reduction_order_given():
    """A matvec by an inexact matrix: its backward's column sums round differently in the two orders."""
    m = (np.arange(60).reshape(12, 5) * 0.1 + 1 / 3).astype(F32)
    case = tg.OpCase("inexact", ((5,),), lambda t, n: t.matvec(t.leaf(m, requires_grad=False), n[0]),
                     lambda a: m.astype(np.float64) @ a[0])
    assert tg.check_op(case, 1e-6, 0, None).maxabs == 3.366666555404663
    assert tg.check_op(case, 1e-6, 0, None, REDUCTIONS["sequential"]).maxabs == 3.366666793823242


def test_an_op_case_gets_a_tape_of_4096_floats():
    """relu of 1023 inputs records 4093 floats; of 1024, one more than the tape holds."""
    def relu_of(n):
        return tg.OpCase("relu", ((n,),), lambda t, x: t.relu(x[0]), lambda a: np.maximum(a[0], 0.0))

    assert tg.check_op(relu_of(1023), 1e-3, 0, None).cells == 1023
    with pytest.raises(ArenaFull, match=r"^tape arena full: 4097 floats needed, capacity 4096$"):
        tg.check_op(relu_of(1024), 1e-3, 0, None)


def test_the_step_is_ten_to_the_minus_step_exp():
    """At d=0.1 relu's differences straddle its kink at the inputs +-1/16 and +-3/16."""
    out = tg.run(ctx({**SMALL, "step_exp": 1}))
    assert [(c.name, c.detail) for c in out.checks if not c.passed] == [
        ("op relu", "7/9 cells (worst=229permil of max|grad|=0.5625)")]
