"""A clean run of a built-in gate at any sizes its parameter ranges admit is GREEN, or refused with a usage
error (exit 2) that says why; never RED for nothing the user broke. Property-tested from each range's smallest
sizes, and case by case where it takes care: a learning rate derived for the sizes (lora-train, dp-train),
relu's kink and float32's rounding not judged as gradient errors (ta-gradcheck, dp-train's D4), and starts at
which a check could only fail refused, with why."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nxgates import registry
from nxgates.core import lora as core_lora
from nxgates.core.mlp import Dims, init_data
from nxgates.errors import ConfigError, NxError
from nxgates.gates import dp_train, lora_train, ta_gradcheck
from nxgates.gates import parallel_grad as pg
from nxgates.gates._judgeable import at_target, judged_cells
from nxgates.gates.lora import gate as lora
from nxgates.runner import run_gate
from tests.helpers import ctx

SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def entry(name):
    return registry.load(registry.PACKAGED_CONFIG).gates[name]


def lora_sizes(tokens=8, width=24):
    """T, DM and R <= DM, from 1 up."""
    return st.tuples(st.integers(1, tokens), st.integers(1, width)).flatmap(
        lambda td: st.integers(1, td[1]).map(lambda r: {"T": td[0], "DM": td[1], "R": r}))


def mlp_sizes(width=24, out=8, batch=(2, 12)):
    return st.fixed_dictionaries({"D": st.integers(1, width), "H": st.integers(1, width), "O": st.integers(1, out),
                                  "B": st.integers(*batch)})


def assert_green_or_refused(name, sizes):
    e = entry(name)
    params = {**e.defaults, **sizes}
    try:
        e.gate.validate(params)
        report = run_gate(e, params)
    except NxError as exc:  # refused: a usage error with its reason (exit 2)
        assert str(exc).strip() and "\n" not in str(exc).strip(), exc
        return
    failed = [f"{c.name}: {c.detail}" for c in report.output.checks if not c.passed]
    assert report.error is None and report.passed, (name, sizes, report.error, failed)


@SETTINGS
@given(lora_sizes())
def test_lora(sizes):
    assert_green_or_refused("lora", sizes)


@SETTINGS
@given(lora_sizes(), st.integers(1, 10))
def test_lora_train(sizes, steps):
    assert_green_or_refused("lora-train", {**sizes, "steps": steps})


@SETTINGS
@given(mlp_sizes(batch=(2, 16)))
def test_parallel_grad(sizes):
    assert_green_or_refused("parallel-grad", sizes)


@SETTINGS
@given(mlp_sizes(batch=(1, 8)))
def test_ta_gradcheck(sizes):
    assert_green_or_refused("ta-gradcheck", sizes)


@SETTINGS
@given(mlp_sizes(width=16, out=6, batch=(2, 8)), st.integers(2, 5))
def test_dp_train(sizes, steps):
    assert_green_or_refused("dp-train", {**sizes, "steps": steps})


LT = {"T": 3, "DM": 6, "R": 2, "steps": 10, "lr_q": 0, "delta": 2097, "tol_permil": 70}


DP = {"D": 8, "H": 16, "O": 4, "B": 8, "steps": 5, "lr_num": 1, "lr_den": 0, "workers": 2, "executor": "thread",
      "step_exp": 6, "tol_permil": 10, "d4_examples": 0, "reduction": "tree"}


TA = {"D": 8, "H": 16, "O": 4, "B": 8, "step_exp": 6, "tol_permil": 10}


class Verdict:
    def __init__(self, passed):
        self.passed = passed


def failing(out):
    return [f"{c.name}: {c.detail}" for c in out.checks if not c.passed]


def defaults(name):
    return registry.load(registry.PACKAGED_CONFIG).gates[name].defaults


# ---- lora-train ----

def test_lora_train_derives_the_seeds_own_rate_at_the_seeds_sizes():
    assert defaults("lora-train")["lr_q"] == 104858  # the seed's rate; 0 derives it
    derived, given = lora_train.run(ctx(LT)), lora_train.run(ctx({**LT, "lr_q": 104858}))
    assert derived.metrics == given.metrics and derived.metrics["lr_q"] == 104858
    assert derived.digest == given.digest and derived.fingerprints == given.fingerprints
    assert [i.text for i in derived.lines() if hasattr(i, "text")] == [i.text for i in given.lines()
                                                                        if hasattr(i, "text")]


@pytest.mark.parametrize("sizes", [{"DM": 64}, {"T": 8, "DM": 24, "R": 3}, {"T": 5, "DM": 48, "R": 24}])
def test_lora_train_at_wider_sizes_is_green_with_the_derived_rate(sizes):
    """0.1 (the seed's rate) makes these losses rise: that run is refused (the user broke nothing), and the
    derived rate makes them fall."""
    with pytest.raises(ConfigError, match=r"the loss did not fall at lr_q=104858, above the rate \d+ these sizes"):
        lora_train.run(ctx({**LT, **sizes, "lr_q": 104858}))
    assert failing(lora_train.run(ctx({**LT, **sizes, "lr_q": 104857})))  # a rate of the user's own: RED
    out = lora_train.run(ctx({**LT, **sizes}))
    assert not failing(out) and out.metrics["lr_q"] < 104858


def test_the_derived_rate_is_three_fifths_of_one_over_the_curvature_bound():
    m = core_lora.init_model(3, 64, 2)
    f = core_lora.forward(m)
    S = 1 << 20
    nX, nB, nH, nY = (int(np.sum(t.astype(object) ** 2)) for t in (m.x, m.B, f.h, f.y))
    curvature = 2 * (nX * nB + nH * S * S) + 2 * S * S * (int(np.sqrt(float(nX * nY))) + 1)
    assert abs(lora_train.derived_lr_q(m, f) - 3 * S**5 // (5 * curvature)) <= 1


def test_lora_train_refuses_a_start_where_h_is_zero():
    """DM and R multiples of 11: every x row sums to zero over the formulas' period and A's rows are equal."""
    with pytest.raises(ConfigError, match=r"lora-train at T=3 DM=22 R=11: h = x@A is zero at the start"):
        lora_train.run(ctx({**LT, "DM": 22, "R": 11}))


@pytest.mark.parametrize("sizes, message", [
    ({"T": 1, "R": 1}, "the final dB is too small for L3's Q20 gradcheck to resolve (max|grad| 169 < 16 x the "
                       "central difference's rounding 1167)"),
    ({"T": 1, "DM": 3, "R": 1, "steps": 1}, "the final dA is too small for L3's Q20 gradcheck to resolve (max|grad| "
                                            "514 < 16 x the central difference's rounding 358)")])
def test_lora_train_refuses_a_final_gradcheck_that_failed_on_rounding(sizes, message):
    """T=1 DM=6 R=1: h crosses zero at the last step, so dB is tiny; T=1 DM=3 R=1 after one step: dA is. Either
    way L3 went RED on a clean run; the run is refused, naming both figures."""
    with pytest.raises(ConfigError) as info:
        lora_train.run(ctx({**LT, **sizes}))
    assert message in str(info.value)


def test_a_gradcheck_that_passes_or_resolves_is_never_refused():
    run = lora_train.train(3, 6, 2, 10, 104858, ctx(LT))
    grads = (run.dA, run.dB)
    passed, failed = Verdict(True), Verdict(False)
    lora_train.refuse_unresolvable(run.final, grads, [passed, passed], 2097, "seed")  # passed: nothing to refuse
    lora_train.refuse_unresolvable(run.final, grads, [failed, failed], 2097, "seed")  # resolvable: a FAIL stands
    with pytest.raises(ConfigError, match="lora-train at seed: the final dB is too small"):
        lora_train.refuse_unresolvable(run.final, (run.dA, run.dB // 1000), [passed, failed], 2097, "seed")


# ---- lora ----

LORA = {"T": 3, "DM": 6, "R": 2, "delta": 2097, "tol_permil": 70, "algorithm": "fast", "workers": 1,
        "executor": "auto"}


@pytest.mark.parametrize("R", [3, 8, 14, 19])
def test_lora_refuses_sizes_whose_gradients_its_gradcheck_cannot_resolve(R):
    """DM=22: dA is some 300 times smaller than dB there, and the seed's gradcheck of A went RED on a clean run."""
    with pytest.raises(ConfigError, match=rf"lora at T=2 DM=22 R={R} delta=2097: dA is too small for the Q20 "
                                          r"gradcheck to resolve \(max\|grad\| 7788 < 8 x the central "
                                          r"difference's rounding \d+\)"):
        lora.run(ctx({**LORA, "T": 2, "DM": 22, "R": R}))


def test_lora_keeps_green_runs_green_and_fails_faults_it_resolves():
    """T=1 DM=3 R=1: dA sits under the bound, but its gradcheck passes: green as before. At the seed's sizes a
    planted grad-bug still FAILs: its gradients are far above the rounding."""
    assert not failing(lora.run(ctx({**LORA, "T": 1, "DM": 3, "R": 1})))
    assert failing(lora.run(ctx(LORA, fault="grad-bug"))) == [
        f"{lora.CHECK_A}: 11/12 cells within 70permil (worst=101permil)"]


# ---- dp-train ----

def test_dp_train_derives_the_seeds_own_rate_at_the_seeds_sizes():
    assert defaults("dp-train")["lr_den"] == 8  # the seed's rate; 0 derives it
    derived, given = dp_train.run(ctx(DP)), dp_train.run(ctx({**DP, "lr_den": 8}))
    assert derived.digest == given.digest and derived.fingerprints == given.fingerprints
    assert derived.items[0].text == given.items[0].text


@pytest.mark.parametrize("sizes", [{"D": 64, "H": 8, "O": 1}, {"D": 48, "H": 4, "O": 1, "B": 4},
                                   {"D": 12, "H": 64, "O": 2, "B": 3}])
def test_dp_train_at_wider_sizes_is_green_with_the_derived_rate(sizes):
    with pytest.raises(ConfigError, match=r"the loss did not fall at lr=constf\(1,8\), above the rate"):
        dp_train.run(ctx({**DP, **sizes, "lr_den": 8}))
    assert failing(dp_train.run(ctx({**DP, **sizes, "lr_num": 2, "lr_den": 16})))  # the user's own rate: RED
    out = dp_train.run(ctx({**DP, **sizes}))
    assert not failing(out) and out.metrics["lr"] < 1 / 8


def test_dp_train_refuses_a_start_with_every_hidden_unit_off():
    with pytest.raises(ConfigError, match=r"dp-train at D=48 H=2 O=1 B=2: every hidden unit is off"):
        dp_train.run(ctx({**DP, "D": 48, "H": 2, "O": 1, "B": 2}))


def test_dp_train_d4_does_not_judge_units_at_the_kink():
    out = dp_train.run(ctx({**DP, "D": 4, "H": 64, "O": 3, "B": 2}))
    assert not failing(out) and out.checks[3].detail.endswith(" cells at relu's kink not judged")


# ---- ta-gradcheck ----

def test_ta_gradcheck_does_not_judge_a_unit_at_the_kink():
    """D=4 H=2: example 1's second unit has h = 0 in exact arithmetic (float32 leaves -1.9e-9)."""
    out = ta_gradcheck.run(ctx({**TA, "D": 4, "H": 2, "O": 1, "B": 2}))
    assert not failing(out) and out.checks[-1].detail.endswith("; 4 cells at relu's kink not judged")
    d = Dims(4, 2, 1)
    w, x, _ = init_data(d, 2)
    assert judged_cells(d, w, x[0]).all() and judged_cells(d, w, x[1]).tolist() == [True] * 4 + [False] * 4 + [True] * 2


def test_ta_gradcheck_does_not_judge_an_example_at_its_target():
    """D=4 H=12 O=1: example 4's output equals its target to float32's rounding; its gradient is that rounding."""
    out = ta_gradcheck.run(ctx({**TA, "D": 4, "H": 12, "O": 1}))
    assert not failing(out) and "examples 4 at their target to float32's rounding not judged" in out.checks[-1].detail
    d = Dims(4, 12, 1)
    w, x, t = init_data(d, 8)
    assert [b for b in range(8) if at_target(d, w, x[b], t[b], 10)] == [4]


def test_the_relu_fault_is_still_caught_where_units_sit_at_the_kink():
    out = ta_gradcheck.run(ctx({**TA, "D": 4, "H": 64, "O": 3, "B": 2}, fault="relu-grad"))
    assert "MLP per-example grads" in [c.name for c in out.checks if not c.passed]


def test_the_seeds_sizes_judge_every_cell():
    for name, params in (("ta", TA), ("dp", DP)):
        d = Dims.of(params)
        w, x, t = init_data(d, params["B"])
        assert all(judged_cells(d, w, x[b]).all() and not at_target(d, w, x[b], t[b], 10)
                   for b in range(params["B"])), name


# ---- parallel-grad ----

def test_parallel_grad_refuses_sizes_whose_comparison_would_be_vacuous():
    with pytest.raises(ConfigError, match=r"only 2 gradient cells are non-zero, no more than one example has \(2\)"):
        pg.run(ctx({"D": 1, "H": 1, "O": 1, "B": 2, "workers": 2, "executor": "thread"}))
