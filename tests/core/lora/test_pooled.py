"""The lora gate's pooled gradcheck (cells dealt over forked workers), pinned down so mutation testing can
see it: the pool falls back to the in-process path whenever a task fails, which gives the same integers, so
comparing integers alone cannot tell a broken pool from a working one. These tests forbid the fallback where
the pool must do the work, and plant a failing task where the fallback must.
"""

import time

import numpy as np
import pytest

from nxgates.core import cpus, memory, q20
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
        task(lora_pooled.CellsTask(pool.share(job), *ks), 0)
    outputs = {"a": job.out_a, "b": job.out_b}
    want = np.zeros_like(outputs[tensor])
    cells = (slice(None), slice(*ks)) if tensor == "a" else slice(*ks)
    want[cells] = expected[tensor].reshape(want.shape)[cells]
    assert outputs[tensor].tolist() == want.tolist()
    assert not outputs["b" if tensor == "a" else "a"].any()  # the other tensor's cells untouched


def test_cells_a_ticks_once_per_cell_of_its_columns():
    T, DM, R = 3, 7, 5
    want_a, _ = _expected_diffs(T, DM, R)
    m = core_lora.init_model(T, DM, R)
    out = np.zeros((DM, R), np.int64)
    ticks = []
    lora_fast.cells_a(m, core_lora.forward(m), 2097, range(2, 4), out, ticks.append)
    assert sum(ticks) == DM * 2
    assert out[:, 2:4].tolist() == want_a.reshape(DM, R)[:, 2:4].tolist()
    assert not out[:, :2].any() and not out[:, 4:].any()


def test_the_single_process_path_counts_every_cell_once_over_several_chunks(lora_params, monkeypatch):
    # 64 x 200 x 1 with chunks of 163 rows: A's 200 rows take two chunks
    monkeypatch.setattr(lora_fast, "MOVES_ELEMENTS", 163 * 64)
    run_ctx = ctx({**lora_params, "T": 64, "DM": 200, "R": 1, "workers": 1})
    run_ctx.progress = CountingProgress()
    lora_gate.run(run_ctx)
    assert run_ctx.progress.done == run_ctx.progress.total == 2 * 200


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


def test_the_proven_path_equals_the_checked_path(monkeypatch):
    T, DM, R = 64, 256, 5
    m = core_lora.init_model(T, DM, R)
    f = core_lora.forward(m)
    plain = RunContext(params={})
    proven = lora_fast.diffs_fast_a(m, f, 2097, plain)
    monkeypatch.setattr(lora_fast, "_proven_a", lambda *args: False)  # every chunk through the per-op guards
    checked = lora_fast.diffs_fast_a(m, f, 2097, plain)
    assert proven.tolist() == checked.tolist()
    assert np.count_nonzero(proven[:, 4]) > DM // 2  # the last column is really computed


