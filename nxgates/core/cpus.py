"""Which executors a pool may be and how many workers "auto" means, importable without the pool (a gate's
parameters and validation are read at every start-up)."""

from __future__ import annotations

import os

EXECUTORS = ("thread", "process", "dask")


def auto_workers() -> int:
    """Usable CPUs (affinity-aware), at least 2 so the parallel path is always exercised."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return max(2, n)
