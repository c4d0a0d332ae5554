"""The lora gate's pooled gradcheck (cells dealt over forked workers), pinned down so mutation testing can
see it: the pool falls back to the in-process path whenever a task fails, which gives the same integers, so
comparing integers alone cannot tell a broken pool from a working one. These tests forbid the fallback where
the pool must do the work, and plant a failing task where the fallback must.
"""

import time

import numpy as np
import pytest

from nxgates.core import cpus, memory
from nxgates.core import lora as core_lora
from nxgates.core import pool as pool_module
from nxgates.core.cpus import choose_executor
from nxgates.core.lora import fast as lora_fast
from nxgates.core.lora import gradcheck as lora_gradcheck
from nxgates.core.lora import pooled as lora_pooled
from nxgates.errors import GateTimeout, ResourceError
from nxgates.gatekit import Progress, RunContext
from nxgates.gates.lora import gate as lora_gate
from tests.helpers import ctx, metrics_like_seed, record_made, reference


class CountingProgress(Progress):
    """Records what the gate reports, so a test can check every cell is counted exactly once."""

    def __init__(self) -> None:
        self.total = None
        self.done = 0

    def start(self, label: str, total: int) -> None:
        self.total = total

    def advance(self, steps: int = 1) -> None:
        self.done += steps


def _refusing_task(task_ctx, worker):  # module level: a forked worker finds it by name
    raise RuntimeError("planted: this task fails in the worker")


def _stuck_task(task_ctx, worker):
    time.sleep(3600)  # the pool terminates it when the gate's deadline passes


def _no_fallback(*args):
    raise AssertionError("the pooled gradcheck fell back to the in-process path")


def test_each_task_is_labelled_with_the_columns_or_rows_it_fills(monkeypatch):
    """The labels name a lost or failed task in the pool's records: inclusive bounds, as a person reads them."""
    made = record_made(monkeypatch, pool_module, "make_pool")
    _pooled(3, 7, 3, workers=2)
    assert [r.label for r in made[0].records] == ["A columns 0..0", "A columns 1..2", "B rows 0..0", "B rows 1..2"]


def _expected_diffs(T, DM, R, delta=2097):
    """``L(+d) - L(-d)`` per cell from the naive path (a whole forward per perturbation)."""
    m = core_lora.init_model(T, DM, R)
    plain = RunContext(params={})
    return lora_gradcheck.diffs_naive(m, m.A, delta, plain), lora_gradcheck.diffs_naive(m, m.B, delta, plain)


def _pooled(T, DM, R, workers, deadline=None, delta=2097):
    m = core_lora.init_model(T, DM, R)
    f = core_lora.forward(m)
    run_ctx = RunContext(params={}, deadline=deadline, progress=CountingProgress())
    diffs_a, diffs_b = lora_pooled.diffs_fast_pooled(m, f, delta, run_ctx, workers)
    return diffs_a.reshape(-1), diffs_b.reshape(-1), run_ctx.progress


@pytest.mark.parametrize("T, DM, R, workers", [(3, 7, 3, 2), (5, 11, 2, 3), (2, 9, 5, 2)])
def test_the_workers_compute_every_cell_without_the_fallback(T, DM, R, workers, monkeypatch):
    want_a, want_b = _expected_diffs(T, DM, R)
    monkeypatch.setattr(lora_fast, "diffs_fast_a", _no_fallback)
    monkeypatch.setattr(lora_fast, "diffs_fast_b", _no_fallback)
    diffs_a, diffs_b, progress = _pooled(T, DM, R, workers)
    assert diffs_a.tolist() == want_a.tolist()
    assert diffs_b.tolist() == want_b.tolist()
    assert progress.done == 2 * DM * R  # every cell counted once


def test_the_whole_gate_on_the_pool_matches_the_seed_without_the_fallback(lora_params, monkeypatch):
    monkeypatch.setattr(lora_fast, "diffs_fast_a", _no_fallback)
    monkeypatch.setattr(lora_fast, "diffs_fast_b", _no_fallback)
    run_ctx = ctx({**lora_params, "T": 3, "DM": 7, "R": 3, "workers": 2})
    run_ctx.progress = CountingProgress()
    out = lora_gate.run(run_ctx)
    assert metrics_like_seed(out) == reference(3, 7, 3)
    assert run_ctx.progress.done == run_ctx.progress.total == 2 * 7 * 3


def test_the_requested_number_of_workers_is_forked(monkeypatch):
    made = record_made(monkeypatch, pool_module, "make_pool")
    want_a, want_b = _expected_diffs(5, 11, 2)
    diffs_a, diffs_b, _ = _pooled(5, 11, 2, workers=3)
    assert [p.n_workers for p in made] == [3]
    assert (diffs_a.tolist(), diffs_b.tolist()) == (want_a.tolist(), want_b.tolist())


