"""What a parallel-grad run reports, line by line: the seed's lines, each check's detail, the metrics and
fingerprints, the saved and compared files, and a pool whose workers cannot write the gate's memory."""

import pickle

import numpy as np
import pytest

from nxgates.core import chunks
from nxgates.core.memory import fmt_bytes
from nxgates.core.mlp import Dims
from nxgates.core.pool.local import ThreadWorkerPool
from nxgates.gatekit import Check, Line, RunContext
from nxgates.gates import parallel_grad as pg
from nxgates.gates.parallel_grad import gate
from nxgates.gates.parallel_grad.host_memory import HostFiles
from tests.helpers import ctx, record_made

SEED = {"D": 8, "H": 16, "O": 4, "B": 8, "workers": 2, "executor": "thread", "reduction": "tree"}
#: the seed's per-example gradients (tests/gates/parallel_grad/test_pinned_digests.py pins the same)
SEED_SHA = "3814f0647e698ab85f962a8cd3131eb7945b24dbeaa63924daabc93b0117ae71"
TIMINGS = ("serial_seconds", "parallel_seconds", "pool_start_seconds")


def lines(out):
    return [(i.text, i.level) if isinstance(i, Line) else (i.name, i.passed, i.detail) for i in out.items]


def test_a_green_run_reports_the_seed_lines_checks_metrics_and_fingerprints():
    out = pg.run(ctx(SEED))
    assert lines(out) == [
        ("nx_ta_parallel_grad_gate (KEYSTONE: f32 ta_* autograd trains DATA-PARALLEL on the thread pool;"
         " per-example grads bit-identical to serial)", "info"),
        (" workers=2 pool tasks completed=8/8", "info"),
        *[(f"   example {b}: worker {b % 2}, done", "verbose") for b in range(8)],
        (" bit-mismatches=0 non-zero grad cells checked=1191/1536", "info"),
        (pg.T1, True, "8 examples x 192 cells, 1191 non-zero"),
        (pg.T2, True, "8/8 tasks on 2 distinct workers of 2"),
        (pg.T3, True, "second parallel run bit-identical"),
    ]
    m = out.metrics
    assert {k: v for k, v in m.items() if k not in TIMINGS} == {
        "workers": 2, "executor": "thread", "tasks_completed": 8, "distinct_workers": 2, "bit_mismatches": 0,
        "rerun_bit_mismatches": 0, "nonzero_cells": 1191, "total_cells": 1536, "grads_sha256": SEED_SHA,
        "chunk_examples": 8, "tasks_per_worker": {"0": 4, "1": 4}}
    assert all(isinstance(m[k], float) and m[k] >= 0 for k in TIMINGS)
    assert list(m)[:11] == ["workers", "executor", "tasks_completed", "distinct_workers", "bit_mismatches",
                            "rerun_bit_mismatches", "nonzero_cells", "total_cells", "grads_sha256",
                            "serial_seconds", "parallel_seconds"]
    assert out.digest == SEED_SHA
    assert out.fingerprints == {"grads_sha256": SEED_SHA, "nonzero_cells": 1191, "total_cells": 1536,
                                "bit_mismatches": 0, "rerun_bit_mismatches": 0}
    assert out.green == ("TA-PARALLEL-GRAD GREEN -- the f32 autograd trains DATA-PARALLEL on the worker pool, "
                         "per-example gradients bit-identical to serial.")
    assert out.red == "TA-PARALLEL-GRAD RED -- parallel training not correct (see mismatches)"


def test_the_sequential_reduction_is_passed_to_the_tapes():
    tree = pg.run(ctx(SEED)).digest
    sequential = pg.run(ctx({**SEED, "reduction": "sequential", "H": 40})).digest
    assert sequential != pg.run(ctx({**SEED, "H": 40})).digest and tree == SEED_SHA


def test_save_then_compare_reports_the_file_and_t4(tmp_path):
    path = tmp_path / "g.npy"
    saved = pg.run(ctx(SEED, save_grads=str(path)))
    assert lines(saved)[-1] == (f" saved per-example gradients to {path} ({fmt_bytes(4 * 8 * 192)})", "info")
    assert np.load(path).shape == (8, 192)
    out = pg.run(ctx(SEED, compare_grads=str(path), ulp=2))
    (t4,) = [c for c in out.checks if c.name == pg.T4]
    assert t4 == Check(pg.T4, True, f"matches {path} (sha256 {SEED_SHA[:16]}), BIT-IDENTICAL", t4.seconds)
    assert out.metrics["compare_grads"]["ulp"] == 2 and "compare_grads" not in saved.metrics
    plain = pg.run(ctx(SEED, compare_grads=str(path)))
    assert plain.metrics["compare_grads"]["ulp"] == 0


