"""The parallel-grad gate: the seed's lines, T1-T4, every executor, and no flakes."""

import time

import numpy as np
import pytest

from nxgates.core import chunks, gradfiles
from nxgates.core.bits import compare_bits, count_differing
from nxgates.core.mlp import Dims, example_grads, init_data
from nxgates.core.pool import choose_executor
from nxgates.core.tape import F32, Tape, constf
from nxgates.errors import ConfigError
from nxgates.gates import parallel_grad as pg
from nxgates.gates.parallel_grad import job as pg_job
from nxgates.gates.parallel_grad import stream as pg_stream
from nxgates.gates.parallel_grad.checks import judge_t1
from tests.helpers import ctx

SEED = {"D": 8, "H": 16, "O": 4, "B": 8, "workers": 0, "executor": "thread"}


def by_name(out):
    return {c.name: c.passed for c in out.checks}


def texts(out):
    return [getattr(i, "text", "") for i in out.items]


def test_seed_sizes_print_the_seed_lines():
    out = pg.run(ctx(SEED))
    lines = texts(out)
    assert " workers=2 pool tasks completed=8/8" in lines
    (line,) = [t for t in lines if t.startswith(" bit-mismatches=0 non-zero grad cells checked=")]
    assert line.endswith("/1536")
    assert int(line.split("=")[-1].split("/")[0]) > 192
    assert by_name(out) == {pg.T1: True, pg.T2: True, pg.T3: True}
    m = out.metrics
    assert (m["tasks_completed"], m["distinct_workers"], m["bit_mismatches"], m["total_cells"]) == (8, 2, 0, 1536)
    assert len(m["grads_sha256"]) == 64


def test_init_is_the_seeds_formulas():
    w, x, t = init_data(Dims(8, 16, 4), 8)
    assert w.dtype == x.dtype == t.dtype == F32
    assert w[5] == constf(((5 * 7 + 1) % 13) - 6, 8)
    assert x[1, 3] == constf(((11 * 5 + 2) % 11) - 5, 7)
    assert t[2, 1] == constf(((9 * 3 + 1) % 9) - 4, 6)


@pytest.mark.parametrize("executor", ["thread", "process"])
@pytest.mark.parametrize("dims", [(8, 16, 4, 8), (5, 3, 2, 7), (31, 9, 3, 2), (64, 33, 10, 13)])
def test_green_at_other_sizes_with_every_executor(executor, dims):
    D, H, O, B = dims
    params = {**SEED, "D": D, "H": H, "O": O, "B": B, "executor": executor, "workers": 2}
    out = pg.run(ctx(params))
    assert all(by_name(out).values()), by_name(out)


def test_executors_and_worker_counts_give_the_same_bits():
    digests = {pg.run(ctx({**SEED, "executor": e, "workers": w})).digest
               for e in ("thread", "process") for w in (2, 3, 5)}
    assert len(digests) == 1


def test_a_pass_whose_tail_either_worker_runs_is_green_and_gives_the_same_bits():
    """B=40 in one chunk: the process pool shares each pass's last 10 tasks between its workers; every
    example still runs once a pass, each on one worker, and the bits are the thread pool's."""
    params = {**SEED, "B": 40, "workers": 2}
    moved = pg.run(ctx({**params, "executor": "process"}))
    assert all(by_name(moved).values()), by_name(moved)
    assert sum(moved.metrics["tasks_per_worker"].values()) == 40 and moved.metrics["distinct_workers"] == 2
    assert moved.digest == pg.run(ctx({**params, "executor": "thread"})).digest


def test_green_100_times_in_a_row():
    digests = set()
    for _ in range(100):
        out = pg.run(ctx(SEED))
        assert all(by_name(out).values()), by_name(out)
        digests.add(out.digest)
    assert len(digests) == 1


def test_t1_goes_red_when_one_example_differs_by_one_ulp():
    g = np.empty((8, 192), F32)
    dims = Dims(8, 16, 4)
    w, x, t = init_data(dims, 8)
    for b in range(8):
        example_grads(Tape(dims.arena), dims, w, x[b], t[b], g[b])
    other = g.copy()
    assert judge_t1(compare_bits(g, other), 8, 192)[0] is True
    other[5, 17] = np.nextafter(other[5, 17], np.float32(np.inf))  # one ulp, one cell, one example
    cmp = compare_bits(g, other)
    assert cmp.mismatches == 1 and cmp.bad_rows == [(5, 1)]
    assert judge_t1(cmp, 8, 192) == (False, "1 mismatching cells")


