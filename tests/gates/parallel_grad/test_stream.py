"""The streamed batch: the tally's fold, the serial rows' digest, one chunk into the tally, a parallel pass,
the bounded wait, the pool's start-up, and the whole stream on a real pool."""

import hashlib
import threading
from types import SimpleNamespace

import numpy as np
import pytest

from nxgates.core.mlp import Dims, example_grads, init_examples, init_weights
from nxgates.core.pool import WaitResult
from nxgates.core.pool.local import ThreadWorkerPool
from nxgates.core.tape import F32, Tape
from nxgates.gates.parallel_grad import stream as st
from nxgates.gates.parallel_grad.job import GradJob, TaskContext, prepare_task, run_task, store_row
from nxgates.gates.parallel_grad.stream import PassResult, PoolStart, Tally, fold_chunk, parallel_pass, wait_pass


def rows_of(values):
    return np.array(values, F32)


# ---- the tally ----

def test_fold_counts_every_row_without_counts_and_names_bad_rows_from_first():
    serial = rows_of([[1, 2, 3], [4, 5, 6], [7, 8, 9]])
    parallel = serial.copy()
    parallel[1, :2] = 0
    parallel[2, 0] = -7
    rerun = parallel.copy()
    rerun[0, 0] = 9
    saved = serial.copy()
    saved[2] = 0
    tally = Tally()
    tally.fold(10, serial, parallel, rerun, saved)
    assert (tally.mismatches, tally.bad_rows, tally.rerun_mismatches, tally.file_mismatches) == (
        3, [(11, 2), (12, 1)], 1, 3)
    tally.fold(20, serial, parallel, rerun, None)
    assert (tally.mismatches, tally.rerun_mismatches, tally.file_mismatches) == (6, 2, 3)
    assert tally.bad_rows == [(11, 2), (12, 1), (21, 2), (22, 1)]
    tally.fold(30, serial, parallel, rerun, saved)
    assert tally.file_mismatches == 6  # a file's differences add up across chunks too


def test_fold_takes_the_tasks_counts_and_compares_only_uncounted_rows():
    serial = rows_of([[1, 2], [3, 4], [5, 6]])
    parallel = rows_of([[0, 0], [0, 4], [5, 6]])
    counted = np.array([[7, -1, 0], [1, -1, 3]])
    tally = Tally()
    tally.fold(0, serial, parallel, None, None, counted)
    assert (tally.mismatches, tally.bad_rows) == (8, [(0, 7), (1, 1)])
    assert tally.rerun_mismatches == 4  # the re-run's counts, the uncounted (-1) row left out
    assert counted.tolist() == [[7, -1, 0], [1, -1, 3]]


def test_fold_compares_the_rerun_rows_no_task_counted():
    serial = rows_of([[1, 2], [3, 4]])
    rerun = serial.copy()
    rerun[:, 0] = 0
    counted = np.array([[0, 0], [5, -1]])
    tally = Tally()
    tally.fold(0, serial, serial.copy(), rerun, None, counted)
    assert tally.rerun_mismatches == 6 and tally.mismatches == 0


def test_serial_rows_go_into_the_digest_and_the_nonzero_count_by_their_bits():
    tally = Tally()
    a, b = rows_of([[0.0, -0.0, 1.5]]), rows_of([[2.0, 0.0, 0.0]])
    tally.take_serial_rows(a)
    tally.take_serial_rows(b)
    assert tally.sha.hexdigest() == hashlib.sha256(a.tobytes() + b.tobytes()).hexdigest()
    assert tally.nonzero == 3  # -0.0 is not 0 bits


def test_the_helper_hashes_once_the_cores_are_free():
    tally = Tally()
    st._take_when_free(tally, rows_of([1.0, 0.0]), st.HelperPause())
    assert tally.nonzero == 1 and tally.sha.hexdigest() == hashlib.sha256(rows_of([1.0, 0.0]).tobytes()).hexdigest()


