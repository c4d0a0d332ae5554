"""Which executors a pool may be, which one a run gets, and how many workers "auto" means: importable
without the pool (a gate's parameters and validation are read at every start-up)."""

from __future__ import annotations

import os
from typing import NamedTuple

from nxgates.errors import ConfigError

EXECUTORS = ("thread", "process", "dask")


def auto_workers() -> int:
    """Usable CPUs (affinity-aware), at least 2 so the parallel path is always exercised."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 2
    return max(2, n)


class AutoExecutor(NamedTuple):
    """What ``executor=auto`` means for one gate, declared once in its module: ``dask`` given a scheduler
    address, else ``process`` once the work per task reaches ``process_from`` (0: always), else ``below``."""

    process_from: int = 0
    below: str = "thread"


def choose_executor(requested: str, scheduler: str | None = None, auto: AutoExecutor | None = None,
                    work: int = 0) -> str:
    """The one executor decision, for every gate.

    ``requested`` is the ``executor`` parameter (``auto`` or one of :data:`EXECUTORS`), ``scheduler`` a
    ``--scheduler`` address or None, ``auto`` what ``auto`` means for the gate (required when ``requested``
    may be ``auto``), ``work`` the gate's measure of work per task, compared with ``auto.process_from``.
    Returns a concrete executor; a scheduler address given to an executor other than ``dask`` (or ``auto``)
    is a usage error (:class:`ConfigError`, exit 2).
    """
    if scheduler and requested not in ("auto", "dask"):
        raise ConfigError(f"a scheduler address applies to executor=dask, not executor={requested}")
    if requested != "auto":
        return requested
    if auto is None:
        raise ValueError("executor=auto needs the gate's AutoExecutor")
    if scheduler:
        return "dask"
    return "process" if work >= auto.process_from else auto.below