def test_t1_goes_red_when_the_comparison_is_vacuous():
    zeros = np.zeros((8, 192), F32)
    assert judge_t1(compare_bits(zeros, zeros.copy()), 8, 192) == (False, "vacuous: only 0 non-zero cells")
    zero = np.zeros((1, 3), F32)
    assert compare_bits(zero, -zero).mismatches == 3  # -0.0 has other bits than 0.0


def test_save_then_compare_round_trip(tmp_path):
    path = tmp_path / "grads.npy"
    saved = pg.run(ctx(SEED, save_grads=str(path)))
    arr = np.load(path)
    assert arr.dtype == F32 and arr.shape == (8, 192)
    out = pg.run(ctx(SEED, compare_grads=str(path)))
    assert by_name(out)[pg.T4] is True
    assert out.digest == saved.digest


def test_compare_fails_on_a_one_ulp_difference(tmp_path):
    path = tmp_path / "grads.npy"
    pg.run(ctx(SEED, save_grads=str(path)))
    arr = np.load(path)
    arr[3, 100] = np.nextafter(arr[3, 100], np.float32(-np.inf))
    np.save(path, arr)
    out = pg.run(ctx(SEED, compare_grads=str(path)))
    assert by_name(out)[pg.T4] is False


@pytest.mark.parametrize("content, message", [
    (None, "no such file"),
    (b"not a numpy file at all", "not a readable .npy"),
    (np.zeros((8, 191), F32), "does not match (B, NP) = (8, 192)"),
    (np.zeros((8, 192), np.float64), "expected float32"),
])
def test_bad_compare_files_are_usage_errors(tmp_path, content, message):
    path = tmp_path / "g.npy"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        np.save(path, content)
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        pg.run(ctx(SEED, compare_grads=str(path)))


def test_validation():
    with pytest.raises(ConfigError, match="workers=1"):
        pg.validate({**SEED, "workers": 1})
    with pytest.raises(Exception, match="memory budget"):
        pg.validate({**SEED, "D": 1 << 20, "H": 1 << 20})


def test_auto_executor_picks_processes_only_where_they_pay():
    assert choose_executor("auto", None, pg.AUTO_EXECUTOR, Dims(8, 16, 4).n_params) == "thread"
    assert choose_executor("auto", None, pg.AUTO_EXECUTOR, Dims(784, 256, 10).n_params) == "process"
    assert choose_executor("thread", None, pg.AUTO_EXECUTOR, Dims(784, 256, 10).n_params) == "thread"
    assert choose_executor("auto", "tcp://127.0.0.1:8786", pg.AUTO_EXECUTOR, 0) == "dask"
    with pytest.raises(ConfigError, match="^a scheduler address applies to executor=dask, not executor=thread$"):
        choose_executor("thread", "tcp://127.0.0.1:8786", pg.AUTO_EXECUTOR, 0)
    out = pg.run(ctx({**SEED, "executor": "auto"}))
    assert out.metrics["executor"] == "thread" and all(by_name(out).values())


#: ``grads_sha256`` as the whole-batch implementation computed it (before streaming): streaming must keep it.
PINNED_DIGESTS = {
    (8, 16, 4, 8): "3814f0647e698ab85f962a8cd3131eb7945b24dbeaa63924daabc93b0117ae71",  # seed
    (256, 128, 10, 64): "13cf99a909d1c771941b32f609089f44bb177738596ed400e0461c5b5955ef35",  # medium
    (64, 33, 10, 13): "6686f4d9f5a0ed8f11288b595a230e805ea1be8daa1f5df0a34cde5847cca18f",
}


@pytest.mark.parametrize("dims", list(PINNED_DIGESTS))
def test_digest_is_pinned_at_seed_and_medium_sizes(dims):
    D, H, O, B = dims
    out = pg.run(ctx({**SEED, "D": D, "H": H, "O": O, "B": B, "executor": "auto"}))
    assert all(by_name(out).values())
    assert out.digest == out.metrics["grads_sha256"] == PINNED_DIGESTS[dims]


