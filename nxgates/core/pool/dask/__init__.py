"""The ``dask`` executor: the worker pool on a real distributed engine (``distributed``), not a home-made one.

Without an address the pool starts a ``LocalCluster`` of worker *processes* (one thread each, dashboard
off, loopback only) and tears it down in :meth:`DaskWorkerPool.close`; with one it joins an existing
cluster (``dask scheduler`` / ``dask worker ADDRESS``). Workers share no memory with the gate:

* ``register`` sends the object once to every worker as a worker plugin, which registers it under its
  handle in the worker process, so a task reaches it through :func:`nxgates.core.pool.handles.resolve`. A plugin
  rather than ``scatter(broadcast=True)``: the scheduler also installs it on a worker that joins later
  (a lost worker's replacement), and its active memory manager cannot trim it down to one replica that a
  dying worker takes with it.
* a task's return value comes back and is handed to ``submit(..., on_result=...)`` in the gate's
  process: the gradient rows travel back, the output arrays never travel out.
* tasks are dealt round-robin like the local pools and pinned to their worker's address; a worker's
  queued tasks go over as one Dask task (a Dask round trip costs far more than a small task), each still
  run, counted and recorded on its own, with the address of the worker that *really* ran it.
* a lost worker's tasks are re-run by Dask elsewhere (``allow_other_workers=True``): the records show
  where, and :meth:`DaskWorkerPool.health` says which worker was lost and how many tasks moved.

The pool is this module; the cluster it may start is :mod:`.cluster`, and what runs on a worker :mod:`.remote`.
"""

from __future__ import annotations

import gc
import os
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from typing import Any

import numpy as np

from nxgates.core.cpus import auto_workers
from nxgates.core.pool.dask.cluster import (
    INSTALL_HINT,
    QUIET,
    SESSIONS,
    check_local_workers,
    close_cluster,
    distributed_module,
    local_cluster,
    session_cluster,
    silence_distributed,
    stops_deferred,
)
from nxgates.core.pool.dask.cluster import borrow_local_cluster as _borrow_local_cluster  # the name tests patch
from nxgates.core.pool.dask.remote import RegisteredObject, run_remote_batch, unpack
from nxgates.core.pool.dask_address import probe_scheduler
from nxgates.core.pool.interface import Pool, TaskRecord
from nxgates.errors import ConfigError

__all__ = ["CONNECT_SECONDS", "INSTALL_HINT", "QUIET", "SCHEDULER_ENV", "DaskWorkerPool", "close_cluster",
           "local_cluster", "session_cluster", "silence_distributed"]

CONNECT_SECONDS = 8.0  #: how long to try to reach a --scheduler address (and wait for its workers)
SCHEDULER_ENV = "NXGATES_DASK_SCHEDULER"


