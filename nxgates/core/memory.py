"""Estimate-before-allocate: refuse sizes the machine cannot hold instead of dying mid-run."""

from __future__ import annotations

import os

from nxgates.errors import ResourceError
from nxgates.units import fmt_bytes  # noqa: F401  (re-exported: callers size their messages)

#: fraction of currently available memory one gate may plan to use
BUDGET_FRACTION = 0.5


def available_bytes() -> int:
    """MemAvailable from /proc/meminfo (else physical memory), within an address-space limit (ulimit -v)."""
    return min(_system_available(), _address_space_left())


def _address_space_left() -> int:
    """What ``ulimit -v`` (RLIMIT_AS) still allows this process to map; unlimited is a very large number."""
    try:
        import resource

        limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    except (ImportError, OSError, ValueError):
        return 1 << 62
    if limit == resource.RLIM_INFINITY or limit < 0:
        return 1 << 62
    try:
        with open("/proc/self/status", encoding="utf-8") as fh:
            used = next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmSize:"))
    except (OSError, ValueError, IndexError, StopIteration):
        used = 0
    return max(0, limit - used)


def _system_available() -> int:
    try:
        with open("/proc/meminfo", encoding="utf-8") as fh:  # ASCII; the utf-8 codec is loaded already
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 << 30


def require(nbytes: int, what: str) -> None:
    """Raise :class:`ResourceError` when ``nbytes`` exceeds the memory budget."""
    budget = int(available_bytes() * BUDGET_FRACTION)
    if nbytes > budget:
        raise ResourceError(
            f"{what} needs about {fmt_bytes(nbytes)} but the memory budget is {fmt_bytes(budget)} "
            f"(half of the memory available now); use smaller sizes"
        )