def whole_batch(dims: Dims, B: int) -> np.ndarray:
    """The reference: every example's gradient row, serially, into one (B, NP) array."""
    w, x, t = init_data(dims, B)
    g = np.empty((B, dims.n_params), F32)
    tape = Tape(dims.arena)
    for b in range(B):
        example_grads(tape, dims, w, x[b], t[b], g[b])
    return g


@pytest.mark.parametrize("executor, workers", [("thread", 2), ("process", 3)])
def test_streaming_in_small_chunks_equals_the_whole_batch(monkeypatch, tmp_path, executor, workers):
    import hashlib

    monkeypatch.setattr(chunks, "CHUNK_BYTES", 1)  # the smallest chunk: one example per worker
    D, H, O, B = 64, 33, 10, 13
    reference = whole_batch(Dims(D, H, O), B)
    path = tmp_path / "g.npy"
    params = {**SEED, "D": D, "H": H, "O": O, "B": B, "executor": executor, "workers": workers}
    out = pg.run(ctx(params, save_grads=str(path)))
    assert out.metrics["chunk_examples"] == workers  # 13 = 4 whole chunks and a ragged last one
    assert all(by_name(out).values()), by_name(out)
    assert out.digest == hashlib.sha256(reference.tobytes()).hexdigest() == PINNED_DIGESTS[(D, H, O, B)]
    assert path.read_bytes() == _npy_bytes(reference, tmp_path)  # the file np.save writes, byte for byte
    assert by_name(pg.run(ctx(params, compare_grads=str(path))))[pg.T4] is True


def _npy_bytes(arr, tmp_path):
    ref = tmp_path / "ref.npy"
    np.save(ref, arr)
    return ref.read_bytes()


def test_a_one_ulp_difference_in_a_later_chunk_fails_t4(monkeypatch, tmp_path):
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 1)
    params = {**SEED, "B": 9}
    path = tmp_path / "g.npy"
    pg.run(ctx(params, save_grads=str(path)))
    arr = np.load(path)
    arr[8, 191] = np.nextafter(arr[8, 191], np.float32(np.inf))  # the last row of the last chunk
    np.save(path, arr)
    out = pg.run(ctx(params, compare_grads=str(path)))
    assert by_name(out)[pg.T4] is False and by_name(out)[pg.T1] is True
    assert "1 cells differ" in next(c.detail for c in out.checks if c.name == pg.T4)


def test_the_tally_names_the_example_of_a_late_chunk():
    """A fold that forgot the chunk's offset would blame example 1 instead of 7."""
    g = whole_batch(Dims(8, 16, 4), 8)
    bad = g.copy()
    bad[7, 3] = np.nextafter(bad[7, 3], np.float32(np.inf))
    tally = pg_stream.Tally()
    for first in range(0, 8, 3):
        tally.take_serial_rows(g[first : first + 3])
        tally.fold(first, g[first : first + 3], bad[first : first + 3], g[first : first + 3], None)
    assert (tally.mismatches, tally.bad_rows, tally.rerun_mismatches) == (1, [(7, 1)], 1)
    assert tally.sha.hexdigest() == PINNED_DIGESTS.get((8, 16, 4, 8))


def test_save_over_the_compared_file_reads_the_old_one_first(tmp_path):
    path = tmp_path / "g.npy"
    pg.run(ctx(SEED, save_grads=str(path)))
    out = pg.run(ctx(SEED, save_grads=str(path), compare_grads=str(path)))
    assert by_name(out)[pg.T4] is True
    assert [p.name for p in tmp_path.iterdir()] == ["g.npy"]  # no temporary file left behind


def test_memory_is_planned_per_chunk_not_per_batch():
    large = {**SEED, "D": 784, "H": 256, "O": 10, "workers": 2}
    assert pg.footprint_bytes(Dims(784, 256, 10), 2, 1 << 20) == pg.footprint_bytes(Dims(784, 256, 10), 2, 4096)
    pg.validate({**large, "B": 1 << 20})  # a million examples: streamed, so not refused
    pg.validate({**SEED, "D": 784, "H": 1024, "O": 10, "B": 1024})  # the xl preset
    with pytest.raises(Exception, match="memory budget"):
        pg.validate({**SEED, "D": 1 << 16, "H": 1 << 16, "B": 2})  # one row alone is 16 GiB


