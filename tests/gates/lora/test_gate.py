"""The lora gate reproduces the seed program's integers exactly, at the seed's sizes and at others."""

import pytest

from nxgates.core import lora as core_lora
from nxgates.core.lora import fast as lora_fast
from nxgates.core.lora import pooled as lora_pooled
from nxgates.errors import ConfigError, ResourceError
from nxgates.gates.lora import gate as lora_gate
from tests.helpers import ctx, metrics_like_seed, reference


def test_seed_defaults_print_the_seed_figures(lora_params):
    out = lora_gate.run(ctx(lora_params))
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
    assert metrics_like_seed(lora_gate.run(ctx(params))) == reference(T, DM, R, delta)


@pytest.mark.parametrize("T,DM,R", [(16, 64, 8), (3, 97, 5), (9, 40, 40), (2, 130, 3)])
def test_fast_and_naive_paths_agree_bit_for_bit(T, DM, R, lora_params):
    params = {**lora_params, "T": T, "DM": DM, "R": R}
    fast = lora_gate.run(ctx({**params, "algorithm": "fast"}))
    naive = lora_gate.run(ctx({**params, "algorithm": "naive"}))
    assert fast.metrics == naive.metrics
    assert fast.digest == naive.digest


def test_a_wrong_analytic_gradient_fails_the_check(lora_params):
    out = lora_gate.run(ctx(lora_params, fault="grad-bug"))
    by_name = {c.name: c.passed for c in out.checks}
    assert by_name == {lora_gate.CHECK_A: False, lora_gate.CHECK_B: True, lora_gate.CHECK_FROZEN: True}
    assert any(getattr(i, "text", "").startswith(" A (lora) cell 0 ana=") for i in out.items)


def test_base_w_frozen_check_sees_a_write_to_w(lora_params):
    out = lora_gate.run(ctx(lora_params, fault="train-base"))
    assert {c.name: c.passed for c in out.checks}[lora_gate.CHECK_FROZEN] is False


def test_r_above_dm_is_a_config_error(lora_params):
    with pytest.raises(ConfigError, match="R=7 must not exceed DM=6"):
        lora_gate.validate({**lora_params, "R": 7})


def test_sizes_beyond_memory_are_refused_before_allocating(lora_params):
    with pytest.raises(ResourceError, match="DM=1048576"):
        lora_gate.validate({**lora_params, "DM": 1 << 20, "T": 1 << 20})


def test_overflowing_delta_is_refused_not_wrapped(lora_params):
    with pytest.raises(ResourceError, match=r"lora at T=3 DM=6 R=2 delta=1099511627776: int64 overflow"):
        lora_gate.run(ctx({**lora_params, "delta": 1 << 40}))


def test_fast_path_without_the_a_priori_proof_gives_the_same_integers(lora_params, monkeypatch):
    """The guarded fallback (every op checked) and the proven path must agree."""
    params = {**lora_params, "T": 5, "DM": 33, "R": 4}
    proven = lora_gate.run(ctx(params))
    monkeypatch.setattr(lora_fast, "proven_a", lambda *args: False)
    checked = lora_gate.run(ctx(params))
    assert proven.metrics == checked.metrics


# ---- the fast gradcheck's cells on a worker pool --------------------------------------------------------


@pytest.mark.parametrize("T, DM, R, workers", [(3, 7, 3, 2), (5, 11, 2, 3), (2, 9, 5, 2)])
def test_pooled_cells_equal_the_single_process_and_the_naive_path(T, DM, R, workers, lora_params):
    params = {**lora_params, "T": T, "DM": DM, "R": R}
    pooled = lora_gate.run(ctx({**params, "workers": workers}))
    single = lora_gate.run(ctx({**params, "workers": 1}))
    naive = lora_gate.run(ctx({**params, "algorithm": "naive"}))
    assert pooled.metrics == single.metrics == naive.metrics
    assert pooled.digest == single.digest == naive.digest
    assert metrics_like_seed(pooled) == reference(T, DM, R)


def test_every_preset_stays_in_one_process(lora_params, monkeypatch):
    assert lora_pooled.gradcheck_workers(0, 3, 6, 2) == lora_pooled.gradcheck_workers(0, 8, 96, 4) == 1
    assert lora_pooled.gradcheck_workers(0, 16, 256, 8) == lora_pooled.gradcheck_workers(0, 32, 1024, 16) == 1
    assert lora_pooled.gradcheck_workers(3, 3, 6, 2) == 3

    def no_fork(*args):
        raise AssertionError("a pool was made at the seed size")

    monkeypatch.setattr(lora_pooled, "diffs_fast_pooled", no_fork)
    out = lora_gate.run(ctx({**lora_params, "workers": 0}))
    assert all(c.passed for c in out.checks)


def test_overflow_on_the_pool_is_refused_as_in_one_process(lora_params):
    with pytest.raises(ResourceError, match=r"delta=1099511627776: int64 overflow"):
        lora_gate.run(ctx({**lora_params, "delta": 1 << 40, "workers": 2}))


def test_a_planted_fault_is_caught_on_the_pool_too(lora_params):
    out = lora_gate.run(ctx({**lora_params, "T": 3, "DM": 7, "R": 3, "workers": 2}, fault="grad-bug"))
    assert {c.name: c.passed for c in out.checks}[lora_gate.CHECK_A] is False


def test_the_seed_run_does_not_import_the_pool():
    """Start-up: a seed-size lora run pays for no pool machinery (concurrent.futures, multiprocessing)."""
    import subprocess
    import sys

    code = ("import sys; from nxgates import registry; reg = registry.load(None); e, = reg.select(['lora']); "
            "from nxgates.runner import run_gate; assert run_gate(e, e.defaults).passed; "
            "print('nxgates.core.pool' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_given_tensors_are_the_ones_checked(lora_params):
    """``--inputs``: the loss and the gradcheck are the given model's (an independent loss), not the formulas'."""
    from tests.oracles.seed_lora import python_int_loss

    seed = core_lora.init_model(3, 6, 2)
    arrays = {"x": seed.x, "W": seed.W, "A": seed.A // 2, "B": seed.B}
    out = lora_gate.run(ctx(lora_params, inputs=arrays))
    assert out.metrics["loss_q"] == python_int_loss(*(arrays[k].tolist() for k in "xWAB")) != 1329684529960
    assert [c.passed for c in out.checks] == [True, True, True]
