"""Worker pools behind one interface (:class:`Pool`, :mod:`.interface`): threads (:mod:`.local`), forked
processes (:mod:`.forked`) or a Dask cluster (:mod:`.dask`, imported only for that executor, so
``distributed`` is never loaded otherwise). :func:`make_pool` builds one; :func:`choose_executor` decides which.

"Shared" here means memory that processes map in common (:meth:`Pool.array`, :mod:`.shm`); an object a task
reaches by handle is registered (:mod:`.handles`), and movable tasks a worker may take are claimable.
"""

from __future__ import annotations

from nxgates.core.cpus import EXECUTORS, AutoExecutor, auto_workers, choose_executor
from nxgates.core.pool.forked import ProcessWorkerPool, check_workers, max_process_workers
from nxgates.core.pool.handles import resolve
from nxgates.core.pool.interface import Pool, TaskRecord, WaitResult
from nxgates.core.pool.local import ThreadWorkerPool

__all__ = ["EXECUTORS", "AutoExecutor", "Pool", "ProcessWorkerPool", "TaskRecord", "ThreadWorkerPool", "WaitResult",
           "auto_workers", "check_workers", "choose_executor", "dask_available", "make_pool",
           "max_process_workers", "resolve"]


def dask_available() -> bool:
    """``distributed`` (the ``dask`` extra) is installed; found without importing it."""
    import importlib.util

    return importlib.util.find_spec("distributed") is not None


def make_pool(kind: str, n_workers: int = 0, extend: type | None = None, scheduler: str | None = None) -> Pool:
    """A pool of ``kind``; ``scheduler`` (dask only) is an existing cluster's address, None = a LocalCluster.

    ``extend``: a class whose methods override the pool's (e.g. :meth:`Pool.worker_for`, :meth:`Pool.accepts`),
    put in front of the executor's pool class, so one override serves every kind.

    First the ``/dev/shm`` files of runs killed before they could remove them are reclaimed (:mod:`.shm`):
    every run with a pool is a next run of one that was killed.
    """
    from nxgates.core.pool.shm import reclaim_stale

    reclaim_stale()
    if kind == "dask":
        from nxgates.core.pool.dask import DaskWorkerPool  # distributed is imported only for this executor

        return _extended(DaskWorkerPool, extend)(n_workers, scheduler)
    choose_executor(kind, scheduler)  # refuses an address given to another executor
    if kind == "thread":
        return _extended(ThreadWorkerPool, extend)(n_workers)
    if kind == "process":
        return _extended(ProcessWorkerPool, extend)(n_workers)
    raise ValueError(f"unknown executor {kind!r} (choose from {', '.join(EXECUTORS)})")


def _extended(pool_class: type[Pool], extend: type | None) -> type[Pool]:
    if extend is None:
        return pool_class
    return type(f"{extend.__name__}{pool_class.__name__}", (extend, pool_class), {})