def test_holding_the_helper_waits_for_its_row_and_stops_the_next_until_released():
    """hold() returns only once the row being hashed is done, and no row is started while held: the timed
    parallel pass then finds the helper off the cores."""
    tally, pause = Tally(), st.HelperPause()
    started, finish = threading.Event(), threading.Event()
    real_take = Tally.take_serial_rows

    def slow_take(self, row):
        started.set()
        finish.wait(5)
        real_take(self, row)

    rows = rows_of([[1.0, 0.0], [2.0, 3.0]])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Tally, "take_serial_rows", slow_take)
        helper = threading.Thread(target=st._take_when_free, args=(tally, rows, pause))
        helper.start()
        assert started.wait(5)  # the helper is inside the first row
        held = threading.Thread(target=pause.hold)
        held.start()
        held.join(0.2)
        assert held.is_alive()  # hold() waits for that row
        finish.set()
        held.join(5)
        assert not held.is_alive() and tally.nonzero == 1  # the first row is done, the second not started
        helper.join(0.2)
        assert helper.is_alive() and tally.nonzero == 1  # held: the helper waits
        pause.release()
        helper.join(5)
    assert not helper.is_alive() and tally.nonzero == 3
    assert tally.sha.hexdigest() == hashlib.sha256(rows.tobytes()).hexdigest()


# ---- one chunk into the tally ----

class Compare:
    def __init__(self, rows, report=True):
        self.rows, self.reads, self.added = rows, [], []
        self.report = self if report else None

    def read(self, first, out):
        self.reads.append((first, out.shape))
        out[...] = self.rows[first : first + out.shape[0]]

    def add(self, first, rows, saved):
        self.added.append((first, rows.copy(), saved.copy()))


class Save:
    def __init__(self):
        self.written = []

    def write(self, rows):
        self.written.append(rows.copy())


def chunk_job(outputs, counted=None):
    return SimpleNamespace(outputs=outputs, counted=counted)


def test_a_chunk_folds_its_rows_against_the_file_and_is_saved():
    rows = rows_of([[1, 2], [3, 4]])
    parallel = rows_of([[1, 2], [3, 0], [9, 9]])
    rerun = rows_of([[1, 2], [0, 0], [9, 9]])
    file_rows = rows_of([[0, 0], [0, 0], [1, 2], [3, 5]])
    compare, save, tally = Compare(file_rows), Save(), Tally()
    saved = np.zeros((3, 2), F32)
    fold_chunk(tally, 2, rows, chunk_job([parallel, rerun]), compare, saved, save)
    assert compare.reads == [(2, (2, 2))]
    (added,) = compare.added
    assert added[0] == 2 and added[1].tolist() == [[1, 2], [3, 4]] and added[2].tolist() == [[1, 2], [3, 5]]
    assert (tally.mismatches, tally.bad_rows, tally.rerun_mismatches, tally.file_mismatches) == (1, [(3, 1)], 1, 1)
    assert [w.tolist() for w in save.written] == [[[1, 2], [3, 4]]]


def test_a_chunk_without_a_report_or_a_file_or_a_save():
    rows = rows_of([[1, 2]])
    tally = Tally()
    compare = Compare(rows_of([[1, 2]]), report=False)
    fold_chunk(tally, 0, rows, chunk_job([rows_of([[1, 2], [5, 5]]), None], np.array([[0, 9], [2, 9]])), compare,
               np.zeros((2, 2), F32), None)
    assert compare.reads == [(0, (1, 2))] and compare.added == []
    assert (tally.mismatches, tally.rerun_mismatches, tally.file_mismatches) == (0, 2, 0)
    fold_chunk(tally, 1, rows, chunk_job([rows_of([[0, 2]]), rows_of([[0, 0]])]), None, None, None)
    assert (tally.mismatches, tally.rerun_mismatches, tally.file_mismatches, tally.bad_rows) == (1, 3, 0, [(1, 1)])


# ---- a pass and its wait ----

class FakeClock:
    def __init__(self, *readings):
        self.readings = list(readings)

    def perf_counter(self):
        return self.readings.pop(0)