def test_x_delta_and_its_distinct_values_are_made_once_for_every_worker(monkeypatch):
    """Every column of A needs the same sort of +-x * delta: the pool makes it before its workers start, and
    each task reuses it (threads here, so a call in a task would be counted too)."""
    calls = _spy(monkeypatch, "x_shifts")
    monkeypatch.setattr(lora_fast, "diffs_fast_a", _no_fallback)
    m = core_lora.init_model(5, 11, 4)
    f = core_lora.forward(m)
    diffs_a, _ = lora_pooled.diffs_fast_pooled(m, f, 2097, RunContext(params={}), 2, "thread")
    assert diffs_a.reshape(-1).tolist() == _expected_diffs(5, 11, 4)[0].tolist()
    assert calls == [1]


@pytest.mark.parametrize("failing", ["_cells_a_task", "_cells_b_task"])
def test_a_failed_task_falls_back_to_the_same_integers(failing, monkeypatch):
    T, DM, R = 3, 7, 3
    want_a, want_b = _expected_diffs(T, DM, R)
    monkeypatch.setattr(lora_pooled, failing, _refusing_task)
    diffs_a, diffs_b, progress = _pooled(T, DM, R, workers=2)
    assert diffs_a.tolist() == want_a.tolist()
    assert diffs_b.tolist() == want_b.tolist()
    assert progress.done == 2 * DM * R  # counted once, by the fallback


def test_a_distant_deadline_changes_nothing(monkeypatch):
    monkeypatch.setattr(lora_fast, "diffs_fast_a", _no_fallback)
    monkeypatch.setattr(lora_fast, "diffs_fast_b", _no_fallback)
    want_a, want_b = _expected_diffs(3, 7, 3)
    diffs_a, diffs_b, _ = _pooled(3, 7, 3, workers=2, deadline=time.monotonic() + 600)
    assert (diffs_a.tolist(), diffs_b.tolist()) == (want_a.tolist(), want_b.tolist())


def test_a_stuck_worker_ends_at_the_deadline(monkeypatch):
    monkeypatch.setattr(lora_pooled, "_cells_a_task", _stuck_task)
    with pytest.raises(GateTimeout):
        _pooled(3, 7, 3, workers=2, deadline=time.monotonic() + 0.3)


def test_waiting_for_the_workers_never_blocks_past_the_deadline(monkeypatch):
    """Each wait is capped by the time left (the loop then raises at once), so a gate given --timeout stops
    at it; a fixed slice would overshoot by the slice."""
    deadline = time.monotonic() + 0.3
    waits = []
    real_wait = pool_module.ProcessWorkerPool.wait  # workers=2 at these sizes: the process executor

    def spy(self, target, timeout):
        waits.append((timeout, deadline - time.monotonic()))
        return real_wait(self, target, timeout)

    monkeypatch.setattr(pool_module.ProcessWorkerPool, "wait", spy)
    monkeypatch.setattr(lora_pooled, "_cells_a_task", _stuck_task)
    with pytest.raises(GateTimeout):
        _pooled(3, 7, 3, workers=2, deadline=deadline)
    assert waits
    assert all(timeout <= max(0.0, left) + 0.05 for timeout, left in waits), waits


# ---- the tasks themselves, run in this process (mutmut cannot see what runs only in a forked worker) -----


def _job(T, DM, R, delta=2097):
    m = core_lora.init_model(T, DM, R)
    return lora_pooled.CellsJob(m, core_lora.forward(m), delta, np.zeros((DM, R), np.int64),
                                np.zeros((R, DM), np.int64))


@pytest.mark.parametrize("tensor, ks", [("a", (1, 3)), ("b", (1, 2))])
def test_a_task_fills_exactly_its_values_of_k(tensor, ks):
    """An A task fills its columns of A (DM x R), a B task its rows of B (R x DM): both are values of k."""
    T, DM, R = 3, 7, 4
    expected = dict(zip("ab", _expected_diffs(T, DM, R), strict=True))
    job = _job(T, DM, R)
    task = lora_pooled._cells_a_task if tensor == "a" else lora_pooled._cells_b_task
    with pool_module.make_pool("thread", 1) as pool:
        task(lora_pooled.CellsTask(pool.register(job), *ks), 0)
    outputs = {"a": job.out_a, "b": job.out_b}
    want = np.zeros_like(outputs[tensor])
    cells = (slice(None), slice(*ks)) if tensor == "a" else slice(*ks)
    want[cells] = expected[tensor].reshape(want.shape)[cells]
    assert outputs[tensor].tolist() == want.tolist()
    assert not outputs["b" if tensor == "a" else "a"].any()  # the other tensor's cells untouched