def test_a_compared_file_one_ulp_off_fails_t4_with_the_bound(tmp_path):
    path = tmp_path / "g.npy"
    pg.run(ctx(SEED, save_grads=str(path)))
    grads = np.load(path)
    grads[3, 7] = np.nextafter(grads[3, 7], np.float32(np.inf))
    np.save(path, grads)
    out = pg.run(ctx(SEED, compare_grads=str(path), ulp=0))
    (t4,) = [c for c in out.checks if c.name == pg.T4]
    assert (t4.passed, t4.detail) == (False, f"1 cells differ from {path}, largest 1 ULP")
    out = pg.run(ctx(SEED, compare_grads=str(path), ulp=1))
    (t4,) = [c for c in out.checks if c.name == pg.T4]
    assert (t4.passed, t4.detail) == (True, f"within 1 ULP (1 cells differ from {path}, worst 1 ULP)")


def test_a_dropped_task_fails_t2_naming_it_and_is_listed_as_lost():
    out = pg.run(ctx(SEED, fault="drop-task"))
    text = lines(out)
    assert (" workers=2 pool tasks completed=7/8", "info") in text
    assert ("   example 1: worker 1, lost", "verbose") in text
    (t2,) = [c for c in out.checks if c.name == pg.T2]
    assert (t2.passed, t2.detail) == (False, "1 task(s) never completed (the pool went idle): example 1")
    assert out.metrics["tasks_completed"] == 7


def test_one_worker_for_everything_fails_t2():
    out = pg.run(ctx(SEED, fault="single-worker"))
    (t2,) = [c for c in out.checks if c.name == pg.T2]
    assert (t2.passed, t2.detail) == (False, "all tasks ran on 1 worker of 2")
    assert out.metrics["distinct_workers"] == 1 and out.metrics["tasks_per_worker"] == {"0": 8}
    assert by_name(out) == {pg.T1: True, pg.T2: False, pg.T3: True}


def by_name(out):
    return {c.name: c.passed for c in out.checks}


def test_a_drifting_example_fails_t3_with_its_cells():
    out = pg.run(ctx(SEED, fault="nondeterministic"))
    (t3,) = [c for c in out.checks if c.name == pg.T3]
    n = out.metrics["rerun_bit_mismatches"]
    assert n > 0 and (t3.passed, t3.detail) == (False, f"{n} cells differ between the two parallel runs")
    assert by_name(out)[pg.T1] is False  # the serial pass drifted too
    (t1,) = [c for c in out.checks if c.name == pg.T1]
    mism = out.metrics["bit_mismatches"]
    assert t1.detail == f"{mism} mismatching cells"
    assert (f"   example 1: {mism} cells differ", "detail") in lines(out)
    assert out.fingerprints["bit_mismatches"] == mism and out.fingerprints["rerun_bit_mismatches"] == n


def test_a_shared_arena_fails_t1():
    out = pg.run(ctx(SEED, fault="shared-arena"))
    assert by_name(out)[pg.T1] is False and out.metrics["bit_mismatches"] > 0


def _raising_task(task_ctx, worker):
    raise RuntimeError(f"task {task_ctx.example} broke")


def test_tasks_that_raise_are_named_in_t2_t3_and_the_verbose_lines(monkeypatch):
    from nxgates.gates.parallel_grad import stream

    monkeypatch.setattr(stream, "run_task", _raising_task)
    out = pg.run(ctx(SEED))
    text = lines(out)
    assert (" workers=2 pool tasks completed=0/8", "info") in text
    verbose = [t for t, level in (x for x in text if len(x) == 2) if level == "verbose"]
    assert verbose[0].startswith("   example 0: worker 0, ") and "task 0 broke" in verbose[0]
    (t2,) = [c for c in out.checks if c.name == pg.T2]
    (t3,) = [c for c in out.checks if c.name == pg.T3]
    assert t2.passed is False and t2.detail.startswith("example 0 raised ") and "task 0 broke" in t2.detail
    assert t3.passed is False and t3.detail.startswith("example 0 raised ")


