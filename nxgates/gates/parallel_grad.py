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

Arenas are per worker (reset per example), and the batch streams through in chunks of a few examples per
worker (serial rows, parallel pass, re-run, compare, fold into the counts and one sha256 in example order),
so memory grows with the worker count and NP, not with B. The re-run's tasks do the bit comparisons (the
first pass's row against the serial row, their own row against the first pass's, while it is in the cache);
rows no task compared (a lost task, rows returned by a remote worker) are compared by the gate.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from nxgates.core.memory import fmt_bytes, require
from nxgates.core.mlp import Dims, example_grads, init_examples, init_weights
from nxgates.core.pool import EXECUTORS, WorkerPool, auto_workers, check_workers, dask_available, make_pool, resolve
from nxgates.core.tape import F32, Tape
from nxgates.errors import ConfigError
from nxgates.gatekit import ChoiceParam, Fault, GateDef, GateOutput, IntParam, RunContext, Variant
from nxgates.safeio import regular_file

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

#: the gradient rows of one chunk are sized to about this many bytes: memory is flat in B, and a chunk still
#: holds a few examples per worker (tests make it tiny to force many chunks)
CHUNK_BYTES = 32 << 20
#: the same on a Dask cluster, where each chunk's pass is a round trip through the scheduler (measured about
#: 11 ms at large, against 0.4 ms to a forked worker): bigger chunks keep that a small part of the pass
REMOTE_CHUNK_BYTES = 256 << 20


def chunk_examples(n_params: int, n_workers: int, B: int, remote: bool = False) -> int:
    """Examples per chunk: about :data:`CHUNK_BYTES` (:data:`REMOTE_CHUNK_BYTES` on a cluster) of gradient
    rows, in whole rounds of the workers.

    Whole rounds keep an example's parallel run and its re-run on the same worker (tasks are dealt
    round-robin), as when the batch was one chunk.
    """
    rows = (REMOTE_CHUNK_BYTES if remote else CHUNK_BYTES) // (4 * n_params)
    return min(B, max(n_workers, rows - rows % n_workers))