class FakePool:
    def __init__(self, results=None, n_workers=2, completions=None):
        self.records, self.submitted, self.waits, self.flushed = [SimpleNamespace(label="old")], [], [], 0
        self.results = results or [WaitResult(True, False, 0)]
        self.completions = list(completions or [])
        self.n_workers, self.done = n_workers, 5

    def submit(self, fn, arg, label="", worker=None, on_result=None, movable=False):
        self.submitted.append((fn, arg, label, worker, on_result, movable))
        self.records.append(SimpleNamespace(label=label))

    def n_completed(self):
        return self.completions.pop(0) if self.completions else self.done

    def wait(self, target, timeout):
        self.waits.append((target, timeout))
        return self.results.pop(0)

    def flush(self):
        self.flushed += 1


class Progress:
    def __init__(self):
        self.calls = []

    def start(self, label, total):
        self.calls.append(("start", label, total))

    def advance(self, steps=1):
        self.calls.append(("advance", steps))

    def stop(self):
        self.calls.append(("stop",))


def run_ctx(remaining=()):
    left = list(remaining)
    return SimpleNamespace(progress=Progress(), remaining=lambda: left.pop(0) if left else None,
                           check_time=lambda: None)


def test_a_pass_deals_a_task_per_example_and_keeps_its_records(monkeypatch):
    monkeypatch.setattr(st, "time", FakeClock(10.0, 12.5))
    pool = FakePool(completions=[5, 5, 8])
    result = parallel_pass(run_ctx(), pool, "h", 1, range(6, 9), 0)
    assert [(s[0], s[1], s[2], s[4]) for s in pool.submitted] == [
        (run_task, TaskContext("h", 1, 0, 6, 0), "example 6", None),
        (run_task, TaskContext("h", 1, 1, 7, 0), "example 7", None),
        (run_task, TaskContext("h", 1, 2, 8, 0), "example 8", None)]
    assert [r.label for r in result.records] == ["example 6", "example 7", "example 8"]
    assert pool.waits == [(8, 0.2)]
    assert result.waited is not None and result.waited.reached and result.seconds == 2.5
    assert isinstance(result, PassResult)


def test_a_pass_marks_its_last_quarter_movable_once_each_worker_has_four_tasks_of_its_own_before_it():
    pool = FakePool()
    parallel_pass(run_ctx(), pool, "h", 0, range(40, 56), 0)
    assert [s[5] for s in pool.submitted] == [False] * 12 + [True] * 4
    pool = FakePool()
    parallel_pass(run_ctx(), pool, "h", 0, range(0, 10), 0)  # 8 of its own: 4 a worker
    assert [s[5] for s in pool.submitted] == [False] * 8 + [True] * 2
    pool = FakePool()
    parallel_pass(run_ctx(), pool, "h", 0, range(0, 9), 0)  # 7 of its own: too few to move 2
    assert not any(s[5] for s in pool.submitted)


def test_a_pass_whose_rows_come_back_stores_them_by_slot():
    pool = FakePool()
    rows = np.zeros((2, 3), F32)
    parallel_pass(run_ctx(), pool, "h", 0, range(4, 6), 1, rows)
    ctxs = [s[1] for s in pool.submitted]
    assert ctxs == [TaskContext("h", 0, 0, 4, 1), TaskContext("h", 0, 1, 5, 1)]
    pool.submitted[1][4](rows_of([1, 2, 3]))
    pool.submitted[0][4](None)
    assert rows.tolist() == [[0, 0, 0], [1, 2, 3]]
    assert all(s[4].func is store_row for s in pool.submitted)


def test_the_wait_moves_the_progress_until_the_pass_is_done():
    results = [WaitResult(False, True, 0), WaitResult(False, True, 0), WaitResult(True, False, 0)]
    pool = FakePool(results, completions=[13, 15, 18])
    ctx = run_ctx()
    assert wait_pass(ctx, pool, 10, 8) is not None
    assert pool.waits == [(18, 0.2)] * 3
    assert ctx.progress.calls == [("advance", 3), ("advance", 2), ("advance", 3)]


def test_the_wait_returns_when_the_pool_goes_idle():
    idle = WaitResult(False, False, 0)
    pool = FakePool([idle, WaitResult(True, False, 0)], completions=[11])
    ctx = run_ctx()
    assert wait_pass(ctx, pool, 10, 4) is idle and pool.waits == [(14, 0.2)]
    assert ctx.progress.calls == [("advance", 1)]


