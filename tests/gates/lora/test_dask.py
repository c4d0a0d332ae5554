"""lora's fast gradcheck on Dask: A's columns and B's rows dealt to a cluster's workers, whose tasks return
the cells they filled; the seed's integers, on the gate's own LocalCluster and through a scheduler address."""

import pytest

from nxgates.core.lora import fast as lora_fast
from nxgates.gates.lora import gate as lora_gate
from tests.helpers import ctx, metrics_like_seed, reference

pytest.importorskip("distributed")

ODD = {"T": 5, "DM": 13, "R": 3, "delta": 2097, "tol_permil": 70, "algorithm": "fast", "workers": 2,
       "executor": "dask"}


@pytest.fixture
def cluster(dask_scheduler):
    return dask_scheduler(2)


def _no_fallback(*args):
    raise AssertionError("the gradcheck ran in the gate's process, not on the cluster")


@pytest.mark.parametrize("where", ["own cluster", "by address"])
def test_lora_cells_on_dask_give_the_seeds_integers(cluster, monkeypatch, where):
    """The in-process paths are forbidden in the gate's process (the pool falls back to them when a task
    fails, with the same integers): the cells can only have come back from the cluster."""
    monkeypatch.setattr(lora_fast, "diffs_fast_a", _no_fallback)
    monkeypatch.setattr(lora_fast, "diffs_fast_b", _no_fallback)
    options = {} if where == "own cluster" else {"scheduler": cluster}
    out = lora_gate.run(ctx(ODD, **options))
    assert all(c.passed for c in out.checks)
    assert metrics_like_seed(out) == reference(5, 13, 3)


def test_auto_takes_dask_given_a_scheduler_and_a_fault_is_still_caught(cluster, monkeypatch):
    monkeypatch.setattr(lora_fast, "diffs_fast_a", _no_fallback)
    out = lora_gate.run(ctx({**ODD, "executor": "auto"}, "grad-bug", scheduler=cluster))
    assert {c.name for c in out.checks if not c.passed} == {lora_gate.CHECK_A}
