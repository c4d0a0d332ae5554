"""The job every parallel-grad task shares (weights, a chunk's inputs and output rows) and the tasks
themselves: module level, so they pickle to forked and remote workers."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from nxgates.core.bits import differing_cells
from nxgates.core.mlp import Dims, MlpInputs, example_grads, init_examples
from nxgates.core.pool import resolve
from nxgates.core.tape import F32, Tape, tree_sum
from nxgates.gates.parallel_grad.faults import task_hooks

#: float32 cells in a 4 KiB page: writing every PAGE_FLOATS-th cell maps every page of an array
PAGE_FLOATS = 1024
#: a pass's last 1/MOVABLE_SHARE of tasks are movable: whichever worker is done with its own first runs them
MOVABLE_SHARE = 4
#: ...once every worker has at least this many tasks of its own before them, so the pass still runs on every
#: worker whatever their speeds (T2 stays a property of the deal) and a small pass is simply dealt
MIN_OWN_TASKS = 4


def first_movable(n: int, n_workers: int) -> int:
    """The first slot of a pass of ``n`` tasks whose task is movable (``n``: none is).

    The two cores of a shared machine run at speeds that differ from moment to moment, so a pass dealt evenly
    ends unevenly; the movable tail evens it out, in the workers, without waking the parent."""
    own = n - n // MOVABLE_SHARE
    return own if own >= MIN_OWN_TASKS * n_workers else n


def movable_slots(B: int, chunk: int, n_workers: int) -> list[int]:
    """The chunk slots whose task is movable in some pass of a batch of ``B`` in chunks of ``chunk``."""
    sizes = {min(chunk, B - first) for first in range(0, B, chunk)}
    return sorted({slot for n in sizes for slot in range(first_movable(n, n_workers), n)})


@dataclass
class GradJob:
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
    #: the rows any worker may write (a pool that moves movable tasks between workers): start-up touches them
    #: in every worker
    claimable_slots: list[int] = field(default_factory=list)
    arenas: dict[int, Tape] = field(default_factory=dict)
    rerun_rows: dict[int, np.ndarray] = field(default_factory=dict)
    # the planted faults' state (:mod:`.faults`): shared-arena's one arena and barrier, and which workers met
    # it; nondeterministic's evaluations per example
    shared_arena: Tape | None = None
    barrier: Any = None
    first_done: set[int] = field(default_factory=set)
    evaluations: dict[int, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    reduce: Any = tree_sum  #: every tape's sums (the gate's ``reduction``)
    given: MlpInputs | None = None  #: the batch's arrays (``--inputs``), else the seed's formulas

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
        if self.shared_arena is not None:  # the shared-arena fault: one arena for everybody
            return self.shared_arena
        tape = self.arenas.get(worker)
        if tape is None:
            tape = self.arenas[worker] = Tape(self.dims.arena, reduce=self.reduce)
        return tape

    def rerun_row(self, worker: int) -> np.ndarray:
        """The row a worker's re-run tasks write in turn (where ``outputs[1]`` is None)."""
        row = self.rerun_rows.get(worker)
        if row is None:
            row = self.rerun_rows[worker] = np.empty(self.dims.n_params, F32)
        return row


def prepare_task(handle: int, worker: int) -> None:
    """Pool start-up on one worker: make its arena, record the pass on it, and map the output rows it will
    write.

    The pass is recorded here (on the first example, into a row nobody reads) so the timed passes only
    replay it, as the serial pass does after its first example. In a forked worker, shared pages are mapped
    on first touch, at a cost the serial pass (writing into memory the parent already touched) never pays;
    doing it here keeps the timed passes comparable. Only the rows this worker may write (its own: tasks are
    dealt round-robin, chunks are whole rounds; and the movable tail's): a page touched by every worker is
    faulted in and torn down by every worker, which costs more than the first serial chunk.
    """
    job = resolve(handle)
    example_grads(job.arena(worker), job.dims, job.w, job.x[0], job.t[0], np.empty(job.dims.n_params, F32),
                  w1_t=job.w1_t)
    for g in job.outputs:
        if g is not None:
            g[worker :: job.n_workers, ::PAGE_FLOATS] = np.nan  # the rows dealt to this worker
            g[job.claimable_slots, ::PAGE_FLOATS] = np.nan  # and the rows whichever worker is free may write
    if job.outputs[1] is None:
        job.rerun_row(worker)[::PAGE_FLOATS] = np.nan


class TaskContext(NamedTuple):
    """What one pool task is told: the job's handle, the output, and which example goes where."""

    handle: Any  #: the shared :class:`GradJob`
    output: int  #: the output the row goes into: 0 the parallel pass, 1 its re-run
    slot: int  #: the example's row in the current chunk
    example: int  #: the example
    serial_buffer: int  #: the serial buffer holding the chunk's serial rows


def run_task(ctx: TaskContext, worker: int) -> np.ndarray | None:
    """Pool task: ``example``, at ``slot`` of the current chunk, into ``output`` (module level so it
    pickles).

    Where the worker maps the serial rows (``serial_buffer``), a re-run task also counts the cells where
    the first pass's row differs from the serial row (T1) and its own row from the first pass's (T3, while
    its row is in the cache): the gate's helper thread then has only the digest to compute beside the serial
    pass. The first pass only computes, so its time is the pass the speedup is measured on.
    On a remote worker (a copy of the job, whose outputs are the worker's own) the row is returned instead:
    the gate's ``on_result`` stores it in the gate's array and the gate compares it.
    """
    output, slot, b, serial_buffer = ctx.output, ctx.slot, ctx.example, ctx.serial_buffer
    job = resolve(ctx.handle)
    row = job.rerun_row(worker) if job.outputs[output] is None else job.outputs[output][slot]
    if job.inputs_by_index:
        x, t = (a[0] for a in init_examples(job.dims, b, b + 1, job.given))
    else:
        x, t = job.x[slot], job.t[slot]
    hooks = task_hooks(job, b, worker)
    try:
        example_grads(job.arena(worker), job.dims, job.w, x, t, row, hooks=hooks, w1_t=job.w1_t)
    except Exception:
        if hooks is not None and hooks.barrier is not None:
            job.barrier.abort()  # a task that died before the barrier must not keep the others waiting
        raise
    if job.serial is not None and output == 1:
        first = job.outputs[0][slot]
        job.counted[0, slot] = differing_cells(job.serial[serial_buffer, slot], first)  # T1
        job.counted[1, slot] = differing_cells(first, row)  # T3, while the re-run's row is in the cache
    return row if job.remote else None


def store_row(rows: np.ndarray, b: int, row: np.ndarray | None) -> None:
    """``on_result`` of a task: a row a remote worker returned lands in the gate's array."""
    if row is not None:
        rows[b] = row