def test_the_wait_honours_the_deadline():
    late = WaitResult(False, True, 0)
    pool = FakePool([late] * 5)
    ctx = run_ctx([5.0, 0.5, 0.2])
    assert wait_pass(ctx, pool, 0, 10) is late
    assert pool.waits == [(10, 0.2), (10, 0.2), (10, 0.2)]
    pool = FakePool([late] * 5)
    assert wait_pass(run_ctx([0.1]), pool, 0, 10) is late and pool.waits == [(10, 0.1)]
    pool = FakePool([late] * 5)
    assert wait_pass(run_ctx([-3.0]), pool, 0, 10) is late and pool.waits == [(10, 0.0)]


# ---- start-up ----

def test_start_up_prepares_every_worker_then_waits_once(monkeypatch):
    monkeypatch.setattr(st, "time", FakeClock(1.0, 1.5, 4.0, 6.0))
    pool = FakePool(n_workers=3)
    ctx = run_ctx([7.5])
    start = PoolStart(pool, ctx, "h")
    assert [(s[0], s[1], s[2], s[3]) for s in pool.submitted] == [
        (prepare_task, "h", f"start worker {w}", w) for w in range(3)]
    assert pool.flushed == 1 and start.target == 8 and start.seconds == 0.5 and start.done is False
    start.ready()
    assert pool.waits == [(8, 7.5)] and start.seconds == 2.5 and start.done is True
    start.ready()
    assert pool.waits == [(8, 7.5)]


# ---- the whole stream on a real pool ----

DIMS = Dims(6, 5, 3)


def _reference(B):
    w = init_weights(DIMS)
    x, t = init_examples(DIMS, 0, B)
    out = np.empty((B, DIMS.n_params), F32)
    for b in range(B):
        example_grads(Tape(DIMS.arena), DIMS, w, x[b], t[b], out[b])
    return out


def _stream(monkeypatch, B, chunk, overlap, fault=None, ctx=None, compare=None):
    monkeypatch.setattr(st, "OVERLAP_FOLD", overlap)
    pool = ThreadWorkerPool(2)
    NP = DIMS.n_params
    job = GradJob(DIMS, pool.array((NP,)), pool.array((DIMS.D, DIMS.H)), pool.array((chunk, DIMS.D)),
                  pool.array((chunk, DIMS.O)), [pool.array((chunk, NP)), None], fault, n_workers=2)
    job.serial, job.counted = pool.array((2, chunk, NP)), pool.array((2, chunk), np.int64)
    job.w[...] = init_weights(DIMS)
    job.w1_t[...] = job.w[: DIMS.n_w1].reshape(DIMS.H, DIMS.D).T
    job.x[...], job.t[...] = init_examples(DIMS, 0, chunk)
    ctx = ctx or run_ctx()
    save = Save()
    ready = []
    try:
        handle = pool.register(job)
        start = PoolStart(pool, ctx, handle)
        tally = st.stream(ctx, pool, handle, job, B, chunk, compare, save,
                          lambda: (ready.append(1), start.ready()))
    finally:
        pool.close()
    return tally, save, ctx, ready


def _file_one_cell_off(B, example):
    """A --compare-grads file of the batch's rows with one cell of ``example`` changed."""
    rows = _reference(B)
    rows[example, 0] += 1
    return Compare(rows, report=False)