class DaskWorkerPool(Pool):
    """The worker pool on a Dask cluster: ``scheduler`` is its address, None a LocalCluster of our own."""

    kind = "dask"
    remote = True

    def __init__(self, n_workers: int = 0, scheduler: str | None = None):
        distributed = distributed_module()
        scheduler = scheduler or os.environ.get(SCHEDULER_ENV) or None
        self.scheduler = scheduler or "local"
        #: our own LocalCluster: every worker runs on this host and can map memory the gate maps
        self.same_host = self.scheduler == "local"
        self._cluster = None
        self._client = None
        t0 = time.perf_counter()
        try:
            self._client, addresses = self._connect(distributed, n_workers, scheduler)
        except BaseException:
            self._shutdown()
            raise
        self.start_seconds = time.perf_counter() - t0  #: cluster start-up (or connect) time
        self.addresses = addresses  #: the planned worker of task n is addresses[n mod W]
        self._seen = list(addresses)  #: every worker that ran a task; a record's worker is its index here
        self._planned: dict[int, str] = {}
        self._handles: list[str] = []  #: objects registered on the workers (one worker plugin each)
        self._batches: set[Any] = set()  #: batches in flight (a delivered one is released: its rows leave the worker)
        self._queued: dict[int, list[tuple[Callable, Any, TaskRecord, Callable | None]]] = {}
        self._queue_lock = threading.Lock()
        self._fetchers = ThreadPoolExecutor(max(1, len(addresses)), thread_name_prefix="nxgates-dask-fetch")
        super().__init__(len(addresses))

    def _connect(self, distributed: Any, n_workers: int, scheduler: str | None) -> tuple[Any, list[str]]:
        silence_distributed()
        if scheduler is None:
            n = n_workers or auto_workers()
            check_local_workers(n)
            with stops_deferred():
                if SESSIONS:  # borrowed: the session, not this pool, stops it
                    cluster = _borrow_local_cluster(n)
                else:
                    cluster = self._cluster = local_cluster(n)
            client = self._client = distributed.Client(cluster, timeout=CONNECT_SECONDS)
            client.wait_for_workers(n, timeout=60)
            return client, sorted(client.scheduler_info(n_workers=-1)["workers"])[:n]
        probe_scheduler(scheduler, CONNECT_SECONDS)
        why = None
        try:
            client = distributed.Client(scheduler, timeout=CONNECT_SECONDS)
        except Exception as exc:  # refused, unresolvable, malformed, timed out: all the user's address
            why = " ".join(str(exc).split())[:160] or type(exc).__name__
        if why is not None:
            _collect_half_made_clients()
            raise ConfigError(f"cannot reach the dask scheduler at {scheduler}: {why}")
        self._client = client
        try:
            client.wait_for_workers(n_workers or 1, timeout=CONNECT_SECONDS)
        except Exception:
            have = len(client.scheduler_info(n_workers=-1)["workers"])
            raise ConfigError(f"the dask scheduler at {scheduler} has {have} worker(s), {n_workers or 1} needed "
                              f"(waited {CONNECT_SECONDS:g} s)") from None
        addresses = sorted(client.scheduler_info(n_workers=-1)["workers"])
        return client, addresses[: n_workers or len(addresses)]

    # ---- memory: none in common with the gate's process -----------------------------------------------------

    def _make_executor(self, worker: int) -> Any:
        return None  # the cluster's workers are the executors

    def array(self, shape: tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
        """An array of the gate's own: the tasks return their rows into it through ``on_result``."""
        return np.empty(shape, dtype)

    def barrier(self, parties: int, timeout: float) -> Any:
        raise NotImplementedError("a Dask cluster's workers share no barrier with this process")

    def register(self, obj: Any) -> str:
        """Send ``obj`` to every worker once (and to any that joins later); tasks reach it through
        ``resolve(handle)``."""
        handle = f"nxgates-{uuid.uuid4().hex}"
        self._client.register_plugin(RegisteredObject(handle, obj), name=handle)
        self._handles.append(handle)
        return handle

    # ---- tasks ---------------------------------------------------------------------------------------------

    def _dispatch(self, worker: int, fn: Callable[[Any, int], Any], ctx: Any, record: TaskRecord,
                  on_result: Callable[[Any], None] | None) -> None:
        self._planned[record.task] = self.addresses[worker]
        with self._queue_lock:
            self._queued.setdefault(worker, []).append((fn, ctx, record, on_result))

    def flush(self) -> None:
        with self._queue_lock:
            queued, self._queued = self._queued, {}
        for worker, items in queued.items():
            future = self._client.submit(
                run_remote_batch, [(fn, ctx) for fn, ctx, _, _ in items], worker,
                workers=[self.addresses[worker]], allow_other_workers=True, pure=False,
                key=f"nxgates-batch-{worker}-{uuid.uuid4().hex}")
            self._batches.add(future)
            # fetched on a thread per worker, so the workers' rows travel back at the same time
            future.add_done_callback(lambda f, its=items: self._fetch(its, f))

    def _fetch(self, items: list, future: Any) -> None:
        """A batch is done: fetch its rows on a fetcher thread (none once the pool is closed: nobody waits)."""
        with suppress(RuntimeError):  # the fetchers are shut down: the run is over, the batch cancelled
            self._fetchers.submit(self._finish_batch, items, future)

    def _finish_batch(self, items: list, future: Any) -> None:
        try:
            address, packed = future.result()
            outcomes = unpack(packed)
        except BaseException as exc:  # the batch itself failed (e.g. KilledWorker) or was cancelled
            for _, _, record, _ in items:
                self._finish(record, f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}")
            return
        finally:
            self._batches.discard(future)
        if address not in self._seen:
            self._seen.append(address)
        for (_, _, record, on_result), (error, value) in zip(items, outcomes, strict=True):
            record.worker, record.address = self._seen.index(address), address
            self._deliver(record, error, lambda v=value: v, on_result)

    def health(self, records: list[TaskRecord]) -> tuple[list[str], dict[str, Any]]:
        """Workers that were planned but are gone, and the tasks Dask ran elsewhere than planned."""
        moved = [r for r in records if r.done and r.address and r.address != self._planned.get(r.task)]
        planned = {self._planned[r.task] for r in records if r.task in self._planned}
        try:
            alive = set(self._client.ncores())
        except Exception:
            alive = set()
        lost = sorted(planned - alive)
        lines = []
        if lost:
            lines.append(f" dask: {len(lost)} worker(s) lost ({', '.join(lost)}); {len(moved)} task(s) re-run on "
                         "other workers")
        elif moved:
            lines.append(f" dask: {len(moved)} task(s) moved off their planned worker by the scheduler")
        return lines, {"workers_lost": lost, "tasks_rerun": len(moved)}

    def close(self) -> None:
        """Cancel what is left, forget the registered objects on the workers, stop a LocalCluster; never raises."""
        self._shutdown()

    def _shutdown(self) -> None:
        if getattr(self, "_fetchers", None) is not None:
            self._fetchers.shutdown(wait=False, cancel_futures=True)
        client, cluster = self._client, self._cluster
        self._client = self._cluster = None
        if client is not None:
            with suppress(Exception):  # a dead or unreachable cluster: there is nothing left to clean
                client.cancel(list(getattr(self, "_batches", ())))
            for handle in getattr(self, "_handles", []) if cluster is None else ():
                with suppress(Exception):  # a cluster that outlives the run forgets what it was sent
                    client.unregister_worker_plugin(handle)
            with suppress(Exception):
                client.close(timeout=5)
        if cluster is not None:
            close_cluster(cluster)


def _collect_half_made_clients() -> None:
    """Collect now what a failed ``Client(...)`` left behind: the half-made client, its loop started, is garbage
    in a cycle with the error's frames, and its ``__del__`` closes it. Collected later at an arbitrary point,
    that can be inside another client's start, which holds distributed's loop lock that the close then waits
    on for ever (a hang seen in the test suite: an unreachable address, then a good one, in one process).
    Called outside the ``except`` block, so the error and its frames are no longer referenced."""
    gc.collect()