def test_the_single_process_path_counts_every_cell_once_over_several_chunks(lora_params, monkeypatch):
    # 64 x 200 x 1 with chunks of 163 rows: A's 200 rows take two chunks
    monkeypatch.setattr(lora_fast, "MOVES_ELEMENTS", 163 * 64)
    run_ctx = ctx({**lora_params, "T": 64, "DM": 200, "R": 1, "workers": 1})
    run_ctx.progress = CountingProgress()
    lora_gate.run(run_ctx)
    assert run_ctx.progress.done == run_ctx.progress.total == 2 * 200


def test_split_covers_every_row_once():
    for n, parts in [(7, 2), (2, 3), (1, 2), (256, 2), (11, 3)]:
        pieces = lora_pooled._split(n, parts)
        assert [i for r in pieces for i in r] == list(range(n)) and all(len(r) for r in pieces)
        assert len(pieces) == min(n, parts)


# ---- how many workers, and what they cost ----------------------------------------------------------------


def test_auto_forks_from_exactly_the_documented_work_up(monkeypatch):
    monkeypatch.setattr(cpus, "auto_workers", lambda: 7)
    assert lora_pooled.AUTO_POOL_WORK == 2 * 16384 * 2 * 2 * 16384
    assert lora_pooled.gradcheck_workers(0, 2, 16384, 2) == 7  # at the threshold: a pool
    assert lora_pooled.gradcheck_workers(0, 1, 16384, 2) == 1  # half of it: one process
    assert lora_pooled.gradcheck_workers(0, 3, 8192, 4) == 1  # three quarters of it: one process
    assert lora_pooled.gradcheck_workers(0, 32, 1024, 16) == 1  # the xl preset
    assert lora_pooled.gradcheck_workers(5, 1, 4096, 1) == 5


def test_the_memory_estimate_counts_the_requested_workers(lora_params, monkeypatch):
    monkeypatch.setattr(memory, "available_bytes", lambda: 4 << 30)  # a 2 GiB budget
    large = {**lora_params, "T": 16, "DM": 256, "R": 8}
    lora_gate.validate({**large, "workers": 1})
    with pytest.raises(ResourceError, match=r"lora at T=16 DM=256 R=8 needs about"):
        lora_gate.validate({**large, "workers": 1024})  # 1024 workers x 64 MiB of chunks


# ---- the proven (unchecked, in-place) path of A, and what the report counts -----------------------------


