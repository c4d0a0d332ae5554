"""A LocalCluster of our own: started quiet, on loopback, in nxgates' scratch space; closed whatever signal
arrives meanwhile; and lent to every pool of a session (:func:`session_cluster`) instead of one each."""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

from nxgates.core.pool.dask_scratch import make_scratch, remove_scratch
from nxgates.core.pool.forked.limits import PROCESS_WORKERS_PER_CPU, max_process_workers
from nxgates.errors import ConfigError, Terminated

QUIET = logging.CRITICAL + 1  #: above every level distributed logs at
INSTALL_HINT = "executor=dask needs the optional 'dask' extra: pip install 'nxgates[dask]'"


def distributed_module() -> Any:
    """``distributed``, imported now; a usage error naming the extra without it."""
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
    distributed = distributed_module()
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
    with stops_deferred():
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
def stops_deferred() -> Iterator[None]:
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


SESSIONS: list[dict[str, Any]] = []  #: open session_cluster() sessions, innermost last


@contextmanager
def session_cluster() -> Iterator[None]:
    """Inside: pools without an address borrow one LocalCluster (started on first use, stopped on exit)
    instead of each starting its own, so ``nxgates selftest`` pays for one cluster, not one per run."""
    session: dict[str, Any] = {"cluster": None, "workers": 0}
    SESSIONS.append(session)
    try:
        yield
    finally:
        SESSIONS.remove(session)
        if session["cluster"] is not None:
            close_cluster(session["cluster"])


def borrow_local_cluster(n_workers: int) -> Any:
    """The innermost session's LocalCluster of ``n_workers``, started (or restarted at that size) now if need be."""
    session = SESSIONS[-1]
    if session["workers"] != n_workers:
        if session["cluster"] is not None:
            close_cluster(session["cluster"])
        session["cluster"], session["workers"] = None, 0
        session["cluster"], session["workers"] = local_cluster(n_workers), n_workers
    return session["cluster"]
