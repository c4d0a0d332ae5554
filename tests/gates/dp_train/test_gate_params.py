"""dp-train's parameter checks: the refusals, the memory estimate, and where a planted fault cannot show."""

import pytest

from nxgates.errors import ConfigError
from nxgates.gates.dp_train import gate

SEED = {"D": 8, "H": 16, "O": 4, "B": 8, "steps": 5, "lr_num": 1, "lr_den": 8, "workers": 0, "executor": "thread",
        "step_exp": 6, "tol_permil": 10, "d4_examples": 0}


@pytest.fixture
def asked(monkeypatch):
    """The byte counts and names validate hands to the memory budget (two usable CPUs for workers=0)."""
    seen = []
    monkeypatch.setattr(gate, "require", lambda nbytes, what: seen.append((nbytes, what)))
    monkeypatch.setattr(gate, "auto_workers", lambda: 2)
    return seen


def test_one_worker_is_refused_as_not_data_parallel(asked):
    with pytest.raises(ConfigError) as e:
        gate.validate({**SEED, "workers": 1})
    assert str(e.value) == "workers=1 is not data-parallel; use 0 (auto) or >= 2 (D2 adds one more)"
    assert asked == []


def test_d4_examples_may_be_the_whole_batch_but_not_more(asked):
    gate.validate({**SEED, "d4_examples": 8})
    with pytest.raises(ConfigError) as e:
        gate.validate({**SEED, "d4_examples": 9})
    assert str(e.value) == "d4_examples=9 exceeds the batch B=8"


def test_the_memory_estimate_counts_one_job_the_kept_weights_and_every_pools_arenas(asked):
    """D=8 H=16 O=4: NP=192, W1 128 cells, arena 49; B=8 is one chunk, the tree has 4 rounds."""
    gate.validate({**SEED, "workers": 0, "steps": 5, "d4_examples": 3})
    job = 2 * 8 * 192 + (4 + 1) * 192 + 4 * 192 + 2 * 128 + 8 * (8 + 4 + 1)
    kept = 5 * 5 * 192 + 3 * 192
    arenas = (3 + 1) * (2 * 49 + 128)
    assert asked == [(4 * (job + kept + arenas) + 8 * 4 * 192, "dp-train at D=8 H=16 O=4 B=8 steps=5")]


def test_the_memory_estimate_uses_the_given_worker_count_and_no_d4_rows_for_the_whole_batch(asked):
    gate.validate({**SEED, "workers": 5, "steps": 2, "d4_examples": 2, "D": 3, "H": 2, "O": 1, "B": 2})
    NP, n_w1, arena = 8, 6, 3 + 4 + 2 + 1
    job = 2 * 2 * NP + (2 + 1) * NP + 4 * NP + 2 * n_w1 + 2 * (3 + 1 + 1)
    kept = 5 * 2 * NP
    arenas = (6 + 1) * (2 * arena + n_w1)
    assert asked == [(4 * (job + kept + arenas) + 8 * 4 * NP, "dp-train at D=3 H=2 O=1 B=2 steps=2")]


def test_a_dask_pool_streams_larger_chunks_than_a_local_one(asked):
    """NP=9 at B=2^20: a local chunk is 32 MiB of rows (932067, one worker's rounds), a remote one the batch."""
    big = {**SEED, "D": 2, "H": 3, "O": 1, "B": 1 << 20, "steps": 2, "workers": 2}
    gate.validate({**big, "executor": "thread"})
    gate.validate({**big, "executor": "dask"})
    (local, _), (remote, _) = asked
    assert remote - local == 4 * 2 * ((1 << 20) - 932067) * 9


@pytest.mark.parametrize("B", [2, 3])
def test_completion_order_needs_four_examples(B):
    assert gate.fault_applies("completion-order", {**SEED, "B": B}) == (
        f"at B={B} a left fold cannot be told from the tree over the examples; use B >= 4")


def test_completion_order_applies_from_four_examples():
    assert gate.fault_applies("completion-order", {**SEED, "B": 4}) is None


@pytest.mark.parametrize("fault", ["wrong-sign", "relu-grad", None])
def test_other_faults_always_apply_even_at_tiny_batches(fault):
    assert gate.fault_applies(fault, {**SEED, "B": 2, "steps": 2, "workers": 8}) is None


def test_stale_weights_applies_at_small_batches_that_completion_order_refuses():
    assert gate.fault_applies("stale-weights", {**SEED, "B": 3, "workers": 2, "steps": 2}) is None


def test_stale_weights_is_refused_when_the_stale_worker_first_runs_a_task_after_the_last_step():
    """Three workers, B=2: tasks 0, 1 are step 0's; worker 1 next runs task 4, the first of step 2."""
    p = {**SEED, "workers": 3, "B": 2}
    assert gate.fault_applies("stale-weights", {**p, "steps": 2}) == (
        "at workers=3 B=2 steps=2 worker 1 runs no task after step 0, so stale weights change nothing; "
        "use fewer workers, a larger B or more steps")
    assert gate.fault_applies("stale-weights", {**p, "steps": 3}) is None


def test_stale_weights_counts_the_usable_cpus_when_workers_is_auto(monkeypatch):
    monkeypatch.setattr(gate, "auto_workers", lambda: 6)
    p = {**SEED, "workers": 0, "B": 4}
    # worker 1 runs task 1, then 7: step 1 of 4 examples
    assert gate.fault_applies("stale-weights", {**p, "steps": 2}) is None
    assert gate.fault_applies("stale-weights", {**p, "B": 5, "steps": 1}).startswith("at workers=6 B=5 steps=1 ")
    # B=5: worker 1's next task is 7, inside step 1
    assert gate.fault_applies("stale-weights", {**p, "B": 5, "steps": 2}) is None
    # B=7, six workers: worker 1's next is task 7, step 1's first
    assert gate.fault_applies("stale-weights", {**p, "B": 7, "steps": 1}) is not None
    assert gate.fault_applies("stale-weights", {**p, "B": 7, "steps": 2}) is None
