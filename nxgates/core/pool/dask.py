"""The ``dask`` executor: the worker pool on a real distributed engine (``distributed``), not a home-made one.

Without an address the pool starts a ``LocalCluster`` of worker *processes* (one thread each, dashboard
off, loopback only) and tears it down in :meth:`DaskWorkerPool.close`; with one it joins an existing
cluster (``dask scheduler`` / ``dask worker ADDRESS``). Workers share no memory with the gate:

* ``share`` sends the object once to every worker as a worker plugin, which registers it under its
  handle in the worker process, so a task reaches it through :func:`nxgates.core.pool.shared.resolve`. A plugin
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
"""

from __future__ import annotations

import gc
import logging
import os
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from typing import Any

import numpy as np

from nxgates.core.cpus import auto_workers
from nxgates.core.pool.dask_address import probe_scheduler
from nxgates.core.pool.dask_scratch import make_scratch, remove_scratch
from nxgates.core.pool.forked import PROCESS_WORKERS_PER_CPU, max_process_workers
from nxgates.core.pool.local import WorkerPool
from nxgates.core.pool.shared import TaskRecord, forget, register
from nxgates.errors import ConfigError, Terminated

try:  # this module is imported only for executor=dask; without the extra the pool says what to install
    from distributed.diagnostics.plugin import WorkerPlugin
except ImportError:
    WorkerPlugin = object

CONNECT_SECONDS = 8.0  #: how long to try to reach a --scheduler address (and wait for its workers)
SCHEDULER_ENV = "NXGATES_DASK_SCHEDULER"
QUIET = logging.CRITICAL + 1  #: above every level distributed logs at
INSTALL_HINT = "executor=dask needs the optional 'dask' extra: pip install 'nxgates[dask]'"


def _distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise ConfigError(INSTALL_HINT) from None
    return distributed