@pytest.mark.parametrize("overlap", [True, False])
def test_the_stream_folds_every_chunk_in_example_order(monkeypatch, overlap):
    B, chunk = 5, 2
    tally, save, ctx, ready = _stream(monkeypatch, B, chunk, overlap)
    ref = _reference(B)
    assert tally.sha.hexdigest() == hashlib.sha256(ref.tobytes()).hexdigest()
    assert tally.nonzero == int(np.count_nonzero(ref.view(np.uint32)))
    assert (tally.mismatches, tally.rerun_mismatches, tally.bad_rows, tally.file_mismatches) == (0, 0, [], 0)
    assert np.concatenate(save.written).tobytes() == ref.tobytes()
    assert [w.shape[0] for w in save.written] == [2, 2, 1]
    assert [r.label for r in tally.records] == [f"example {b}" for b in range(B)]
    assert [r.label for r in tally.rerun_records] == [f"example {b}" for b in range(B)]
    assert all(r.done and r.error is None for r in tally.records + tally.rerun_records)
    assert tally.waited.reached and tally.rerun_waited.reached
    assert tally.serial_seconds > 0 and tally.parallel_seconds > 0
    calls = ctx.progress.calls
    assert calls[0] == ("start", "examples: serial, parallel, re-run", 15) and calls[-1] == ("stop",)
    assert sum(c[1] for c in calls if c[0] == "advance") == 15
    assert len(ready) == 3


@pytest.mark.parametrize(("B", "chunk", "halves"), [(2, 2, 1), (4, 2, 2), (5, 2, 2)])
def test_the_serial_pass_maps_only_the_serial_buffers_it_will_use(monkeypatch, B, chunk, halves):
    """The serial rows' pages are written before the timed pass, but a batch of one chunk never touches the
    second half of the double buffer (at large on Dask that half alone is 205 MB)."""
    touched = []
    real = st.stream

    def stream(ctx, pool, handle, job, B_, chunk_, *rest):
        job.serial[...] = np.nan
        tally = real(ctx, pool, handle, job, B_, chunk_, *rest)
        touched.extend(bool(np.isfinite(job.serial[h]).any()) for h in range(2))
        return tally

    monkeypatch.setattr(st, "stream", stream)
    monkeypatch.setattr(st, "PAGE_FLOATS", 1)  # every cell a page: these rows are smaller than one
    tally, _, _, _ = _stream(monkeypatch, B, chunk, True)
    assert touched == [True] * halves + [False] * (2 - halves)
    assert tally.sha.hexdigest() == hashlib.sha256(_reference(B).tobytes()).hexdigest()


def test_the_stream_catches_a_drifting_example_in_a_later_chunk(monkeypatch):
    tally, save, ctx, ready = _stream(monkeypatch, 4, 2, True, fault="nondeterministic")
    assert tally.mismatches > 0 and tally.rerun_mismatches > 0
    assert [b for b, _ in tally.bad_rows] == [1]


