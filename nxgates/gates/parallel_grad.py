"""Data-parallel per-example gradients, bit-identical to serial: the seed ``nx_ta_parallel_grad_gate.nx``.

An MLP ``x -> W1 (H x D) -> relu -> W2 (O x H) -> mse(target)`` is differentiated per example on a
private f32 tape, first serially, then as B tasks on a worker pool. Because every kernel has a fixed
reduction order (:mod:`nxgates.core.tape`), any race, arena collision or shared state shows up as a
flipped bit.

* T1 parallel per-example gradients == serial, raw float32 bits, and the comparison is not vacuous
  (more non-zero cells than one example has).
* T2 the pool completed all B tasks *and* they ran on more than one distinct worker.
* T3 a parallel re-run on the same arenas is bit-identical.
* T4 (with ``--compare-grads``) bit-identical to a saved ``.npy``: reproducibility across machines.

Arenas are per worker (reset per example), so memory grows with the worker count, not with B.
"""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from nxgates.core.memory import fmt_bytes, require
from nxgates.core.mlp import Dims, example_grads, init_data
from nxgates.core.pool import EXECUTORS, WorkerPool, auto_workers, dask_available, make_pool, resolve
from nxgates.core.tape import F32, Tape
from nxgates.errors import ConfigError
from nxgates.gatekit import ChoiceParam, Fault, GateDef, GateOutput, IntParam, RunContext, Variant

#: Measured on 2 cores (make bench): threads hold the GIL between numpy calls and gain nothing at any size
#: here; forked processes reach 1.6x at NP = 34k and 1.8x at NP = 203k, but cost a fork at start.
AUTO_PROCESS_PARAMS = 16384

PARAMS = {
    "D": IntParam("input width", min=1, max=1 << 20),
    "H": IntParam("hidden width", min=1, max=1 << 20),
    "O": IntParam("output width", min=1, max=1 << 20),
    "B": IntParam("examples in the batch (one pool task each)", min=2, max=1 << 20),
    "workers": IntParam("pool workers; 0 = usable CPUs, at least 2", min=0, max=1024),
    "executor": ChoiceParam("worker pool: thread, process (forked, sharing memory), dask (a LocalCluster, or "
                            "--scheduler ADDRESS), or auto (process from "
                            f"NP >= {AUTO_PROCESS_PARAMS} up, where it pays)", ("auto", *EXECUTORS)),
}

T1 = "T1 parallel grads BIT-IDENTICAL to serial (all B examples)"
T2 = "T2 pool ran all B tasks on >1 worker"
T3 = "T3 deterministic (re-run parallel identical)"
T4 = "T4 grads BIT-IDENTICAL to the saved file"

FAULTS = {
    "shared-arena": Fault("every task uses one shared tape/arena; a barrier forces the tasks to overlap", (T1,)),
    "single-worker": Fault("the pool deals every task to worker 0", (T2,)),
    "nondeterministic": Fault("example 1's hidden layer drifts with the number of times it has been computed",
                              (T3,)),
    "drop-task": Fault("the pool accepts one task and never runs it", (T2,)),
}
BARRIER_SECONDS = 10.0


# ---- the job: everything a task needs, shared with the workers through the pool ------------------------