def local_cluster(n_workers: int) -> Any:
    """A LocalCluster of ``n_workers`` single-threaded worker processes on 127.0.0.1, dashboard off.

    The scheduler's remaining HTTP endpoints (health checks) listen on a free loopback port rather than
    on 8787, so clusters of concurrent runs never collide.
    """
    distributed = _distributed()
    import dask.config

    scratch = make_scratch()  # the workers' scratch space, removed by close_cluster (dask_scratch.py)
    # Dask's default MALLOC_TRIM_THRESHOLD_ freezes glibc's mmap threshold, so every large numpy temporary
    # of the tape is a fresh mmap and page faults (measured: 128 examples at large took 0.9-1.1 s instead of
    # 0.1-0.25 s). Unset it for our workers.
    settings = {"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None, "temporary-directory": scratch}
    try:
        with dask.config.set(settings):
            cluster = distributed.LocalCluster(
                n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=None,
                host="127.0.0.1", silence_logs=QUIET, local_directory=scratch,
                scheduler_kwargs={"dashboard": False, "dashboard_address": "127.0.0.1:0"})
    except BaseException:
        remove_scratch(scratch)
        raise
    cluster.nxgates_scratch = scratch
    return cluster


def close_cluster(cluster: Any) -> None:
    """Stop a LocalCluster of :func:`local_cluster` and remove its scratch space; raises nothing but a stop
    signal that arrived meanwhile, once both are done."""
    with _stops_deferred():
        with suppress(Exception):
            cluster.close(timeout=10)
        remove_scratch(getattr(cluster, "nxgates_scratch", None))


def silence_distributed() -> None:
    """``distributed`` logs a stopped run's cancelled futures and closed connections as errors with
    tracebacks; what matters of them the pool reports itself (a lost worker, a failed task)."""
    logging.getLogger("distributed").setLevel(QUIET)


def check_local_workers(n_workers: int) -> None:
    """A LocalCluster's workers are processes like forked ones: the same cap, a usage error (exit 2) before
    any starts. (A cluster at a scheduler address brings its own workers: no cap.)"""
    if n_workers > (cap := max_process_workers()):
        raise ConfigError(f"workers={n_workers} is more than the dask executor starts on this machine (at most "
                          f"{cap}: {PROCESS_WORKERS_PER_CPU} per usable CPU, within the memory budget); use fewer "
                          "workers or a cluster at --scheduler ADDRESS")


@contextmanager
def _stops_deferred() -> Iterator[None]:
    """Ctrl-C, SIGTERM or SIGHUP while a LocalCluster starts or stops is raised once that is done, so the
    cluster is closed rather than left half-started or half-closed (its worker processes, semaphores and
    scratch space orphaned). Python runs signal handlers in the main thread only: elsewhere, nothing to do."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    names = [name for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)]
    previous = {}
    for name in names:
        number = getattr(signal, name)
        if signal.getsignal(number) not in (signal.SIG_IGN, None):  # an ignored signal stays ignored
            previous[number] = signal.signal(number, lambda signum, _frame: caught.append(signum))
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    if caught:
        raise KeyboardInterrupt if caught[0] == signal.SIGINT else Terminated(caught[0])


_SESSIONS: list[dict[str, Any]] = []  #: open shared_local_cluster() sessions, innermost last


@contextmanager
def shared_local_cluster() -> Iterator[None]:
    """Inside: pools without an address share one LocalCluster (started on first use, stopped on exit)
    instead of each starting its own, so ``nxgates selftest`` pays for one cluster, not one per run."""
    session: dict[str, Any] = {"cluster": None, "workers": 0}
    _SESSIONS.append(session)
    try:
        yield
    finally:
        _SESSIONS.remove(session)
        if session["cluster"] is not None:
            close_cluster(session["cluster"])


def _borrow_local_cluster(n_workers: int) -> Any:
    session = _SESSIONS[-1]
    if session["workers"] != n_workers:
        if session["cluster"] is not None:
            close_cluster(session["cluster"])
        session["cluster"], session["workers"] = None, 0
        session["cluster"], session["workers"] = local_cluster(n_workers), n_workers
    return session["cluster"]


class DaskWorkerPool(WorkerPool):
    """The worker pool on a Dask cluster: ``scheduler`` is its address, None a LocalCluster of our own."""

    kind = "dask"
    remote = True

    def __init__(self, n_workers: int = 0, scheduler: str | None = None):
        distributed = _distributed()
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
        self._handles: list[str] = []  #: objects shared with the workers (one worker plugin each)
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
            with _stops_deferred():
                if _SESSIONS:  # borrowed: the session, not this pool, stops it
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

    # ---- memory: nothing is shared with the gate's process -------------------------------------------------

    def _make_executor(self, worker: int) -> Any:
        return None  # the cluster's workers are the executors

    def barrier(self, parties: int, timeout: float) -> Any:
        raise NotImplementedError("a Dask cluster's workers share no barrier with this process")

    def share(self, obj: Any) -> str:
        """Send ``obj`` to every worker once (and to any that joins later); tasks reach it through
        ``resolve(handle)``."""
        handle = f"nxgates-{uuid.uuid4().hex}"
        self._client.register_plugin(_SharedObject(handle, obj), name=handle)
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
                _run_remote_batch, [(fn, ctx) for fn, ctx, _, _ in items], worker,
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
            outcomes = _unpack(packed)
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
        """Cancel what is left, forget the shared objects on the workers, stop a LocalCluster; never raises."""
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


def _run_remote_batch(tasks: list[tuple[Callable[[Any, int], Any], Any]],
                      worker: int) -> tuple[str, list[tuple[str | None, Any]]]:
    """On a Dask worker: run the tasks; (this worker's address, (error text or None, value) per task)."""
    from distributed import get_worker

    outcomes: list[tuple[str | None, Any]] = []
    for fn, ctx in tasks:
        try:
            outcomes.append((None, fn(ctx, worker)))
        except Exception as exc:  # as text: an exception need not unpickle in the gate's process
            outcomes.append((f"{type(exc).__name__}: {exc}", None))
    return get_worker().address, _pack(outcomes)


def _pack(outcomes: list[tuple[str | None, Any]]) -> Any:
    """Equal-shape array results travel as one block (one frame on the wire, not one per task)."""
    values = [v for _, v in outcomes]
    if all(e is None for e, _ in outcomes) and values and all(isinstance(v, np.ndarray) for v in values) and len(
            {(v.shape, v.dtype.str) for v in values}) == 1:
        return np.stack(values)
    return outcomes


def _unpack(packed: Any) -> list[tuple[str | None, Any]]:
    if isinstance(packed, np.ndarray):
        return [(None, row) for row in packed]
    return packed


class _SharedObject(WorkerPlugin):
    """A shared object in transit: on each worker, registered under its handle for :func:`resolve`."""

    def __init__(self, handle: str, obj: Any):
        self.handle, self.obj = handle, obj

    def setup(self, worker: Any) -> None:
        register(self.obj, self.handle)

    def teardown(self, worker: Any) -> None:
        forget(self.handle)