@pytest.mark.parametrize(("hand_over", "chunk", "handed"), [(8, 2, [2, 2, 2]), (1, 2, [1] * 6), (2, 5, [2, 2, 1, 1])])
def test_hashing_and_folding_run_in_order_on_one_named_helper_thread(monkeypatch, hand_over, chunk, handed):
    """Serial rows reach the helper HAND_OVER_ROWS at a time, and the rest of a chunk at its end: 6 examples
    in chunks of 2 are 3 hand-overs of 2 rows (or 6 of 1); in chunks of 5, rows 0-1, 2-3, 4, then 5."""
    names, sizes = [], []
    real_take, real_fold = st._take_when_free, st.fold_chunk

    def take(tally, rows, free):
        names.append(threading.current_thread().name)
        sizes.append(rows.shape[0])
        real_take(tally, rows, free)

    def fold(*args):
        names.append(threading.current_thread().name)
        real_fold(*args)

    monkeypatch.setattr(st, "HAND_OVER_ROWS", hand_over)
    monkeypatch.setattr(st, "_take_when_free", take)
    monkeypatch.setattr(st, "fold_chunk", fold)
    tally, save, ctx, ready = _stream(monkeypatch, 6, chunk, True)
    assert sizes == handed and len(names) == len(handed) + -(-6 // chunk) and set(names) == {"nxgates-fold_0"}
    assert tally.sha.hexdigest() == hashlib.sha256(_reference(6).tobytes()).hexdigest()


def test_the_helper_waits_for_free_cores_before_every_row_it_was_handed():
    """Handed several rows, the helper still pauses between any two of them for a timed parallel pass."""
    tally, seen = Tally(), []

    class Watched(st.HelperPause):
        def take(self, tally, row):
            seen.append(tally.nonzero)
            super().take(tally, row)

    rows = rows_of([[1.0, 0.0], [2.0, 3.0], [0.0, 0.0]])
    st._take_when_free(tally, rows, Watched())
    assert seen == [0, 1, 3]  # asked before each row, with the rows before it taken
    assert tally.sha.hexdigest() == hashlib.sha256(rows.tobytes()).hexdigest()


def test_a_timed_out_pass_folds_its_chunk_and_stops(monkeypatch):
    """Past the deadline the wait gives up at once: the chunk is folded as it is and no later chunk starts."""
    import time

    def slow_task(task_ctx, worker):
        time.sleep(0.3)
        return run_task(task_ctx, worker)

    monkeypatch.setattr(st, "run_task", slow_task)
    late = run_ctx()
    late.remaining = lambda: 0.0
    tally, save, ctx, ready = _stream(monkeypatch, 6, 2, True, ctx=late)
    assert tally is not None and tally.waited.timed_out
    assert [r.label for r in tally.records] == ["example 0", "example 1"]
    assert len(save.written) == 1 and save.written[0].tobytes() == _reference(2).tobytes()
    assert len(ready) == 1


def test_the_serial_and_parallel_times_add_up_every_chunk(monkeypatch):
    """A clock that ticks one second a reading: each chunk's serial pass and first parallel pass take one."""
    ticks = iter(range(1000))
    monkeypatch.setattr(st, "time", SimpleNamespace(perf_counter=lambda: float(next(ticks))))
    tally, save, ctx, ready = _stream(monkeypatch, 6, 2, True)
    assert (tally.serial_seconds, tally.parallel_seconds) == (3.0, 3.0)


def test_a_pass_that_times_out_after_a_folded_chunk_stops_cleanly(monkeypatch):
    """The deadline passes in the second chunk: the first chunk's fold is done, the second is folded as it
    is, and the stream returns (no later chunk starts)."""
    import time

    late = threading.Event()

    def slow_after_the_first_chunk(task_ctx, worker):
        if task_ctx.example >= 2:
            late.set()
            time.sleep(0.3)
        return run_task(task_ctx, worker)

    monkeypatch.setattr(st, "run_task", slow_after_the_first_chunk)
    context = run_ctx()
    context.remaining = lambda: 0.0 if late.is_set() else 60.0
    compare = _file_one_cell_off(6, 3)
    tally, save, ctx, ready = _stream(monkeypatch, 6, 2, True, ctx=context, compare=compare)
    assert tally.waited.timed_out
    assert [r.label for r in tally.records][:2] == ["example 0", "example 1"] and len(save.written) == 2
    assert [first for first, _ in compare.reads] == [0, 2] and tally.file_mismatches == 1  # the stopped chunk's


@pytest.mark.parametrize("overlap", [True, False])
def test_a_compared_file_is_read_and_counted_chunk_by_chunk(monkeypatch, overlap):
    compare = _file_one_cell_off(5, 3)
    tally, save, ctx, ready = _stream(monkeypatch, 5, 2, overlap, compare=compare)
    assert compare.reads == [(0, (2, DIMS.n_params)), (2, (2, DIMS.n_params)), (4, (1, DIMS.n_params))]
    assert tally.file_mismatches == 1


def test_a_first_pass_that_times_out_stops_the_stream_though_its_re_run_completes(monkeypatch):
    """The deadline is past for one reading only, while the second chunk's first pass runs: that pass times
    out, its re-run then completes, and the stream stops there."""
    import time

    slow, passed = threading.Event(), []

    def slow_first_pass(task_ctx, worker):
        if task_ctx.example >= 2 and task_ctx.output == 0:
            slow.set()
            time.sleep(0.3)
        return run_task(task_ctx, worker)

    def remaining():
        if slow.is_set() and not passed:
            passed.append(1)
            return 0.0
        return 60.0

    monkeypatch.setattr(st, "run_task", slow_first_pass)
    context = run_ctx()
    context.remaining = remaining
    tally, save, ctx, ready = _stream(monkeypatch, 6, 2, True, ctx=context)
    assert tally.waited.timed_out and not tally.rerun_waited.timed_out
    assert [r.label for r in tally.records] == ["example 0", "example 1", "example 2", "example 3"]
