"""The batch streamed chunk by chunk: serial rows, the parallel pass, its re-run, each chunk folded into a
running :class:`Tally` in example order, so memory grows with the worker count and NP, not with B."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from nxgates.core.bits import count_differing
from nxgates.core.gradfiles import GradReader, GradWriter
from nxgates.core.mlp import example_grads, init_examples
from nxgates.core.pool import Pool
from nxgates.core.tape import F32, Tape
from nxgates.gatekit import RunContext
from nxgates.gates.parallel_grad.faults import serial_hooks
from nxgates.gates.parallel_grad.job import (
    PAGE_FLOATS,
    GradJob,
    TaskContext,
    first_movable,
    prepare_task,
    run_task,
    store_row,
)


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
    records: list = field(default_factory=list)  #: the parallel pass's tasks (T2)
    rerun_records: list = field(default_factory=list)  #: its re-run's tasks (T3)
    waited: Any = None
    rerun_waited: Any = None
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
            self.file_mismatches += int(count_differing(serial, saved).sum())

    def take_serial_rows(self, serial: np.ndarray) -> None:
        """Serial rows, in example order: into the digest, and into the count of non-zero cells (T1 is
        vacuous without them)."""
        self.sha.update(serial)  # hashes in place, no copy; releases the GIL
        self.nonzero += int(np.count_nonzero(serial.view(np.uint32)))


class PoolStart:
    """The workers' start-up: forked (or started) at once, waited for only before the first parallel pass."""

    def __init__(self, pool: Pool, ctx: RunContext, handle: int):
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
#: serial rows handed to the helper thread at a time: a hand-over costs the serial pass a little, and the
#: helper still pauses between any two rows for a timed parallel pass
HAND_OVER_ROWS = 8


