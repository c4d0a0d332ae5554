"""The LoRA model's parameter cross-checks: the rank fits the width, and the run's memory is asked for with
the sizes and the gradcheck's worker count."""

import pytest

from nxgates.core import cpus
from nxgates.core.lora import footprint, params, pooled
from nxgates.errors import ConfigError


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