def test_folding_beside_the_next_serial_pass_gives_the_same_tally(monkeypatch, tmp_path):
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 1)
    params = {**SEED, "D": 64, "H": 33, "O": 10, "B": 13}
    runs = {}
    for overlap in (True, False):
        monkeypatch.setattr(pg_stream, "OVERLAP_FOLD", overlap)
        path = tmp_path / f"g{overlap}.npy"
        out = pg.run(ctx(params, save_grads=str(path)))
        runs[overlap] = ({k: v for k, v in out.metrics.items() if not k.endswith("_seconds")}, path.read_bytes())
    assert runs[True] == runs[False]
    assert runs[True][0]["grads_sha256"] == PINNED_DIGESTS[(64, 33, 10, 13)]


@pytest.mark.parametrize("executor", ["thread", "process"])
def test_a_slow_hash_lags_into_the_next_chunk_and_still_hashes_every_row_in_order(monkeypatch, executor):
    """At large sizes the SHA-256 is as slow as the serial pass, so a chunk's hashing runs on into the next
    chunk's serial pass. Here it is far slower: a serial buffer written again before its rows were hashed,
    or rows hashed out of order, would change the digest."""
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 1)
    real = pg_stream.Tally.take_serial_rows

    def slow(self, rows):
        time.sleep(0.004)
        real(self, rows)

    monkeypatch.setattr(pg_stream.Tally, "take_serial_rows", slow)
    out = pg.run(ctx({**SEED, "D": 64, "H": 33, "O": 10, "B": 13, "executor": executor}))
    assert all(by_name(out).values())
    assert out.metrics["grads_sha256"] == PINNED_DIGESTS[(64, 33, 10, 13)]


def test_hashing_waits_while_the_workers_run_the_timed_pass(monkeypatch):
    """The helper's hashing pauses during the timed parallel pass (the workers have both cores, and the pass
    is timed alone): at most the row it was already hashing when the pass began completes during it. The
    untimed re-run is free to overlap the hashing."""
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 1)
    hashed = []
    real_take = pg_stream.Tally.take_serial_rows

    def slow_take(self, rows):
        time.sleep(0.003)  # slower than the serial pass: rows queue up for the helper
        real_take(self, rows)
        hashed.append(1)

    real_pass = pg_stream.parallel_pass
    during = []

    def watched_pass(ctx_, pool, handle, which, *args, **kwargs):
        before = len(hashed)
        time.sleep(0.02)  # time enough for a helper that does not pause to hash a few queued rows
        result = real_pass(ctx_, pool, handle, which, *args, **kwargs)
        if which == 0:  # the timed pass
            during.append(len(hashed) - before)
        return result

    monkeypatch.setattr(pg_stream.Tally, "take_serial_rows", slow_take)
    monkeypatch.setattr(pg_stream, "parallel_pass", watched_pass)
    out = pg.run(ctx({**SEED, "D": 64, "H": 33, "O": 10, "B": 13}))
    assert out.metrics["grads_sha256"] == PINNED_DIGESTS[(64, 33, 10, 13)]
    assert len(hashed) == 13 and len(during) == 7  # 7 chunks, one timed pass each
    assert max(during) <= 1, during


def test_a_fault_in_a_late_chunk_is_caught_with_the_overlapped_fold(monkeypatch):
    """The nondeterministic fault drifts example 1; with 2-example chunks the shared-arena fault and a
    dropped task land in the first chunks, folded on the helper thread while later chunks run."""
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 1)
    for fault, check in (("nondeterministic", pg.T3), ("drop-task", pg.T2), ("shared-arena", pg.T1)):
        out = pg.run(ctx({**SEED, "B": 9, "executor": "process"}, fault=fault))
        assert by_name(out)[check] is False, fault


def test_a_fortran_order_file_is_compared_by_value(monkeypatch, tmp_path):
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 1)
    path = tmp_path / "g.npy"
    pg.run(ctx(SEED, save_grads=str(path)))
    arr = np.load(path)
    np.save(path, np.asfortranarray(arr))  # same values, column-major bytes
    assert by_name(pg.run(ctx(SEED, compare_grads=str(path))))[pg.T4] is True
    arr[6, 5] = np.nextafter(arr[6, 5], np.float32(np.inf))
    np.save(path, np.asfortranarray(arr))
    assert by_name(pg.run(ctx(SEED, compare_grads=str(path))))[pg.T4] is False


