"""How many workers "auto" means, importable without the pool (a gate's validation runs at start-up)."""

from __future__ import annotations

import os


def auto_workers() -> int:
    """Usable CPUs (affinity-aware), at least 2 so the parallel path is always exercised."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return max(2, n)