class SameHostRemote(ThreadWorkerPool):
    """A pool whose tasks run where the gate's memory is not (as a cluster's), its workers on this host."""

    remote, kind, same_host = True, "dask", True
    scheduler, start_seconds = "tcp://127.0.0.1:1", 0.25

    def register(self, obj):
        """The tasks get a copy made now, as a cluster's workers do."""
        return super().register(pickle.loads(pickle.dumps(obj)))


class OtherHostRemote(SameHostRemote):
    same_host = False


@pytest.mark.parametrize("pool_class, rows", [(SameHostRemote, "shared memory"), (OtherHostRemote, "returned")])
def test_a_remote_pool_gets_the_same_bits_and_reports_the_cluster(monkeypatch, pool_class, rows):
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 1)  # a local pool's chunk: one round of workers
    host = HostFiles()
    pool = pool_class(2)
    try:
        out = gate._run(ctx(SEED), pool, host, Dims(8, 16, 4), 8, None)
        made = list(host.paths)
    finally:
        pool.close()
        host.remove()
    assert by_name(out) == {pg.T1: True, pg.T2: True, pg.T3: True}
    assert out.digest == SEED_SHA
    assert (out.metrics["scheduler"], out.metrics["cluster_start_seconds"], out.metrics["rows"]) == (
        "tcp://127.0.0.1:1", 0.25, rows)
    assert out.metrics["executor"] == "dask" and out.metrics["chunk_examples"] == 8  # a cluster's chunk size
    assert len(made) == (2 if pool_class is SameHostRemote else 0)  # the two passes' rows, in host memory


class NotingPool(ThreadWorkerPool):
    """A pool with something to say about its health, whose tasks all land on worker 0 when told to."""

    one_worker = False

    def worker_for(self, task):
        return 0 if self.one_worker else super().worker_for(task)

    def health(self, records):
        return ["  workers restarted: 1  ", " second note"], {"restarts": 1}


@pytest.mark.parametrize("one_worker", [False, True])
def test_the_pools_notes_are_shown_and_the_first_explains_a_t2_failure(one_worker):
    pool = NotingPool(2)
    pool.one_worker = one_worker
    host = HostFiles()
    try:
        out = gate._run(ctx(SEED), pool, host, Dims(8, 16, 4), 8, None)
    finally:
        pool.close()
        host.remove()
    text = lines(out)
    assert ("  workers restarted: 1  ", "info") in text and (" second note", "info") in text
    assert out.metrics["restarts"] == 1
    (t2,) = [c for c in out.checks if c.name == pg.T2]
    if one_worker:
        assert (t2.passed, t2.detail) == (False, "all tasks ran on 1 worker of 2; workers restarted: 1")
    else:
        assert (t2.passed, t2.detail) == (True, "8/8 tasks on 2 distinct workers of 2")


class CountingPool(ThreadWorkerPool):
    """A local pool that records the shared arrays the gate makes."""

    def __init__(self, n_workers):
        super().__init__(n_workers)
        self.made = []

    def array(self, shape, dtype=np.float32):
        self.made.append((shape, np.dtype(dtype).name))
        return super().array(shape, dtype)


def test_a_local_pool_holds_one_chunk_of_rows_the_inputs_and_the_serial_rows_once(monkeypatch):
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 1)
    pool = CountingPool(2)
    host = HostFiles()
    try:
        out = gate._run(ctx({**SEED, "B": 5}), pool, host, Dims(8, 16, 4), 5, None)
        made = list(host.paths)
    finally:
        pool.close()
        host.remove()
    assert out.metrics["chunk_examples"] == 2 and out.metrics["total_cells"] == 5 * 192
    assert made == []
    assert pool.made == [((2, 192), "float32"), ((192,), "float32"), ((8, 16), "float32"), ((2, 8), "float32"),
                         ((2, 4), "float32"), ((2, 2, 192), "float32"), ((2, 2), "int64")]


def _given(B, seed=7):
    rng = np.random.default_rng(seed)
    f32 = np.float32
    return {"W1": rng.standard_normal((16, 8)).astype(f32), "W2": rng.standard_normal((4, 16)).astype(f32),
            "X": rng.standard_normal((B, 8)).astype(f32), "T": rng.standard_normal((B, 4)).astype(f32)}


