"""The lora gate reproduces the seed program's integers exactly, at the seed's sizes and at others."""

import numpy as np
import pytest

from nxgates.errors import ConfigError, ResourceError
from nxgates.gates import lora
from tests.conftest import ctx
from tests.gates.seed_lora import seed_lora


def metrics_like_seed(out):
    m = out.metrics
    return {"loss_q": m["loss_q"], **{k: {f: m[k][f] for f in ("passed", "cells", "worst_permil",
            "max_abs_grad", "analytic", "numeric")} for k in ("A", "B")}}


def reference(T, DM, R, delta=2097, tol=70):
    r = seed_lora(T, DM, R, delta, tol)
    for key in ("A", "B"):
        r[key].pop("npass")
    return r


def test_seed_defaults_print_the_seed_figures(lora_params):
    out = lora.run(ctx(lora_params))
    text = "\n".join(getattr(i, "text", "") for i in out.items)
    assert "L_q32=1329684529960" in text
    assert " A (lora): 12/12 (worst=2permil of max|grad|=185888)" in text
    assert " B (lora): 12/12 (worst=0permil of max|grad|=367790)" in text
    assert "LoRA gradcheck: 24/24 cells correct" in text
    assert "400permil of full trained (PEFT)" in text
    assert [c.passed for c in out.checks] == [True, True, True]
    assert out.green.startswith("NX-INTFP-LORA verdict=GREEN 24/24")


@pytest.mark.parametrize("algorithm", ["fast", "naive"])
@pytest.mark.parametrize("T,DM,R,delta", [(3, 6, 2, 2097), (1, 1, 1, 2097), (5, 7, 3, 2097), (2, 9, 9, 1),
                                          (4, 11, 1, 50000), (7, 5, 4, 3), (4, 20, 3, 2097)])
def test_every_integer_equals_the_seed_transcription(T, DM, R, delta, algorithm, lora_params):
    params = {**lora_params, "T": T, "DM": DM, "R": R, "delta": delta, "algorithm": algorithm}
    assert metrics_like_seed(lora.run(ctx(params))) == reference(T, DM, R, delta)


@pytest.mark.parametrize("T,DM,R", [(16, 64, 8), (3, 97, 5), (9, 40, 40), (2, 130, 3)])
def test_fast_and_naive_paths_agree_bit_for_bit(T, DM, R, lora_params):
    params = {**lora_params, "T": T, "DM": DM, "R": R}
    fast = lora.run(ctx({**params, "algorithm": "fast"}))
    naive = lora.run(ctx({**params, "algorithm": "naive"}))
    assert fast.metrics == naive.metrics
    assert fast.digest == naive.digest


def test_a_wrong_analytic_gradient_fails_the_check(lora_params):
    out = lora.run(ctx(lora_params, fault="grad-bug"))
    by_name = {c.name: c.passed for c in out.checks}
    assert by_name == {lora.CHECK_A: False, lora.CHECK_B: True, lora.CHECK_FROZEN: True}
    assert any(getattr(i, "text", "").startswith(" A (lora) cell 0 ana=") for i in out.items)


def test_base_w_frozen_check_sees_a_write_to_w(lora_params):
    out = lora.run(ctx(lora_params, fault="train-base"))
    assert {c.name: c.passed for c in out.checks}[lora.CHECK_FROZEN] is False


def test_r_above_dm_is_a_config_error(lora_params):
    with pytest.raises(ConfigError, match="R=7 must not exceed DM=6"):
        lora.validate({**lora_params, "R": 7})


def test_sizes_beyond_memory_are_refused_before_allocating(lora_params):
    with pytest.raises(ResourceError, match="DM=1048576"):
        lora.validate({**lora_params, "DM": 1 << 20, "T": 1 << 20})


def test_overflowing_delta_is_refused_not_wrapped(lora_params):
    with pytest.raises(ResourceError, match=r"lora at T=3 DM=6 R=2 delta=1099511627776: int64 overflow"):
        lora.run(ctx({**lora_params, "delta": 1 << 40}))


def test_init_uses_c_division():
    m = lora.init_model(3, 6, 2)
    # x[0] = ((2 % 11) - 5) * S / 10 = -3S/10 -> -314572 in C (floor would give -314573)
    assert int(m.x[0, 0]) == -314572
    assert m.W.dtype == np.int64


def test_fast_path_without_the_a_priori_proof_gives_the_same_integers(lora_params, monkeypatch):
    """The guarded fallback (every op checked) and the proven path must agree."""
    params = {**lora_params, "T": 5, "DM": 33, "R": 4}
    proven = lora.run(ctx(params))
    monkeypatch.setattr(lora, "_proven_a", lambda *args: False)
    checked = lora.run(ctx(params))
    assert proven.metrics == checked.metrics