def test_compare_file_is_read_chunk_by_chunk_not_loaded(monkeypatch, tmp_path):
    """--compare-grads must not load the whole file: np.load without mmap_mode would."""
    path = tmp_path / "g.npy"
    pg.run(ctx(SEED, save_grads=str(path)))
    real_load = np.load

    def load(*args, **kwargs):
        assert kwargs.get("mmap_mode") == "r"
        return real_load(*args, **kwargs)

    monkeypatch.setattr(gradfiles.np, "load", load)
    assert by_name(pg.run(ctx(SEED, compare_grads=str(path))))[pg.T4] is True


def test_rows_a_task_did_not_count_are_compared_by_the_gate():
    reference = np.arange(4 * 5, dtype=F32).reshape(4, 5)
    other = reference.copy()
    other[1, :2] += 1  # two cells of a row no task counted
    other[2, 0] += 1  # a row whose task counted (and said 7: its count is taken as it is)
    counted = np.array([0, -1, 7, -1])
    assert count_differing(reference, other, counted, rows=2).tolist() == [0, 2, 7, 0]
    assert count_differing(reference, other).tolist() == [0, 2, 1, 0]  # no counts: every row compared
    assert counted.tolist() == [0, -1, 7, -1]  # the tasks' counts are not written over


@pytest.mark.parametrize("executor", ["thread", "process"])
def test_the_tasks_count_every_row_and_the_gate_compares_none(monkeypatch, executor):
    """Where workers map the serial rows, the re-run's tasks count T1 and T3 for their rows: the fold gets
    a count for every row (from the workers' processes too), so the gate's helper thread has only the digest
    to do. T3's counts are all there is: the re-run's rows stay private to the workers."""
    seen = []
    real = pg_stream.count_differing

    def spy(reference, other, counted=None, rows=16):
        seen.append(None if counted is None else counted.copy())
        return real(reference, other, counted, rows)

    monkeypatch.setattr(pg_stream, "count_differing", spy)
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 1)
    out = pg.run(ctx({**SEED, "B": 9, "executor": executor}, fault="nondeterministic"))
    assert by_name(out)[pg.T3] is False and out.metrics["rerun_bit_mismatches"] > 0  # caught from the counts
    assert len(seen) == 5 and all(c is not None and (c >= 0).all() for c in seen)  # T1's, 5 chunks


def test_a_parallel_path_wrong_the_same_way_twice_fails_t1_and_passes_t3(monkeypatch):
    """The re-run is compared with the first parallel pass, not with the serial rows: a parallel path
    that differs from serial identically in both passes is a T1 failure and a T3 pass."""
    import threading

    def off_by_one_ulp_on_the_workers(tape, dims, w, x, t, row, **kwargs):
        example_grads(tape, dims, w, x, t, row, **kwargs)
        if threading.current_thread().name.startswith("nxgates-worker"):
            row[0] = np.nextafter(row[0], np.float32(np.inf))

    monkeypatch.setattr(pg_job, "example_grads", off_by_one_ulp_on_the_workers)
    out = pg.run(ctx(SEED))
    assert by_name(out) == {pg.T1: False, pg.T2: True, pg.T3: True}
    assert out.metrics["bit_mismatches"] == 8 and out.metrics["rerun_bit_mismatches"] == 0


_REAL_RUN_TASK = pg_job.run_task


def _rerun_of_example_5_fails(task_ctx, worker):
    """Module level: a forked worker's task is pickled by name."""
    which, b = task_ctx.output, task_ctx.example
    if which == 1 and b == 5:
        raise RuntimeError("lost before counting")
    return _REAL_RUN_TASK(task_ctx, worker)


@pytest.mark.parametrize("executor", ["thread", "process"])
def test_a_rerun_task_that_fails_before_counting_fails_t3(monkeypatch, executor):
    """A re-run's row is private to its task, so a task that never counted leaves nothing to compare: T3
    must still fail (on the pool's record of the task), not pass on a count of zero."""
    monkeypatch.setattr(pg_stream, "run_task", _rerun_of_example_5_fails)
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 1)
    out = pg.run(ctx({**SEED, "B": 9, "executor": executor}))
    assert by_name(out)[pg.T3] is False
    assert by_name(out)[pg.T1] is True  # the first pass was counted by the gate (no task counted it)