@dataclass
class Job:
    dims: Dims
    w: np.ndarray
    x: np.ndarray
    t: np.ndarray
    outputs: list[np.ndarray]
    fault: str | None
    remote: bool = False  #: a copy on a remote worker: its tasks return their rows
    w1_t: np.ndarray | None = None
    shared_arena: Tape | None = None
    barrier: Any = None
    arenas: dict[int, Tape] = field(default_factory=dict)
    first_done: set[int] = field(default_factory=set)
    evaluations: dict[int, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __getstate__(self) -> dict:
        """What travels to a remote worker (dask): weights, inputs and faults, never the output arrays
        (its tasks return their rows instead) nor this process's lock and per-worker state."""
        state = dict(self.__dict__, outputs=None, arenas={}, first_done=set(), evaluations={}, remote=True)
        del state["lock"]
        return state

    def __setstate__(self, state: dict) -> None:
        """On a remote worker: outputs of its own, where tasks write rows they then return (only the pages
        of this worker's rows are ever touched; pool start-up touches them, as for forked workers)."""
        self.__dict__.update(state, lock=threading.Lock())
        self.outputs = [np.empty((self.x.shape[0], self.dims.n_params), F32) for _ in range(2)]

    def arena(self, worker: int) -> Tape:
        if self.shared_arena is not None:  # the planted defect: one arena for everybody
            return self.shared_arena
        tape = self.arenas.get(worker)
        if tape is None:
            tape = self.arenas[worker] = Tape(self.dims.arena)
        return tape

    def drift(self, b: int) -> int:
        """0 unless the nondeterministic fault is on: then example 1 drifts with each evaluation here."""
        if self.fault != "nondeterministic" or b != 1:
            return 0
        with self.lock:
            n = self.evaluations.get(b, 0)
            self.evaluations[b] = n + 1
        return n


def prepare_task(ctx: tuple[int, list[int]], worker: int) -> None:
    """Pool start-up on one worker: make its arena and map the output rows it will write.

    In a forked worker, shared pages are mapped on first touch, at a cost the serial pass (writing into
    memory the parent already touched) never pays; doing it here keeps the timed passes comparable.
    """
    handle, rows = ctx
    job = resolve(handle)
    job.arena(worker)
    for g in job.outputs:
        g[rows, ::1024] = np.nan


def run_task(ctx: tuple[int, int, int], worker: int) -> np.ndarray | None:
    """Pool task: example ``b`` of the shared job into output ``which`` (module level so it pickles).

    On a remote worker (a copy of the job, whose outputs are the worker's own) the row is also returned:
    the gate's ``on_result`` stores it in the gate's array.
    """
    handle, which, b = ctx
    job = resolve(handle)
    row = job.outputs[which][b]
    between = None
    if job.barrier is not None and worker not in job.first_done:
        job.first_done.add(worker)
        between = job.barrier.wait  # make every worker's first example overlap on the shared arena
    try:
        example_grads(job.arena(worker), job.dims, job.w, job.x[b], job.t[b], row,
                      between=between, drift=job.drift(b), w1_t=job.w1_t)
    except Exception:
        if between is not None:
            job.barrier.abort()  # a task that died before the barrier must not keep the others waiting
        raise
    return row if job.remote else None


def store_row(rows: np.ndarray, b: int, row: np.ndarray | None) -> None:
    """``on_result`` of a task: a row a remote worker returned lands in the gate's array."""
    if row is not None:
        rows[b] = row


# ---- the gate ------------------------------------------------------------------------------------------


def validate(p: dict) -> None:
    if p["workers"] == 1:
        raise ConfigError("workers=1 cannot show parallelism (T2 needs >1 worker); use 0 (auto) or >= 2")
    dims = Dims(p["D"], p["H"], p["O"])
    workers = p["workers"] or auto_workers()
    # grads: serial, parallel, re-run (+ a loaded file); arenas: one per worker plus the serial one
    grads = 4 * p["B"] * dims.n_params
    arenas = (workers + 1) * 2 * dims.arena + (workers + 1) * dims.n_w1
    nbytes = 4 * (grads + arenas + p["B"] * (dims.D + dims.O) + dims.n_params)
    require(nbytes, f"parallel-grad at D={p['D']} H={p['H']} O={p['O']} B={p['B']}")


def run(ctx: RunContext) -> GateOutput:
    p = ctx.params
    dims = Dims(p["D"], p["H"], p["O"])
    B = p["B"]
    compare = load_compare(ctx.options.get("compare_grads"), B, dims.n_params)
    fault = ctx.fault
    scheduler = ctx.options.get("scheduler")
    pool = make_pool(choose_executor(p["executor"], dims, scheduler), p["workers"],
                     fault if fault in ("single-worker", "drop-task") else None, scheduler)
    try:
        return _run(ctx, pool, dims, B, compare)
    finally:
        pool.close()


def choose_executor(executor: str, dims: Dims, scheduler: str | None = None) -> str:
    """``auto``: dask given a scheduler address; else processes where the per-example work amortises a
    fork, threads below that."""
    if executor != "auto":
        return executor
    if scheduler:
        return "dask"
    return "process" if dims.n_params >= AUTO_PROCESS_PARAMS else "thread"


def _run(ctx: RunContext, pool: WorkerPool, dims: Dims, B: int, compare: np.ndarray | None) -> GateOutput:
    out = GateOutput()
    w, x, t = init_data(dims, B)
    job = Job(dims, pool.array(w.shape), pool.array(x.shape), pool.array(t.shape),
              [pool.array((B, dims.n_params)) for _ in range(2)], ctx.fault)
    job.w[...], job.x[...], job.t[...] = w, x, t
    job.w1_t = pool.array((dims.D, dims.H))
    job.w1_t[...] = w[: dims.n_w1].reshape(dims.H, dims.D).T
    for g in job.outputs:
        g.fill(np.nan)  # an example that never ran cannot match by accident (and the pages are touched)
    if ctx.fault == "shared-arena":
        shared = [pool.common_array((dims.arena,)) for _ in range(2)]
        job.shared_arena = Tape(dims.arena, shared[0], shared[1])
        job.barrier = pool.barrier(min(pool.n_workers, B), BARRIER_SECONDS)
    handle = pool.share(job)
    out.info("nx_ta_parallel_grad_gate (KEYSTONE: f32 ta_* autograd trains DATA-PARALLEL on the thread pool;"
             " per-example grads bit-identical to serial)")
    # ---- pool start-up first: forked workers then do not inherit the serial pass's private arrays
    t0 = time.perf_counter()
    first = pool.n_submitted + pool.n_workers
    for w in range(pool.n_workers):
        rows = [b for b in range(B) for k in (first + b, first + B + b) if pool.worker_for(k) == w]
        pool.submit(prepare_task, (handle, sorted(set(rows))), label=f"start worker {w}", worker=w)
    pool.wait(pool.n_completed() + pool.n_workers, ctx.remaining())
    pool_start_seconds = time.perf_counter() - t0

    # ---- serial: every example on one private arena, in order
    g_ser = np.full((B, dims.n_params), np.nan, F32)
    serial_tape = Tape(dims.arena)
    ctx.progress.start("serial examples", B)
    t0 = time.perf_counter()
    for b in range(B):
        example_grads(serial_tape, dims, job.w, job.x[b], job.t[b], g_ser[b], drift=job.drift(b),
                      w1_t=job.w1_t)
        ctx.progress.advance()
        ctx.check_time()
    serial_seconds = time.perf_counter() - t0

    # ---- the parallel pass, then the re-run on the same arenas
    passes = []
    for which, label in ((0, "parallel examples"), (1, "re-run examples")):
        ctx.progress.start(label, B)
        passes.append(_parallel_pass(ctx, pool, handle, which, B, job.outputs[which]))
    (records, waited, parallel_seconds), (records2, waited2, _) = passes
    g_par, g_par2 = job.outputs
    ran = sum(r.done and r.error is None for r in records)
    out.info(f" workers={pool.n_workers} pool tasks completed={ran}/{B}")
    for r in records:
        out.verbose(f"   {r.label}: worker {r.worker}, " + ("done" if r.done and not r.error else r.error or "lost"))

    t1 = compare_bits(g_ser, g_par)
    mism, nonzero = t1.mismatches, t1.nonzero
    out.info(f" bit-mismatches={mism} non-zero grad cells checked={nonzero}/{B * dims.n_params}")
    for b, n in t1.bad_rows[:8]:
        out.detail(f"   example {b}: {n} cells differ")
    out.check(T1, *judge_t1(t1, B, dims.n_params))

    distinct = pool.workers_used(records)
    pool_notes, pool_metrics = pool.health(records)
    for note in pool_notes:
        out.info(note)
    problems = _pool_problems(records, waited, B, len(distinct), pool.n_workers)
    if problems and pool_notes:
        problems.append(pool_notes[0].strip())
    out.check(T2, not problems, "; ".join(problems) or
              f"{ran}/{B} tasks on {len(distinct)} distinct workers of {pool.n_workers}")

    mism2 = compare_bits(g_par, g_par2).mismatches
    problems2 = _pool_problems(records2, waited2, B, None, pool.n_workers)
    out.check(T3, mism2 == 0 and not problems2,
              "; ".join(problems2) or (f"{mism2} cells differ between the two parallel runs" if mism2
                                       else "second parallel run bit-identical"))

    digest = hashlib.sha256(memoryview(g_ser).cast("B")).hexdigest()  # hashes in place, no copy
    if compare is not None:
        mism4 = compare_bits(g_ser, compare).mismatches
        out.check(T4, mism4 == 0, f"{mism4} cells differ from {ctx.options['compare_grads']}" if mism4
                  else f"matches {ctx.options['compare_grads']} (sha256 {digest[:16]})")
    if ctx.options.get("save_grads"):
        save_grads(ctx.options["save_grads"], g_ser)
        out.info(f" saved per-example gradients to {ctx.options['save_grads']} ({fmt_bytes(g_ser.nbytes)})")

    out.metrics = {
        "workers": pool.n_workers,
        "executor": pool.kind,
        "tasks_completed": ran,
        "distinct_workers": len(distinct),
        "bit_mismatches": mism,
        "rerun_bit_mismatches": mism2,
        "nonzero_cells": nonzero,
        "total_cells": B * dims.n_params,
        "grads_sha256": digest,
        "serial_seconds": serial_seconds,
        "parallel_seconds": parallel_seconds,
        "pool_start_seconds": pool_start_seconds,
        "tasks_per_worker": pool.tasks_per_worker(records),
        **pool_metrics,
    }
    if pool.kind == "dask":
        out.metrics.update(scheduler=pool.scheduler, cluster_start_seconds=pool.start_seconds)
    out.digest = digest
    out.green = ("TA-PARALLEL-GRAD GREEN -- the f32 autograd trains DATA-PARALLEL on the worker pool, "
                 "per-example gradients bit-identical to serial.")
    out.red = "TA-PARALLEL-GRAD RED -- parallel training not correct (see mismatches)"
    return out


def _parallel_pass(ctx: RunContext, pool: WorkerPool, handle: Any, which: int, B: int, rows: np.ndarray):
    first = len(pool.records)
    done_before = pool.n_completed()
    t0 = time.perf_counter()
    for b in range(B):
        pool.submit(run_task, (handle, which, b), label=f"example {b}", on_result=partial(store_row, rows, b))
    waited = _wait(ctx, pool, done_before, B)
    return pool.records[first:], waited, time.perf_counter() - t0


def _wait(ctx: RunContext, pool: WorkerPool, done_before: int, B: int):
    """Wait in slices so the progress bar moves and the deadline is honoured."""
    shown = 0
    while True:
        left = ctx.remaining()
        result = pool.wait(done_before + B, 0.2 if left is None else max(0.0, min(0.2, left)))
        done = pool.n_completed() - done_before
        ctx.progress.advance(done - shown)
        shown = done
        if result.reached or not result.timed_out or (left is not None and left <= 0.2):
            return result


@dataclass
class BitComparison:
    mismatches: int  #: cells whose float32 bits differ
    nonzero: int  #: cells of the reference whose raw bits are not 0 (as the seed counts them)
    bad_rows: list[tuple[int, int]]  #: (example, differing cells)


def judge_t1(cmp: BitComparison, B: int, n_params: int) -> tuple[bool, str]:
    """T1: no bit differs, and the comparison is not vacuous (more non-zero cells than one example has)."""
    if cmp.mismatches:
        return False, f"{cmp.mismatches} mismatching cells"
    if cmp.nonzero <= n_params:
        return False, f"vacuous: only {cmp.nonzero} non-zero cells"
    return True, f"{B} examples x {n_params} cells, {cmp.nonzero} non-zero"


def compare_bits(reference: np.ndarray, other: np.ndarray, rows: int = 16) -> BitComparison:
    """Raw float32 bit equality per cell: -0.0 differs from 0.0 and NaN never hides a difference.

    Works ``rows`` examples at a time so the temporaries stay small at any B.
    """
    a, b = reference.view(np.uint32), other.view(np.uint32)
    per_row = np.zeros(a.shape[0], dtype=np.int64)
    nonzero = 0
    for r0 in range(0, a.shape[0], rows):
        per_row[r0 : r0 + rows] = np.count_nonzero(a[r0 : r0 + rows] != b[r0 : r0 + rows], axis=1)
        nonzero += int(np.count_nonzero(a[r0 : r0 + rows]))
    return BitComparison(int(per_row.sum()), nonzero, [(int(r), int(per_row[r])) for r in np.flatnonzero(per_row)])


def _pool_problems(records, waited, B, distinct, n_workers) -> list[str]:
    problems = []
    failed = [r for r in records if r.error]
    lost = [r for r in records if not r.done]
    problems += [f"{r.label} raised {r.error}" for r in failed[:3]]
    if lost:
        why = "timed out waiting" if waited.timed_out else "the pool went idle"
        problems.append(f"{len(lost)} task(s) never completed ({why}): {', '.join(r.label for r in lost[:5])}")
    if distinct is not None and distinct <= 1:
        problems.append(f"all tasks ran on {distinct} worker of {n_workers}")
    return problems


def load_compare(path: str | None, B: int, n_params: int) -> np.ndarray | None:
    """A saved gradient file: float32, shape (B, NP); anything else is a usage error."""
    if path is None:
        return None
    try:
        arr = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise ConfigError(f"--compare-grads {path}: no such file") from None
    except (OSError, ValueError, EOFError) as exc:
        raise ConfigError(f"--compare-grads {path}: not a readable .npy file ({exc})") from None
    if not isinstance(arr, np.ndarray) or arr.dtype != F32:
        raise ConfigError(f"--compare-grads {path}: expected float32, got {getattr(arr, 'dtype', type(arr))}")
    if arr.shape != (B, n_params):
        raise ConfigError(f"--compare-grads {path}: shape {arr.shape} does not match (B, NP) = ({B}, {n_params})")
    return arr


def save_grads(path: str, grads: np.ndarray) -> None:
    try:
        with open(path, "wb") as fh:
            np.save(fh, grads, allow_pickle=False)
    except OSError as exc:
        raise ConfigError(f"--save-grads {path}: cannot write: {exc.strerror or exc}") from None


def selftest_variants() -> tuple[Variant, ...]:
    """With the dask extra installed, the selftest proves the gate and every fault on Dask too (one shared
    LocalCluster of 2 workers for those runs)."""
    if not dask_available():
        return ()

    def one_cluster():
        from nxgates.core.dask_pool import shared_local_cluster

        return shared_local_cluster()

    return (Variant("dask", {"executor": "dask", "workers": 2}, one_cluster),)


GATE = GateDef(
    params=PARAMS,
    checks=(T1, T2, T3, T4),
    run=run,
    faults=FAULTS,
    validate=validate,
    options=("save_grads", "compare_grads", "scheduler"),
    selftest_variants=selftest_variants,
)