@dataclass
class Job:
    """What the tasks share: the weights, and one chunk's inputs and output rows (reused chunk after chunk)."""

    dims: Dims
    w: np.ndarray
    w1_t: np.ndarray
    x: np.ndarray  #: (chunk, D): the inputs of the examples in the current chunk
    t: np.ndarray  #: (chunk, O)
    #: (chunk, NP) each: the parallel pass and its re-run. The re-run's is None where its tasks count their
    #: differences (a local pool): nothing else reads a re-run row, so each worker writes its rows into one
    #: private row of its own (:meth:`rerun_row`), still in its cache when it compares it
    outputs: list[np.ndarray | None]
    fault: str | None
    serial: np.ndarray | None = None  #: (2, chunk, NP): the serial rows (double-buffered), for a local pool
    counted: np.ndarray | None = None  #: (2, chunk): differing cells a re-run task counted (T1, T3), or -1
    remote: bool = False  #: a copy on a remote worker whose rows cannot be shared: its tasks return them
    #: a cluster's copy of the job (dask) is made once, so the inputs of later chunks are not in it: its tasks
    #: make their example's inputs from the example's index (the seed's formulas, as the serial pass does)
    inputs_by_index: bool = False
    rows_shared: bool = True  #: ``outputs`` is memory every worker maps (forked, threads, a LocalCluster)
    n_workers: int = 1  #: the pool's, for start-up to touch only the rows each worker will write
    shared_arena: Tape | None = None
    barrier: Any = None
    arenas: dict[int, Tape] = field(default_factory=dict)
    rerun_rows: dict[int, np.ndarray] = field(default_factory=dict)
    first_done: set[int] = field(default_factory=set)
    evaluations: dict[int, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __getstate__(self) -> dict:
        """What travels to a remote worker (dask): weights, inputs and faults; the output arrays only where
        they are host memory the worker maps (a path, not bytes), else its tasks return their rows; never
        this process's lock and per-worker state."""
        state = dict(self.__dict__, outputs=self.outputs if self.rows_shared else None, arenas={}, rerun_rows={},
                     first_done=set(), evaluations={}, remote=not self.rows_shared)
        del state["lock"]
        return state

    def __setstate__(self, state: dict) -> None:
        """On a remote worker: outputs of its own, where tasks write rows they then return (only the pages
        of this worker's rows are ever touched; pool start-up touches them, as for forked workers)."""
        self.__dict__.update(state, lock=threading.Lock())
        if self.outputs is None:
            self.outputs = [np.empty((self.x.shape[0], self.dims.n_params), F32) for _ in range(2)]

    def arena(self, worker: int) -> Tape:
        if self.shared_arena is not None:  # the planted defect: one arena for everybody
            return self.shared_arena
        tape = self.arenas.get(worker)
        if tape is None:
            tape = self.arenas[worker] = Tape(self.dims.arena)
        return tape

    def rerun_row(self, worker: int) -> np.ndarray:
        """The row a worker's re-run tasks write in turn (where ``outputs[1]`` is None)."""
        row = self.rerun_rows.get(worker)
        if row is None:
            row = self.rerun_rows[worker] = np.empty(self.dims.n_params, F32)
        return row

    def drift(self, b: int) -> int:
        """0 unless the nondeterministic fault is on: then example 1 drifts with each evaluation here."""
        if self.fault != "nondeterministic" or b != 1:
            return 0
        with self.lock:
            n = self.evaluations.get(b, 0)
            self.evaluations[b] = n + 1
        return n


def prepare_task(handle: int, worker: int) -> None:
    """Pool start-up on one worker: make its arena and map the output rows it will write.

    In a forked worker, shared pages are mapped on first touch, at a cost the serial pass (writing into
    memory the parent already touched) never pays; doing it here keeps the timed passes comparable. Only
    this worker's rows (tasks are dealt round-robin, chunks are whole rounds): a page touched by every
    worker is faulted in and torn down by every worker, and start-up then outlasted the first serial chunk.
    """
    job = resolve(handle)
    job.arena(worker)
    for g in job.outputs:
        if g is not None:
            g[worker :: job.n_workers, ::1024] = np.nan  # the rows dealt to this worker
    if job.outputs[1] is None:
        job.rerun_row(worker)[::1024] = np.nan


def run_task(ctx: tuple[Any, int, int, int, int], worker: int) -> np.ndarray | None:
    """Pool task: example ``b``, at ``slot`` of the current chunk, into output ``which`` (module level so it
    pickles).

    Where the worker maps the serial rows (serial buffer ``half``), a re-run task also counts the cells where
    the first pass's row differs from the serial row (T1) and its own row from the first pass's (T3, while
    its row is in the cache): the gate's helper thread then has only the digest to compute beside the serial
    pass. The first pass only computes, so its time is the pass the speedup is measured on.
    On a remote worker (a copy of the job, whose outputs are the worker's own) the row is returned instead:
    the gate's ``on_result`` stores it in the gate's array and the gate compares it.
    """
    handle, which, slot, b, half = ctx
    job = resolve(handle)
    row = job.rerun_row(worker) if job.outputs[which] is None else job.outputs[which][slot]
    if job.inputs_by_index:
        x, t = (a[0] for a in init_examples(job.dims, b, b + 1))
    else:
        x, t = job.x[slot], job.t[slot]
    between = None
    if job.barrier is not None and worker not in job.first_done:
        job.first_done.add(worker)
        between = job.barrier.wait  # make every worker's first example overlap on the shared arena
    try:
        example_grads(job.arena(worker), job.dims, job.w, x, t, row,
                      between=between, drift=job.drift(b), w1_t=job.w1_t)
    except Exception:
        if between is not None:
            job.barrier.abort()  # a task that died before the barrier must not keep the others waiting
        raise
    if job.serial is not None and which == 1:
        first = job.outputs[0][slot]
        job.counted[0, slot] = differing_cells(job.serial[half, slot], first)  # T1
        job.counted[1, slot] = differing_cells(first, row)  # T3, while the re-run's row is in the cache
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
    check_workers(choose_executor(p["executor"], dims), workers)  # forks are capped: exit 2, not a hang
    remote = p["executor"] == "dask"  # (executor=auto with --scheduler is dask too; checked again at run time)
    require(footprint_bytes(dims, workers, p["B"], remote),
            f"parallel-grad at D={p['D']} H={p['H']} O={p['O']} B={p['B']}")


def footprint_bytes(dims: Dims, workers: int, B: int, remote: bool = False) -> int:
    """Planned memory: one chunk's gradient rows (parallel, re-run, serial, a saved file's) and inputs, the
    weights, and an arena per worker plus the serial one. B enters only through the chunk size's cap, on
    every executor."""
    chunk = chunk_examples(dims.n_params, workers, B, remote)
    rows = 4 * chunk * dims.n_params + chunk * (dims.D + dims.O)
    arenas = (workers + 1) * (2 * dims.arena + dims.n_w1)
    return 4 * (rows + arenas + dims.n_params + dims.n_w1)


def run(ctx: RunContext) -> GateOutput:
    p = ctx.params
    dims = Dims(p["D"], p["H"], p["O"])
    B = p["B"]
    compare = GradReader.open(ctx.options.get("compare_grads"), B, dims.n_params)
    fault = ctx.fault
    scheduler = ctx.options.get("scheduler")
    pool = None
    try:
        pool = make_pool(choose_executor(p["executor"], dims, scheduler), p["workers"],
                         fault if fault in ("single-worker", "drop-task") else None, scheduler)
        return _run(ctx, pool, dims, B, compare)
    finally:
        if pool is not None:
            pool.close()
        if compare is not None:
            compare.close()


def choose_executor(executor: str, dims: Dims, scheduler: str | None = None) -> str:
    """``auto``: dask given a scheduler address; else processes where the per-example work amortises a
    fork, threads below that."""
    if executor != "auto":
        return executor
    if scheduler:
        return "dask"
    return "process" if dims.n_params >= AUTO_PROCESS_PARAMS else "thread"


@dataclass
class PassResult:
    records: list  #: the pool's task records of this pass, in example order
    waited: Any  #: the pool's WaitResult
    seconds: float


@dataclass
class Tally:
    """The checks' running counts, folded chunk by chunk in example order."""

    mismatches: int = 0  #: T1: cells where parallel differs from serial
    nonzero: int = 0
    bad_rows: list[tuple[int, int]] = field(default_factory=list)
    rerun_mismatches: int = 0  #: T3
    file_mismatches: int = 0  #: T4
    sha: Any = field(default_factory=hashlib.sha256)  #: over the serial rows, as one (B, NP) float32 array
    records: list = field(default_factory=list)
    records2: list = field(default_factory=list)
    waited: Any = None
    waited2: Any = None
    serial_seconds: float = 0.0
    parallel_seconds: float = 0.0

    def fold(self, first: int, serial: np.ndarray, parallel: np.ndarray, rerun: np.ndarray | None,
             saved: np.ndarray | None, counted: np.ndarray | None = None) -> None:
        """A chunk's comparisons (its serial rows went into ``sha`` and ``nonzero`` as the serial pass made
        them). ``counted``: the (2, chunk) differing cells the tasks counted, -1 where they did not (a task
        lost, rows returned from elsewhere): those rows are compared here. ``rerun`` None: the re-run's rows
        were private to its tasks, so only their counts exist; a re-run task that did not count never
        completed, and T3 fails on the pool's records."""
        t1 = count_differing(serial, parallel, None if counted is None else counted[0])
        self.mismatches += int(t1.sum())
        self.bad_rows += [(first + int(r), int(t1[r])) for r in np.flatnonzero(t1)]
        if rerun is None:
            self.rerun_mismatches += int(counted[1][counted[1] > 0].sum())
        else:
            self.rerun_mismatches += int(count_differing(parallel, rerun,
                                                         None if counted is None else counted[1]).sum())
        if saved is not None:
            self.file_mismatches += compare_bits(serial, saved, count_nonzero=False).mismatches

    def take_serial_rows(self, serial: np.ndarray) -> None:
        """Serial rows, in example order: into the digest, and into the count of non-zero cells (T1 is
        vacuous without them)."""
        self.sha.update(memoryview(serial).cast("B"))  # hashes in place, no copy; releases the GIL
        self.nonzero += int(np.count_nonzero(serial.view(np.uint32)))


def _run(ctx: RunContext, pool: WorkerPool, dims: Dims, B: int, compare: GradReader | None) -> GateOutput:
    out = GateOutput()
    NP = dims.n_params
    chunk = chunk_examples(NP, pool.n_workers, B, pool.remote)
    # a remote pool's workers on this host write their rows straight into host memory, as forked ones do
    shared_rows = not pool.remote or getattr(pool, "same_host", False)
    rows_array = pool.common_array if pool.remote and shared_rows else pool.array
    # the re-run's rows: only where the gate compares them (a cluster's tasks do not count, see run_task)
    outputs = [rows_array((chunk, NP)), rows_array((chunk, NP)) if pool.remote else None]
    job = Job(dims, pool.array((NP,)), pool.array((dims.D, dims.H)), pool.array((chunk, dims.D)),
              pool.array((chunk, dims.O)), outputs, ctx.fault, rows_shared=shared_rows, n_workers=pool.n_workers,
              inputs_by_index=pool.remote)
    if not pool.remote:  # the workers count their rows' differences from the serial rows (see run_task); a
        # dask cluster's copy of the job has no serial rows: its rows are compared by the fold
        job.serial, job.counted = pool.array((2, chunk, NP)), pool.array((2, chunk), np.int64)
    job.w[...] = init_weights(dims)
    job.w1_t[...] = job.w[: dims.n_w1].reshape(dims.H, dims.D).T
    if ctx.fault == "shared-arena":
        shared = [pool.common_array((dims.arena,)) for _ in range(2)]
        job.shared_arena = Tape(dims.arena, shared[0], shared[1])
        job.barrier = pool.barrier(min(pool.n_workers, chunk), BARRIER_SECONDS)
    job.x[...], job.t[...] = init_examples(dims, 0, chunk)  # the first chunk's (a cluster's tasks make their own)
    handle = pool.share(job)
    out.info(f"nx_ta_parallel_grad_gate (KEYSTONE: f32 ta_* autograd trains DATA-PARALLEL on the {pool.kind} pool;"
             " per-example grads bit-identical to serial)")
    # ---- pool start-up first: forked workers then do not inherit the serial pass's private arrays. The
    # workers fork here and prepare while the parent computes the first chunk's serial rows.
    start = PoolStart(pool, ctx, handle)

    save = GradWriter.create(ctx.options.get("save_grads"), B, NP)
    try:
        tally = _stream(ctx, pool, handle, job, B, chunk, compare, save, start.ready)
        if save is not None:
            save.finish()
    finally:
        if save is not None:
            save.discard()
    records, records2 = tally.records, tally.records2
    ran = sum(r.done and r.error is None for r in records)
    out.info(f" workers={pool.n_workers} pool tasks completed={ran}/{B}")
    for r in records:
        out.verbose(f"   {r.label}: worker {r.worker}, " + ("done" if r.done and not r.error else r.error or "lost"))

    t1 = BitComparison(tally.mismatches, tally.nonzero, tally.bad_rows)
    mism, nonzero = t1.mismatches, t1.nonzero
    out.info(f" bit-mismatches={mism} non-zero grad cells checked={nonzero}/{B * NP}")
    for b, n in t1.bad_rows[:8]:
        out.detail(f"   example {b}: {n} cells differ")
    out.check(T1, *judge_t1(t1, B, NP))

    distinct = pool.workers_used(records)
    pool_notes, pool_metrics = pool.health(records)
    for note in pool_notes:
        out.info(note)
    problems = _pool_problems(records, tally.waited, B, len(distinct), pool.n_workers)
    if problems and pool_notes:
        problems.append(pool_notes[0].strip())
    out.check(T2, not problems, "; ".join(problems) or
              f"{ran}/{B} tasks on {len(distinct)} distinct workers of {pool.n_workers}")

    mism2 = tally.rerun_mismatches
    problems2 = _pool_problems(records2, tally.waited2, B, None, pool.n_workers)
    out.check(T3, mism2 == 0 and not problems2,
              "; ".join(problems2) or (f"{mism2} cells differ between the two parallel runs" if mism2
                                       else "second parallel run bit-identical"))

    digest = tally.sha.hexdigest()
    if compare is not None:
        mism4 = tally.file_mismatches
        out.check(T4, mism4 == 0, f"{mism4} cells differ from {ctx.options['compare_grads']}" if mism4
                  else f"matches {ctx.options['compare_grads']} (sha256 {digest[:16]})")
    if save is not None:
        out.info(f" saved per-example gradients to {ctx.options['save_grads']} ({fmt_bytes(4 * B * NP)})")

    out.metrics = {
        "workers": pool.n_workers,
        "executor": pool.kind,
        "tasks_completed": ran,
        "distinct_workers": len(distinct),
        "bit_mismatches": mism,
        "rerun_bit_mismatches": mism2,
        "nonzero_cells": nonzero,
        "total_cells": B * NP,
        "grads_sha256": digest,
        "serial_seconds": tally.serial_seconds,
        "parallel_seconds": tally.parallel_seconds,
        "pool_start_seconds": start.seconds,
        "chunk_examples": chunk,
        "tasks_per_worker": pool.tasks_per_worker(records),
        **pool_metrics,
    }
    if pool.kind == "dask":
        out.metrics.update(scheduler=pool.scheduler, cluster_start_seconds=pool.start_seconds,
                           rows="shared memory" if job.rows_shared else "returned")
    out.digest = digest
    out.green = ("TA-PARALLEL-GRAD GREEN -- the f32 autograd trains DATA-PARALLEL on the worker pool, "
                 "per-example gradients bit-identical to serial.")
    out.red = "TA-PARALLEL-GRAD RED -- parallel training not correct (see mismatches)"
    return out


class PoolStart:
    """The workers' start-up: forked (or started) at once, waited for only before the first parallel pass."""

    def __init__(self, pool: WorkerPool, ctx: RunContext, handle: int):
        self.pool, self.ctx = pool, ctx
        t0 = time.perf_counter()
        self.target = pool.n_completed() + pool.n_workers
        for w in range(pool.n_workers):
            pool.submit(prepare_task, handle, label=f"start worker {w}", worker=w)
        pool.flush()
        self.seconds = time.perf_counter() - t0  #: starting, plus whatever of preparing the parent waits for
        self.done = False

    def ready(self) -> None:
        if not self.done:
            t0 = time.perf_counter()
            self.pool.wait(self.target, self.ctx.remaining())
            self.seconds += time.perf_counter() - t0
            self.done = True


#: fold a chunk on a helper thread while the next chunk's serial rows are computed (tests switch it off to
#: show both orders give the same tally)
OVERLAP_FOLD = True


def _stream(ctx: RunContext, pool: WorkerPool, handle: int, job: Job, B: int, chunk: int,
            compare: GradReader | None, save: GradWriter | None, pool_ready: Callable[[], None]) -> Tally:
    """The batch, chunk by chunk: serial rows, the parallel pass, its re-run, then fold into the tally.

    Every buffer is allocated once (the process pool's shared ones before its workers started) and reused.
    The serial pass keeps one core busy and leaves the workers idle, so the other core works on a helper
    thread (numpy and hashlib release the GIL): each serial row is hashed (and its non-zero cells counted) as
    soon as it is made, while the next example is computed, and a chunk's fold (the tasks' counts, rows no
    task counted, save, T4) runs during the next chunk's serial pass. The thread takes its work in order, so
    the digest is the rows' in example order. The bit comparisons themselves are done by the re-run's tasks
    (:func:`run_task`): the helper's SHA-256 alone nearly fills the serial pass.

    The SHA-256 is a chain, on one core, and about as slow as the serial pass: so a chunk's hashing may run
    on into the next chunk's serial pass (the serial rows are double-buffered for that), and it pauses while
    the workers have both cores (``cores_free``), so the parallel passes are timed alone. Joining the previous
    chunk's fold before a parallel pass (its parallel rows are about to be overwritten) also joins the hashing
    queued before it, so a serial buffer is hashed before it is written again.
    """
    dims = job.dims
    tally = Tally()
    serial = job.serial if job.serial is not None else np.empty((2, chunk, dims.n_params), F32)
    saved = np.empty((chunk, dims.n_params), F32) if compare is not None else None
    serial_tape = Tape(dims.arena)
    ctx.progress.start("examples: serial, parallel, re-run", 3 * B)
    folding: Future | None = None
    hashing: Future | None = None
    cores_free = threading.Event()  # cleared while the workers run a pass: the helper's hashing waits
    cores_free.set()
    with ThreadPoolExecutor(1, thread_name_prefix="nxgates-fold") as folder:
        try:
            for k, first in enumerate(range(0, B, chunk)):
                examples = range(first, min(B, first + chunk))
                n = len(examples)
                rows = serial[k % 2, :n]
                job.x[:n], job.t[:n] = init_examples(dims, examples.start, examples.stop)
                t0 = time.perf_counter()
                for slot, b in enumerate(examples):
                    example_grads(serial_tape, dims, job.w, job.x[slot], job.t[slot], rows[slot],
                                  drift=job.drift(b), w1_t=job.w1_t)
                    if OVERLAP_FOLD:
                        hashing = folder.submit(_take_when_free, tally, rows[slot], cores_free)
                    else:
                        tally.take_serial_rows(rows[slot])
                    ctx.progress.advance()
                    ctx.check_time()
                tally.serial_seconds += time.perf_counter() - t0
                if folding is not None:
                    folding.result()  # the previous chunk's fold (and hashing), before its rows are overwritten
                    folding = None
                pool_ready()  # the workers' start-up, before their first task of a pass
                for g in job.outputs:
                    if g is not None:  # a task that never ran cannot leave a matching row from an earlier chunk
                        g[:n, 0] = np.nan
                if job.counted is not None:
                    job.counted[:, :n] = -1  # nor its count: the fold compares what no task counted
                back = (None, None) if job.rows_shared else job.outputs  # where returned rows land
                cores_free.clear()
                first_pass = parallel_pass(ctx, pool, handle, 0, examples, k % 2, back[0])
                rerun = parallel_pass(ctx, pool, handle, 1, examples, k % 2, back[1])
                cores_free.set()
                tally.records += first_pass.records
                tally.records2 += rerun.records
                tally.waited, tally.waited2 = first_pass.waited, rerun.waited
                tally.parallel_seconds += first_pass.seconds
                if first_pass.waited.timed_out or rerun.waited.timed_out:
                    # tasks may still be writing this chunk's rows: fold it now and stop; T2/T3 report the loss
                    _fold(tally, first, rows, job, compare, saved, save)
                    break
                if OVERLAP_FOLD:
                    folding = folder.submit(_fold, tally, first, rows, job, compare, saved, save)
                else:
                    _fold(tally, first, rows, job, compare, saved, save)
            else:  # every chunk done (not after a timeout, whose stuck tasks close() terminates)
                pool.retire()  # no more tasks: the workers exit beside the last fold and hashing
            for pending in (folding, hashing):  # the last chunk's fold, or after a timeout its hashing
                if pending is not None:
                    pending.result()
        finally:
            cores_free.set()  # a paused helper must finish (or see its work cancelled) before the pool closes
            for pending in (folding, hashing):
                if pending is not None:
                    pending.cancel()
    ctx.progress.stop()
    return tally


def _take_when_free(tally: Tally, row: np.ndarray, cores_free: threading.Event) -> None:
    """Hash a serial row on the helper thread once the workers are not running a pass."""
    cores_free.wait()
    tally.take_serial_rows(row)


def _fold(tally: Tally, first: int, rows: np.ndarray, job: Job, compare: GradReader | None,
          saved: np.ndarray | None, save: GradWriter | None) -> None:
    """One chunk into the tally (and the saved file), in example order."""
    n = rows.shape[0]
    if compare is not None:
        compare.read(first, saved[:n])
    counted = None if job.counted is None else job.counted[:, :n]
    rerun = None if job.outputs[1] is None else job.outputs[1][:n]
    tally.fold(first, rows, job.outputs[0][:n], rerun, None if saved is None else saved[:n], counted)
    if save is not None:
        save.write(rows)


def parallel_pass(ctx: RunContext, pool: WorkerPool, handle: Any, which: int, examples: range, half: int,
                  rows: np.ndarray | None = None) -> PassResult:
    """One parallel pass over ``examples`` (the current chunk), into output ``which``: a task per example,
    dealt round-robin, then a bounded wait for all of them. ``half``: the serial buffer holding the chunk's
    serial rows. ``rows``: where rows that tasks return land (workers that cannot write the gate's memory),
    else None."""
    first = len(pool.records)
    done_before = pool.n_completed()
    t0 = time.perf_counter()
    for slot, b in enumerate(examples):
        pool.submit(run_task, (handle, which, slot, b, half), label=f"example {b}",
                    on_result=None if rows is None else partial(store_row, rows, slot))
    waited = _wait(ctx, pool, done_before, len(examples))
    return PassResult(pool.records[first:], waited, time.perf_counter() - t0)


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


def compare_bits(reference: np.ndarray, other: np.ndarray, rows: int = 16, count_nonzero: bool = True
                 ) -> BitComparison:
    """Raw float32 bit equality per cell: -0.0 differs from 0.0 and NaN never hides a difference (compared
    ``rows`` examples at a time, see :func:`count_differing`)."""
    per_row = count_differing(reference, other, rows=rows)
    nonzero = int(np.count_nonzero(reference.view(np.uint32))) if count_nonzero else 0
    return BitComparison(int(per_row.sum()), nonzero, [(int(r), int(per_row[r])) for r in np.flatnonzero(per_row)])


def differing_cells(reference: np.ndarray, row: np.ndarray) -> int:
    """Cells of a row whose raw float32 bits differ from the reference row's (as :func:`compare_bits`)."""
    return int(np.count_nonzero(reference.view(np.uint32) != row.view(np.uint32)))


def count_differing(reference: np.ndarray, other: np.ndarray, counted: np.ndarray | None = None, rows: int = 16
                    ) -> np.ndarray:
    """Differing cells per row. Where ``counted[r] >= 0`` the task that made row r counted them already;
    the other rows are compared here, ``rows`` at a time."""
    n = reference.shape[0]
    per_row = np.full(n, -1, np.int64) if counted is None else counted[:n].astype(np.int64)
    a, b = reference.view(np.uint32), other.view(np.uint32)
    for r0 in range(0, n, rows):
        block = per_row[r0 : r0 + rows]  # a view: filled in place
        if (block < 0).any():
            found = np.count_nonzero(a[r0 : r0 + rows] != b[r0 : r0 + rows], axis=1)
            np.copyto(block, found, where=block < 0)
    return per_row


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


class GradReader:
    """``--compare-grads``: a saved float32 (B, NP) ``.npy``, validated as a memory map and read a chunk at a
    time into a reused buffer (file reads, so its pages never pile up in this process)."""

    def __init__(self, path: str, arr: np.ndarray):
        self.path = path
        self.arr = arr
        self.fh = open(path, "rb") if arr.flags.c_contiguous else None  # noqa: SIM115 (closed by close())
        self.swapped = arr.dtype != np.dtype(F32)  #: the other byte order: swapped after reading, bits kept

    @classmethod
    def open(cls, path: str | None, B: int, n_params: int) -> GradReader | None:
        """None without a path; anything but float32 of shape (B, NP) is a usage error."""
        if path is None:
            return None
        regular_file(path, "--compare-grads")
        try:
            arr = np.load(path, mmap_mode="r", allow_pickle=False)
        except FileNotFoundError:
            raise ConfigError(f"--compare-grads {path}: no such file") from None
        except (OSError, ValueError, EOFError) as exc:
            raise ConfigError(f"--compare-grads {path}: not a readable .npy file ({exc})") from None
        if not isinstance(arr, np.ndarray):  # np.load opens a zip archive as an NpzFile
            arr.close()
            raise ConfigError(f"--compare-grads {path}: an .npz archive, not an .npy array (use --save-grads' file)")
        if arr.dtype not in (np.dtype(F32), np.dtype(F32).newbyteorder()):  # either byte order is float32
            raise ConfigError(f"--compare-grads {path}: expected float32, got {arr.dtype}")
        if arr.shape != (B, n_params):
            raise ConfigError(f"--compare-grads {path}: shape {arr.shape} does not match (B, NP) = ({B}, {n_params})")
        try:
            return cls(path, arr)
        except OSError as exc:
            raise ConfigError(f"--compare-grads {path}: cannot read: {exc.strerror or exc}") from None

    def read(self, first: int, out: np.ndarray) -> None:
        """Rows ``first .. first+len(out)-1`` into ``out``."""
        if self.fh is None:  # Fortran order: rows are not contiguous in the file
            out[...] = self.arr[first : first + out.shape[0]]  # astype-like copy: converts the byte order too
            return
        self.fh.seek(self.arr.offset + first * self.arr.shape[1] * 4)
        if self.fh.readinto(memoryview(out).cast("B")) != out.nbytes:
            raise ConfigError(f"--compare-grads {self.path}: the file shrank while it was being read")
        if self.swapped:
            out.byteswap(inplace=True)

    def close(self) -> None:
        if self.fh is not None:
            self.fh.close()
        self.arr = None


class GradWriter:
    """``--save-grads``: the ``.npy`` header for float32 (B, NP), then each chunk's rows as they come.

    Written to a temporary file beside the target and renamed at the end, so a failed run leaves no
    half-written file and a path also given to ``--compare-grads`` is read intact.
    """

    def __init__(self, path: str, fh: Any, tmp: str):
        self.path, self.fh, self.tmp = path, fh, tmp

    @classmethod
    def create(cls, path: str | None, B: int, n_params: int) -> GradWriter | None:
        if not path:
            return None
        try:
            fd, tmp = tempfile.mkstemp(prefix=".nxgates-", suffix=".npy", dir=os.path.dirname(path) or ".")
            fh = os.fdopen(fd, "wb")
            header = {"descr": np.lib.format.dtype_to_descr(np.dtype(F32)), "fortran_order": False,
                      "shape": (B, n_params)}
            np.lib.format.write_array_header_1_0(fh, header)  # what np.save writes for this array
        except OSError as exc:
            raise ConfigError(f"--save-grads {path}: cannot write: {exc.strerror or exc}") from None
        return cls(path, fh, tmp)

    def write(self, rows: np.ndarray) -> None:
        try:
            self.fh.write(memoryview(rows).cast("B"))
        except OSError as exc:
            raise ConfigError(f"--save-grads {self.path}: cannot write: {exc.strerror or exc}") from None

    def finish(self) -> None:
        try:
            self.fh.close()
            os.replace(self.tmp, self.path)
        except OSError as exc:
            raise ConfigError(f"--save-grads {self.path}: cannot write: {exc.strerror or exc}") from None
        self.tmp = None

    def discard(self) -> None:
        """After :meth:`finish` nothing; otherwise the temporary file goes."""
        if self.tmp is not None:
            self.fh.close()
            with contextlib.suppress(OSError):
                os.unlink(self.tmp)
            self.tmp = None


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