def stream(ctx: RunContext, pool: Pool, handle: int, job: GradJob, B: int, chunk: int,
            compare: GradReader | None, save: GradWriter | None, pool_ready: Callable[[], None]) -> Tally:
    """The batch, chunk by chunk: serial rows, the parallel pass, its re-run, then fold into the tally.

    Every buffer is allocated once (the process pool's shared ones before its workers started) and reused. The
    serial pass keeps one core busy and leaves the workers idle, so the other core works on a helper thread
    (numpy and hashlib release the GIL): each serial row is hashed (and its non-zero cells counted) while the
    next examples are computed (rows are handed over :data:`HAND_OVER_ROWS` at a time), and a chunk's fold
    (the tasks' counts, rows no task counted, save, T4) runs during the next chunk's serial pass. The thread
    takes its work in order, so the digest is the rows' in example order. The bit comparisons themselves are
    done by the re-run's tasks (:func:`run_task`): the helper's SHA-256 alone more than fills the serial pass.

    The SHA-256 is a chain, on one core, and slower than the serial pass: so a chunk's hashing may run on
    into the re-run and the next chunk's serial pass (the serial rows are double-buffered for that), and it
    pauses while the workers run the timed parallel pass (:class:`HelperPause`), so that pass is timed alone.
    Joining the previous chunk's fold before a parallel pass (its parallel rows are about to be overwritten)
    also joins the hashing queued before it, so a serial buffer is hashed before it is written again.
    """
    dims = job.dims
    tally = Tally()
    serial = job.serial if job.serial is not None else np.empty((2, chunk, dims.n_params), F32)
    # every page of the serial rows mapped now, while the workers start: the timed serial pass writes into
    # memory that is already there, as the workers' timed pass does (prepare_task) and as the floor does
    used = serial[: min(2, -(-B // chunk))]  # (a batch of one chunk never uses the second buffer)
    used.reshape(-1)[::PAGE_FLOATS] = 0
    saved = np.empty((chunk, dims.n_params), F32) if compare is not None else None
    serial_tape = Tape(dims.arena, reduce=job.reduce)
    ctx.progress.start("examples: serial, parallel, re-run", 3 * B)
    folding: Future | None = None
    hashing: Future | None = None
    helper_pause = HelperPause()  # held while the workers run the timed pass: the helper's hashing waits
    with ThreadPoolExecutor(1, thread_name_prefix="nxgates-fold") as folder:
        try:
            for k, first in enumerate(range(0, B, chunk)):
                examples = range(first, min(B, first + chunk))
                n = len(examples)
                rows = serial[k % 2, :n]
                job.x[:n], job.t[:n] = init_examples(dims, examples.start, examples.stop, job.given)
                t0 = time.perf_counter()
                handed = 0  # serial rows of this chunk handed to the helper so far
                for slot, b in enumerate(examples):
                    example_grads(serial_tape, dims, job.w, job.x[slot], job.t[slot], rows[slot],
                                  hooks=serial_hooks(job, b), w1_t=job.w1_t)
                    if not OVERLAP_FOLD:
                        tally.take_serial_rows(rows[slot])
                    elif slot + 1 - handed == HAND_OVER_ROWS or slot + 1 == n:
                        hashing = folder.submit(_take_when_free, tally, rows[handed : slot + 1], helper_pause)
                        handed = slot + 1
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
                helper_pause.hold()
                first_pass = parallel_pass(ctx, pool, handle, 0, examples, k % 2, back[0])
                helper_pause.release()  # the re-run is not timed: the helper hashes beside it
                rerun = parallel_pass(ctx, pool, handle, 1, examples, k % 2, back[1])
                tally.records += first_pass.records
                tally.rerun_records += rerun.records
                tally.waited, tally.rerun_waited = first_pass.waited, rerun.waited
                tally.parallel_seconds += first_pass.seconds
                if first_pass.waited.timed_out or rerun.waited.timed_out:
                    # tasks may still be writing this chunk's rows: fold it now and stop; T2/T3 report the loss
                    fold_chunk(tally, first, rows, job, compare, saved, save)
                    break
                if OVERLAP_FOLD:
                    folding = folder.submit(fold_chunk, tally, first, rows, job, compare, saved, save)
                else:
                    fold_chunk(tally, first, rows, job, compare, saved, save)
            else:  # every chunk done (not after a timeout, whose stuck tasks close() terminates)
                pool.retire()  # no more tasks: the workers exit beside the last fold and hashing
            for pending in (folding, hashing):  # the last chunk's fold, or after a timeout its hashing
                if pending is not None:
                    pending.result()
        finally:
            helper_pause.release()  # a paused helper must finish (or see its work cancelled) before the pool closes
            for pending in (folding, hashing):
                if pending is not None:
                    pending.cancel()
    ctx.progress.stop()
    return tally


class HelperPause:
    """Keeps the helper thread's hashing off the cores while the workers run the timed parallel pass.

    :meth:`hold` returns once the row the helper may be hashing is done: a worker woken while the helper still
    ran on the other core was put beside its sibling on one core, and the idle core waited for the load
    balancer (measured: up to 10 ms of a 9 ms pass). The helper takes each row only while not held."""

    def __init__(self) -> None:
        self._free = threading.Event()
        self._free.set()
        self._row = threading.Lock()  #: held by the helper while it hashes a row

    def hold(self) -> None:
        self._free.clear()
        with self._row:  # the row under way, if any, is done; the next waits for release()
            pass

    def release(self) -> None:
        self._free.set()

    def take(self, tally: Tally, row: np.ndarray) -> None:
        """On the helper thread: hash ``row`` once not held."""
        while True:
            self._free.wait()
            with self._row:
                if self._free.is_set():  # not held between the wait and the lock
                    tally.take_serial_rows(row)
                    return


def _take_when_free(tally: Tally, rows: np.ndarray, pause: HelperPause) -> None:
    """Hash serial rows on the helper thread, each once the workers are not running the timed pass."""
    for row in rows:
        pause.take(tally, row)


def fold_chunk(tally: Tally, first: int, rows: np.ndarray, job: GradJob, compare: GradReader | None,
          saved: np.ndarray | None, save: GradWriter | None) -> None:
    """One chunk into the tally (and the saved file), in example order."""
    n = rows.shape[0]
    if compare is not None:
        compare.read(first, saved[:n])
        if compare.report is not None:
            compare.report.add(first, rows, saved[:n])
    counted = None if job.counted is None else job.counted[:, :n]
    rerun = None if job.outputs[1] is None else job.outputs[1][:n]
    tally.fold(first, rows, job.outputs[0][:n], rerun, None if saved is None else saved[:n], counted)
    if save is not None:
        save.write(rows)


def parallel_pass(ctx: RunContext, pool: Pool, handle: Any, output: int, examples: range, serial_buffer: int,
                  rows: np.ndarray | None = None) -> PassResult:
    """One parallel pass over ``examples`` (the current chunk), into ``output``: a task per example,
    dealt round-robin, the last quarter movable (:func:`~.job.first_movable`), then a bounded wait for all
    of them. ``serial_buffer``: the one holding the chunk's serial rows. ``rows``: where rows that tasks
    return land (workers that cannot write the gate's memory), else None."""
    first = len(pool.records)
    done_before = pool.n_completed()
    movable = first_movable(len(examples), pool.n_workers)
    t0 = time.perf_counter()
    for slot, b in enumerate(examples):
        pool.submit(run_task, TaskContext(handle, output, slot, b, serial_buffer), label=f"example {b}",
                    on_result=None if rows is None else partial(store_row, rows, slot), movable=slot >= movable)
    waited = wait_pass(ctx, pool, done_before, len(examples))
    return PassResult(pool.records[first:], waited, time.perf_counter() - t0)


def wait_pass(ctx: RunContext, pool: Pool, done_before: int, B: int):
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
