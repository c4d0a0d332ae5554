"""The parameters several gates declare alike: the LoRA model's cross-checks (the rank fits the width, and
the run's memory is asked for with the sizes and the gradcheck's worker count), and the MLP's sizes and
reduction order."""

import pytest

from nxgates.core import cpus
from nxgates.core.lora import footprint, pooled
from nxgates.errors import ConfigError
from nxgates.gatekit import IntParam
from nxgates.gates import _params as params
from nxgates.gates._params import MAX_WIDTH, REDUCTION_PARAM, mlp_params


@pytest.fixture
def asked(monkeypatch):
    """The (T, DM, R, workers) that check_model passes to the memory estimate."""
    calls = []
    monkeypatch.setattr(footprint, "require_memory", lambda *args: calls.append(args))
    monkeypatch.setattr(cpus, "auto_workers", lambda: 6)
    return calls


def test_a_rank_above_the_width_refuses_with_both_numbers(asked):
    with pytest.raises(ConfigError) as exc:
        params.check_model({"T": 4, "DM": 6, "R": 7})
    assert str(exc.value) == "R=7 must not exceed DM=6 (a LoRA rank is at most the width)"
    assert asked == []


def test_a_rank_equal_to_the_width_is_accepted(asked):
    params.check_model({"T": 4, "DM": 6, "R": 6})
    assert asked == [(4, 6, 6, 1)]


def test_the_memory_estimate_gets_the_sizes_in_order(asked):
    params.check_model({"T": 5, "DM": 9, "R": 3, "workers": 1})
    assert asked == [(5, 9, 3, 1)]


def test_given_workers_are_what_the_estimate_counts(asked):
    params.check_model({"T": 5, "DM": 9, "R": 3, "workers": 3})
    assert asked == [(5, 9, 3, 3)]


def test_no_workers_given_means_auto(asked):
    """Without ``workers``, the count is auto's: one process below the pool's threshold, the CPUs from it up."""
    params.check_model({"T": 4, "DM": 6, "R": 2})
    T, DM, R = 2048, 256, 8  # 2 * DM * R * T * DM = 2^31, the threshold
    assert 2 * DM * R * T * DM == pooled.AUTO_POOL_WORK
    params.check_model({"T": T, "DM": DM, "R": R})
    params.check_model({"T": T, "DM": DM, "R": R, "workers": 0})
    assert asked == [(4, 6, 2, 1), (T, DM, R, 6), (T, DM, R, 6)]


def test_the_worker_count_depends_on_each_size(asked):
    """Just below the threshold in T, DM or R alone: one process."""
    params.check_model({"T": 2047, "DM": 256, "R": 8})
    params.check_model({"T": 2048, "DM": 255, "R": 8})
    params.check_model({"T": 2048, "DM": 256, "R": 7})
    params.check_model({"T": 1 << 20, "DM": 32, "R": 1})
    assert [a[3] for a in asked] == [1, 1, 1, 6]


# ---- the MLP's sizes and reduction order ------------------------------------------------------------------


def test_mlp_params_declares_d_h_o_then_the_batch():
    batch = IntParam("examples", min=2, max=64)
    params = mlp_params(batch)
    assert list(params) == ["D", "H", "O", "B"]
    assert params["D"] == IntParam("input width", min=1, max=MAX_WIDTH)
    assert params["H"] == IntParam("hidden width", min=1, max=MAX_WIDTH)
    assert params["O"] == IntParam("output width", min=1, max=MAX_WIDTH)
    assert params["B"] is batch
    assert MAX_WIDTH == 1 << 20


def test_mlp_params_takes_a_width_limit_an_output_limit_and_a_prefix():
    batch = IntParam("examples")
    params = mlp_params(batch, max_width=100, max_out=7, prefix="MLP ")
    assert params == {
        "D": IntParam("MLP input width", min=1, max=100),
        "H": IntParam("MLP hidden width", min=1, max=100),
        "O": IntParam("MLP output width", min=1, max=7),
        "B": batch,
    }
    assert mlp_params(batch, max_width=100)["O"] == IntParam("output width", min=1, max=100)


def test_every_width_accepts_1_and_its_limit_and_refuses_beyond():
    from nxgates.errors import ConfigError

    params = mlp_params(IntParam("b"), max_width=9, max_out=4)
    for key, top in (("D", 9), ("H", 9), ("O", 4)):
        assert params[key].check(key, 1) == 1 and params[key].check(key, top) == top
        for bad in (0, top + 1):
            with pytest.raises(ConfigError, match=rf"^{key}={bad} is out of range \[1, {top}\]$"):
                params[key].check(key, bad)


def test_the_reduction_param_names_every_reduction_of_the_core():
    assert REDUCTION_PARAM.choices == ("tree", "sequential") and REDUCTION_PARAM.default == "tree"