def test_given_inputs_are_what_the_gradients_are_of():
    from nxgates.core.mlp import MlpInputs, example_grads
    from nxgates.core.tape import Tape

    arrays = _given(8)
    out = pg.run(ctx(SEED, inputs=arrays))
    given = MlpInputs.of({"inputs": arrays})
    rows = np.empty((8, 192), np.float32)
    w = np.concatenate([arrays["W1"].reshape(-1), arrays["W2"].reshape(-1)])
    for b in range(8):
        example_grads(Tape(Dims(8, 16, 4).arena), Dims(8, 16, 4), w, given.X[b], given.T[b], rows[b])
    import hashlib

    assert out.digest == hashlib.sha256(rows.tobytes()).hexdigest() != SEED_SHA
    assert all(c.passed for c in out.checks)


@pytest.mark.parametrize("pool_class", [SameHostRemote, OtherHostRemote])
def test_a_remote_pool_makes_each_chunks_inputs_from_the_example_index(monkeypatch, pool_class):
    """A cluster's copy of the job holds only the first chunk's inputs: its tasks make their own."""
    monkeypatch.setattr(chunks, "REMOTE_CHUNK_BYTES", 1)
    host = HostFiles()
    pool = pool_class(2)
    try:
        out = gate._run(ctx(SEED), pool, host, Dims(8, 16, 4), 8, None)
    finally:
        pool.close()
        host.remove()
    assert out.metrics["chunk_examples"] == 2 and out.digest == SEED_SHA
    assert by_name(out) == {pg.T1: True, pg.T2: True, pg.T3: True}


def _tasks_by(monkeypatch, change):
    """Every pool task through ``change(real, task, worker)`` (the thread pool runs them in this process)."""
    from nxgates.gates.parallel_grad import stream

    real = stream.run_task
    monkeypatch.setattr(stream, "run_task", lambda task, worker: change(real, task, worker))


def test_t3_names_every_re_run_task_that_raised(monkeypatch):
    def raising(real, task, worker):
        if task.output == 1 and task.example in (1, 3):
            raise ValueError(f"no re-run of {task.example}")
        return real(task, worker)

    _tasks_by(monkeypatch, raising)
    out = pg.run(ctx(SEED))
    t3 = out.checks[2]
    assert not t3.passed
    assert t3.detail == "example 1 raised ValueError: no re-run of 1; example 3 raised ValueError: no re-run of 3"


def test_t3_names_a_re_run_task_that_never_completed_before_the_deadline(monkeypatch):
    """The deadline passes while a re-run task is stuck, once the other worker's re-run tasks are done: the
    moment comes from the tasks themselves, not from a guess at how long the run takes."""
    import threading
    import time

    release, others_done = threading.Event(), threading.Event()
    done = set()
    run_ctx = RunContext(params=dict(SEED), deadline=time.monotonic() + 60)

    def stuck(real, task, worker):
        if task.output == 1 and task.example == 2:
            others_done.wait(30)
            run_ctx.deadline = time.monotonic()  # passes now, with this task still running
            release.wait(30)
        result = real(task, worker)
        if task.output == 1 and task.example % 2:
            done.add(task.example)
            if done == {1, 3, 5, 7}:
                others_done.set()
        return result

    _tasks_by(monkeypatch, stuck)
    try:
        out = pg.run(run_ctx)
    finally:
        release.set()
    # the stuck worker's own later examples (dealt round-robin) wait behind it
    assert out.checks[2].detail == "3 task(s) never completed (timed out waiting): example 2, example 4, example 6"


def test_t1_lists_at_most_eight_differing_examples(monkeypatch):
    from nxgates.core.pool.handles import resolve

    def off_by_one_cell(real, task, worker):
        result = real(task, worker)
        if task.output == 0:
            resolve(task.handle).outputs[0][task.slot, 0] += 1
        return result

    _tasks_by(monkeypatch, off_by_one_cell)
    out = pg.run(ctx({**SEED, "B": 12}))
    differing = [item[0] for item in lines(out) if item[1:] == ("detail",) and item[0].startswith("   example ")]
    assert not out.checks[0].passed and len(differing) == 8


def test_every_worker_starts_by_recording_its_pass(monkeypatch):
    """The start-up task on each worker records the pass (so the timed passes only replay): it must succeed."""
    made = record_made(monkeypatch, gate, "make_pool")
    pg.run(ctx(SEED))
    starts = [r for r in made[0].records if r.label.startswith("start worker")]
    assert [(r.label, r.done, r.error) for r in starts] == [("start worker 0", True, None),
                                                            ("start worker 1", True, None)]