def _random_model(T, DM, R, seed):
    """Every entry its own value: no two cells share a move of h, so the proven path's memo of distinct moves
    saves nothing and must still give the seed's integers (the seed's x takes 11 values only)."""
    rng = np.random.default_rng(seed)

    def q(*shape, scale):
        return rng.integers(-scale, scale + 1, size=shape, dtype=np.int64)

    return core_lora.Model(q(T, DM, scale=q20.S), q(DM, DM, scale=q20.S // 8), q(DM, R, scale=q20.S // 8),
                      q(R, DM, scale=q20.S // 8))


@pytest.mark.parametrize(("T", "DM", "R", "seed"), [(5, 9, 3, 1), (2, 31, 1, 2), (7, 4, 4, 3)])
def test_the_proven_path_gives_the_seeds_integers_when_no_move_repeats(T, DM, R, seed):
    m = _random_model(T, DM, R, seed)
    f = core_lora.forward(m)
    dhs = [(q20.tdiv(f.acc_h.T[None] + sign * m.x.T[:, None, :] * 2097, q20.S) - f.h.T[None]) for sign in (1, -1)]
    assert np.unique(np.concatenate([d[:, 0, 0] for d in dhs])).size > DM  # the moves of h[0, 0] barely repeat
    assert lora_fast._proven_a(m, f, dhs, int(np.abs(f.y).sum()))
    got = lora_fast.diffs_fast_a(m, f, 2097, RunContext(params={}))
    assert got.reshape(-1).tolist() == _python_int_diffs(m, m.A, 2097)


@pytest.mark.parametrize(("T", "DM", "R", "moves", "checked"),
                         [(3, 17, 3, 1, 1), (3, 17, 3, 7, 5), (3, 17, 3, 3, 1), (3, 17, 3, 1 << 20, 1 << 21),
                          (1, 5, 1, 2, 1), (3, 17, 3, 11, 1), (3, 17, 3, 8, 2), (3, 17, 1, 1, 2), (1, 5, 1, 2, 2)])
def test_any_chunk_gives_the_same_integers(T, DM, R, moves, checked, monkeypatch):
    """Columns of A go in blocks sized by their distinct moves; on the guarded path, rows go in chunks sized
    by their per-cell moves and in pieces sized by its temporaries. Blocks of one column, uneven ones, chunks
    of 1 row, uneven pieces and everything at once give the same integers, every cell ticked once, in the
    pieces planned (also where R * T is 1)."""
    want_a, _ = _expected_diffs(T, DM, R)
    monkeypatch.setattr(lora_fast, "MOVES_ELEMENTS", moves * R * T)
    monkeypatch.setattr(lora_fast, "CHECKED_ELEMENTS", checked * R * T * DM)
    m = core_lora.init_model(T, DM, R)
    f = core_lora.forward(m)
    V = lora_fast._distinct_shifts(q20.mul(m.x.T, 2097))[0].shape[1]
    block = max(1, moves * R * T // (T * V))
    blocks = [min(block, R - k) for k in range(0, R, block)]
    for proven in (True, False):
        monkeypatch.setattr(lora_fast, "_proven_a", lambda *args, p=proven: p)
        out, ticks = np.zeros((DM, R), np.int64), []
        lora_fast.cells_a(m, f, 2097, range(R), out, ticks.append)
        assert out.reshape(-1).tolist() == want_a.tolist()
        assert sum(ticks) == DM * R
        if proven:  # a tick per block of columns the kernel evaluates at once
            assert all(n % DM == 0 for n in ticks) and len(ticks) >= len(blocks)
            continue
        planned = []
        for b in blocks:
            step, sub = max(1, moves * R // b), max(1, checked * R // b)
            chunks = [min(step, DM - i) for i in range(0, DM, step)]
            planned += [b * min(sub, c - j) for c in chunks for j in range(0, c, sub)]
        assert ticks == planned


@pytest.mark.parametrize("block", ["one (k, t) at a time", "uneven blocks of t", "blocks of k", "all at once"])
def test_any_block_of_moved_rows_gives_the_same_integers(block, monkeypatch):
    """The proven path evaluates the moved rows of y in blocks of (k, t) sized by MOVED_ELEMENTS: one (k, t)
    at a time, 2 of the 5 values of t (the last block shorter), 2 of the 3 values of k with every t, and all
    in one block give the seed's integers."""
    T, DM, R = 5, 13, 3
    want_a, _ = _expected_diffs(T, DM, R)
    m = core_lora.init_model(T, DM, R)
    f = core_lora.forward(m)
    values, _, _ = lora_fast._distinct_shifts(q20.mul(m.x.T, 2097))
    per_t = values.shape[1] * DM
    elements = {"one (k, t) at a time": 1, "uneven blocks of t": 2 * per_t, "blocks of k": 2 * T * per_t,
                "all at once": R * T * per_t}[block]
    monkeypatch.setattr(lora_fast, "MOVED_ELEMENTS", elements)
    proven = _spy(monkeypatch, "_moved_a_unchecked")
    out, ticks = np.zeros((DM, R), np.int64), []
    lora_fast.cells_a(m, f, 2097, range(R), out, ticks.append)
    assert out.reshape(-1).tolist() == want_a.tolist()
    assert proven == [1]  # the proven path ran (one block of columns)
    assert sum(ticks) == DM * R and all(n % DM == 0 for n in ticks)  # every cell once, a block of k a tick


def _spy(monkeypatch, name):
    """Count the calls of ``fast.<name>``, which still runs."""
    calls, real = [], getattr(lora_fast, name)

    def counted(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(lora_fast, name, counted)
    return calls


def test_rows_of_x_with_different_numbers_of_distinct_values_give_python_integers(monkeypatch):
    """Row 0 of x repeats one value, row 1 holds +-v pairs, row 2 every value its own: the moves are padded to
    the longest row, and each cell must still gather its own, with either sign."""
    DM, R = 6, 2
    base = _random_model(3, DM, R, 7)
    x = np.array([[5 * q20.S // 16] * DM,
                  [v * q20.S // 8 for v in (1, -1, 3, -3, 1, 0)],
                  [v * q20.S // 32 for v in (7, -2, 5, 11, -13, 3)]], np.int64)
    m = core_lora.Model(x, base.W, base.A, base.B)
    f = core_lora.forward(m)
    values, where_plus, where_minus = lora_fast._distinct_shifts(q20.mul(m.x.T, 2097))
    assert values.shape == (3, 12)  # the longest row's distinct values, no more
    assert [len(np.unique(row)) for row in values] == [2, 5, 12]  # +-v; +-v, +-3v and 0; 6 values and negatives
    assert (values[np.arange(3)[:, None], where_plus] == m.x * 2097).all()
    assert (values[np.arange(3)[:, None], where_minus] == -m.x * 2097).all()
    proven = _spy(monkeypatch, "_moved_a_unchecked")
    got = lora_fast.diffs_fast_a(m, f, 2097, RunContext(params={}))
    assert got.reshape(-1).tolist() == _python_int_diffs(m, m.A, 2097)
    assert proven == [1]


@pytest.mark.parametrize(("T", "DM"), [(4, 37), (1, 11), (2, 1000)])
def test_the_seeds_x_moves_h_by_11_distinct_values_whatever_the_size(T, DM):
    """The memo's whole point: +-x * delta takes 11 values per row t (x's 11, symmetric about 0), found once
    for every row of A; fewer where a row of x holds fewer of them."""
    m = core_lora.init_model(T, DM, 1)
    values, where_plus, where_minus = lora_fast._distinct_shifts(q20.mul(m.x.T, 2097))
    assert values.shape == (T, 11)
    assert (np.diff(values, axis=1) >= 0).all() and (np.diff(values, axis=1) > 0).any()
    assert where_plus.shape == where_minus.shape == (T, DM)
    three_rows = lora_fast._distinct_shifts(q20.mul(m.x.T[:3], 2097))[0]  # x[0, :3] = -0.3, 0.2, -0.4: 6
    assert three_rows.shape == (T, 6)


def test_sum_abs_is_exact_in_int64_and_beyond_it():
    assert lora_fast._sum_abs(np.array([[-3, 4], [0, -5]], np.int64)) == 12
    big = np.full(4, -(1 << 61), np.int64)  # the sum, 2^63, does not fit int64: Python ints take over
    assert lora_fast._sum_abs(big) == 1 << 63


def test_the_report_counts_the_cells_that_passed(lora_params):
    green = lora_gate.run(ctx(lora_params)).metrics
    assert (green["A"]["cells_passed"], green["B"]["cells_passed"]) == (12, 12)
    red = lora_gate.run(ctx(lora_params, fault="grad-bug")).metrics
    assert (red["A"]["cells_passed"], red["A"]["passed"], red["B"]["cells_passed"]) == (11, False, 12)


def _python_int_diffs(m, tensor, delta):
    """``L(+d) - L(-d)`` per cell from whole forwards, the difference taken in Python ints (no int64)."""
    flat, out = tensor.reshape(-1), []
    for i in range(flat.size):
        save = int(flat[i])
        flat[i] = save + delta
        lp = core_lora.forward(m).loss
        flat[i] = save - delta
        lm = core_lora.forward(m).loss
        flat[i] = save
        out.append(lp - lm)
    return out


@pytest.mark.parametrize("proven", [True, False])
def test_near_the_int64_bound_the_fast_path_matches_python_integers(proven, monkeypatch):
    """x scaled up until the loss is 0.6 x 2^62: both tensors' coarse bounds fail, so every cell goes through
    the tight L(+-delta) check, which needs the unmoved outputs (the seed's naive path refuses here)."""
    base = core_lora.init_model(2, 3, 2)
    m = core_lora.Model(base.x * 3500, base.W, base.A, base.B)
    f = core_lora.forward(m)
    peak = q20.max_abs(f.y) ** 2
    assert f.loss + peak * 2 >= q20.LIMIT  # B's coarse bound (T terms) fails, and A's (T x DM) too
    if not proven:
        monkeypatch.setattr(lora_fast, "_proven_a", lambda *args: False)
    plain = RunContext(params={})
    assert lora_fast.diffs_fast_a(m, f, 2097, plain).reshape(-1).tolist() == _python_int_diffs(m, m.A, 2097)
    assert lora_fast.diffs_fast_b(m, f, 2097, plain).reshape(-1).tolist() == _python_int_diffs(m, m.B, 2097)


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


class CopyingPool(pool_module.WorkerPool):
    """A thread pool with Dask's semantics: ``share`` hands the tasks a pickled copy of the object (its
    arrays are not the gate's), and ``remote`` says so; what a task returns reaches ``on_result``."""

    remote = True
    made: list = []

    def __init__(self, kind, n_workers=0, fault=None, scheduler=None):
        super().__init__(n_workers or 2)
        CopyingPool.made.append((kind, n_workers, fault, scheduler))

    def share(self, obj):
        import pickle

        return super().share(pickle.loads(pickle.dumps(obj)))


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
    handle = pool_module.WorkerPool(2).share(handle_job)
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