def _spy(monkeypatch, name):
    """Count the calls of ``fast.<name>``, which still runs."""
    calls, real = [], getattr(lora_fast, name)

    def counted(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(lora_fast, name, counted)
    return calls


def test_the_report_counts_the_cells_that_passed(lora_params):
    green = lora_gate.run(ctx(lora_params)).metrics
    assert (green["A"]["cells_passed"], green["B"]["cells_passed"]) == (12, 12)
    red = lora_gate.run(ctx(lora_params, fault="grad-bug")).metrics
    assert (red["A"]["cells_passed"], red["A"]["passed"], red["B"]["cells_passed"]) == (11, False, 12)


def test_params_without_workers_mean_auto(lora_params, monkeypatch):
    """A params dict without `workers` (an older gates.toml, lora-train's own params) means auto, as 0 does."""
    assert "workers" not in lora_params
    monkeypatch.setattr(lora_pooled, "AUTO_POOL_WORK", 1)  # auto forks at any size
    monkeypatch.setattr(cpus, "auto_workers", lambda: 2)
    pooled = []
    real = lora_pooled.diffs_fast_pooled
    monkeypatch.setattr(lora_pooled, "diffs_fast_pooled",
                        lambda m, f, d, c, w, *how: pooled.append(w) or real(m, f, d, c, w, *how))
    out = lora_gate.run(ctx(lora_params))
    assert pooled == [2]
    assert metrics_like_seed(out) == reference(3, 6, 2)


def test_the_memory_estimate_without_workers_counts_auto(lora_params, monkeypatch):
    monkeypatch.setattr(memory, "available_bytes", lambda: 4 << 30)  # a 2 GiB budget
    monkeypatch.setattr(lora_pooled, "AUTO_POOL_WORK", 1)
    monkeypatch.setattr(cpus, "auto_workers", lambda: 1024)
    with pytest.raises(ResourceError, match=r"lora at T=16 DM=256 R=8 needs about"):
        lora_gate.validate({**lora_params, "T": 16, "DM": 256, "R": 8})  # auto: 1024 workers x 64 MiB of chunks


# ---- the Dask wiring, without a cluster: a pool whose tasks see a pickled copy of the job, as Dask's do ----


class CopyingPool(pool_module.ThreadWorkerPool):
    """A thread pool with Dask's semantics: ``share`` hands the tasks a pickled copy of the object (its
    arrays are not the gate's), and ``remote`` says so; what a task returns reaches ``on_result``."""

    remote = True
    made: list = []

    def __init__(self, kind, n_workers=0, fault=None, scheduler=None):
        super().__init__(n_workers or 2)
        CopyingPool.made.append((kind, n_workers, fault, scheduler))

    def register(self, obj):
        import pickle

        return super().register(pickle.loads(pickle.dumps(obj)))


def test_cells_come_back_from_workers_that_hold_a_copy_of_the_job(monkeypatch):
    """On Dask a task fills its own copy of the result arrays and returns its cells, which land in the
    gate's arrays; the gate's arrays start poisoned, so a cell that never came back cannot pass."""
    CopyingPool.made = []
    monkeypatch.setattr(pool_module, "make_pool", CopyingPool)
    monkeypatch.setattr(lora_fast, "diffs_fast_a", _no_fallback)
    monkeypatch.setattr(lora_fast, "diffs_fast_b", _no_fallback)
    T, DM, R = 3, 7, 3
    want_a, want_b = _expected_diffs(T, DM, R)
    m = core_lora.init_model(T, DM, R)
    diffs_a, diffs_b = lora_pooled.diffs_fast_pooled(m, core_lora.forward(m), 2097, RunContext(params={}), 2, "dask",
                                              "tcp://127.0.0.1:1")
    assert (diffs_a.reshape(-1).tolist(), diffs_b.reshape(-1).tolist()) == (want_a.tolist(), want_b.tolist())
    assert CopyingPool.made == [("dask", 2, None, "tcp://127.0.0.1:1")]


def test_a_copy_of_the_job_knows_it_is_one():
    import pickle

    job = _job(2, 5, 2)
    copy = pickle.loads(pickle.dumps(job))
    assert copy.remote is True and job.remote is False
    assert np.array_equal(copy.m.W, job.m.W) and copy.delta == job.delta


def test_cells_a_task_returns_them_only_from_a_copy():
    handle_job = _job(2, 5, 3)
    handle = pool_module.ThreadWorkerPool(2).register(handle_job)
    a_cells, b_cells = lora_pooled.CellsTask(handle, 1, 3), lora_pooled.CellsTask(handle, 0, 2)
    assert lora_pooled._cells_a_task(a_cells, 0) is None and lora_pooled._cells_b_task(b_cells, 0) is None
    handle_job.remote = True
    assert lora_pooled._cells_a_task(a_cells, 0).tolist() == handle_job.out_a[:, 1:3].tolist()
    assert lora_pooled._cells_b_task(b_cells, 0).tolist() == handle_job.out_b[0:2].tolist()


@pytest.mark.parametrize("executor, scheduler, expected", [
    ("auto", None, "process"), ("auto", "tcp://h:1", "dask"), ("dask", None, "dask"), ("dask", "tcp://h:1", "dask"),
    ("thread", None, "thread"), ("process", None, "process")])
def test_the_executor_auto_means_dask_given_a_scheduler(executor, scheduler, expected):
    assert choose_executor(executor, scheduler, lora_gate.AUTO_EXECUTOR) == expected


@pytest.mark.parametrize("executor", ["thread", "process"])
def test_a_scheduler_with_a_local_executor_is_a_usage_error(executor):
    from nxgates.errors import ConfigError

    with pytest.raises(ConfigError, match=f"^a scheduler address applies to executor=dask, not executor={executor}$"):
        choose_executor(executor, "tcp://h:1", lora_gate.AUTO_EXECUTOR)


@pytest.mark.parametrize("params, options, expected", [
    ({"executor": "dask", "workers": 3}, {}, (3, "dask", None)),
    ({"executor": "dask"}, {}, (0, "dask", None)),  # no `workers`: the pool's default, not auto's one process
    ({}, {"scheduler": "tcp://h:1"}, (0, "dask", "tcp://h:1")),  # no `executor`: auto, and a scheduler
    ({"executor": "thread", "workers": 2}, {}, (2, "thread")),
    ({"executor": "process", "workers": 2}, {}, (2, "process")),
])
def test_the_gate_hands_the_cells_to_the_pool_it_was_asked_for(lora_params, monkeypatch, params, options, expected):
    calls = []

    def pooled(m, f, delta, run_ctx, workers, *how):
        calls.append((workers, *how))
        assert isinstance(m, core_lora.Model) and m.A.shape == (6, 2)
        return lora_fast.diffs_fast_a(m, f, delta, run_ctx), lora_fast.diffs_fast_b(m, f, delta, run_ctx)

    monkeypatch.setattr(lora_pooled, "diffs_fast_pooled", pooled)
    out = lora_gate.run(ctx({**lora_params, **params}, **options))
    assert calls == [expected]
    assert metrics_like_seed(out) == reference(3, 6, 2)
