"""The fast gradcheck's cells dealt over a worker pool (forked processes, threads or a Dask cluster).

Every cell is independent of the others, so any split gives the integers of one process; A splits by
columns and B by rows (both values of k). A pool pays only from a size up (:func:`gradcheck_workers`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import NamedTuple

import numpy as np

import nxgates.core.lora.fast as fast
from nxgates.core.lora.model import Forward, Model
from nxgates.core.pacing import Pacer

#: ``workers=0`` (auto) forks a pool only from this much work (measured as 2 x cells x T x DM) up. A pool's
#: start and close cost 0.02-0.04 s on 2 cores, while the fast gradcheck at xl, the largest preset
#: (T*DM^2*R = 2^29, its loss near int64's limit), takes about 0.03 s in one process: every preset stays in
#: one process. At 2^31 (T=2048 at DM=256 R=8) two workers are about as fast as one (0.9x-1.2x,
#: benchmarks/bench.py)
AUTO_POOL_WORK = 1 << 31


def gradcheck_workers(requested: int, T: int, DM: int, R: int) -> int:
    """How many processes the fast gradcheck uses: ``requested``, or for 0 the usable CPUs where it pays."""
    if requested:
        return requested
    if 2 * DM * R * T * DM < AUTO_POOL_WORK:
        return 1
    from nxgates.core.cpus import auto_workers  # not the pool: validation runs at every start-up

    return auto_workers()


@dataclass(eq=False, repr=False)
class CellsJob:
    """What the pool's workers share: the model, its forward, and the two result arrays they fill."""

    m: Model
    f: Forward
    delta: int
    out_a: np.ndarray  #: shared (DM, R)
    out_b: np.ndarray  #: shared (R, DM)
    shifts: tuple[np.ndarray, ...] | None = None  #: :func:`.fast.x_shifts`, made once rather than in every worker
    remote: bool = False  #: a copy on a Dask worker: its tasks return the cells they filled

    def __getstate__(self) -> dict:
        """What travels to a Dask worker: all of it (small next to the work), marked as a copy."""
        return dict(self.__dict__, remote=True)



class CellsTask(NamedTuple):
    """One task's share of the cells: the values ``first..stop-1`` of k, of the job shared as ``handle``."""

    handle: int
    first: int
    stop: int


def _cells_a_task(task: CellsTask, worker: int) -> np.ndarray | None:
    from nxgates.core.pool import resolve

    job = resolve(task.handle)
    fast.cells_a(job.m, job.f, job.delta, range(task.first, task.stop), job.out_a, lambda n: None, job.shifts)
    return job.out_a[:, task.first : task.stop] if job.remote else None


def _cells_b_task(task: CellsTask, worker: int) -> np.ndarray | None:
    from nxgates.core.pool import resolve

    job = resolve(task.handle)
    fast.cells_b(job.m, job.f, job.delta, range(task.first, task.stop), job.out_b)
    return job.out_b[task.first : task.stop] if job.remote else None



def _store_cells(out: np.ndarray, cells: np.ndarray | None) -> None:
    """``on_result`` of a task on a Dask worker: the cells it filled land in the gate's array (a view)."""
    out[...] = cells


def _split(n: int, parts: int) -> list[range]:
    """``range(n)`` in ``parts`` contiguous, near-equal, non-empty pieces (fewer when n < parts)."""
    bounds = [n * p // parts for p in range(parts + 1)]
    return [range(a, b) for a, b in zip(bounds, bounds[1:], strict=False) if b > a]


def diffs_fast_pooled(m: Model, f: Forward, delta: int, pace: Pacer, workers: int, executor: str = "process",
                      scheduler: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The fast gradcheck with A's columns and B's rows (both values of k) dealt over ``workers`` forked
    processes, writing into shared memory, or over a Dask cluster's workers, whose tasks return their cells:
    the same integers as :func:`.fast.diffs_fast_a` / :func:`.fast.diffs_fast_b` (cells are independent). With R below
    the worker count, some workers get no A or B cells.

    A task that fails (an overflow refusal, say) makes this fall back to the in-process path, which then
    raises exactly what a single process would.
    """
    from nxgates.core.pool import make_pool

    DM, R = m.A.shape
    pool = make_pool(executor, workers, None, scheduler)
    try:
        job = CellsJob(m, f, delta, pool.array((DM, R), np.int64), pool.array((R, DM), np.int64),
                       fast.x_shifts(m, delta))
        for out in (job.out_a, job.out_b):  # a cell no task delivered cannot pass by accident
            out[...] = np.iinfo(np.int64).min
        handle = pool.register(job)
        for columns in _split(R, pool.n_workers):
            pool.submit(_cells_a_task, CellsTask(handle, columns.start, columns.stop),
                        label=f"A columns {columns.start}..{columns.stop - 1}",
                        on_result=partial(_store_cells, job.out_a[:, columns.start : columns.stop]) if pool.remote
                        else None)
        for rows in _split(R, pool.n_workers):
            pool.submit(_cells_b_task, CellsTask(handle, rows.start, rows.stop),
                        label=f"B rows {rows.start}..{rows.stop - 1}",
                        on_result=partial(_store_cells, job.out_b[rows.start : rows.stop]) if pool.remote else None)
        n_tasks = pool.n_submitted
        while True:
            left = pace.remaining()
            waited = pool.wait(n_tasks, 0.2 if left is None else max(0.0, min(0.2, left)))
            pace.check_time()
            if not waited.timed_out:
                break
        if waited.reached:
            pace.advance(2 * DM * R)  # only here: the fallback below counts the cells itself
            return job.out_a.copy(), job.out_b.copy()
    finally:
        pool.close()
    return fast.diffs_fast_a(m, f, delta, pace), fast.diffs_fast_b(m, f, delta, pace)
