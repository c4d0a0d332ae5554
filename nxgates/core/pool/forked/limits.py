"""How many forked workers this machine runs sensibly: each costs a fork, a process, its pipes and memory."""

from __future__ import annotations

from nxgates.core.cpus import auto_workers
from nxgates.errors import ConfigError

#: Forked workers per usable CPU at most: beyond it they only wait their turn, and each costs a fork,
#: a process and its pipes (a thousand of them make start-up outlast any timeout).
PROCESS_WORKERS_PER_CPU = 8
#: What one forked worker is assumed to cost in memory beyond what it shares with the parent.
PROCESS_WORKER_BYTES = 64 << 20


def max_process_workers() -> int:
    """The most forked workers this machine runs sensibly: by usable CPUs, then by available memory."""
    from nxgates.core.memory import BUDGET_FRACTION, available_bytes

    by_memory = int(available_bytes() * BUDGET_FRACTION) // PROCESS_WORKER_BYTES
    return max(2, min(PROCESS_WORKERS_PER_CPU * auto_workers(), by_memory))


def check_workers(kind: str, n_workers: int) -> None:
    """A usage error (exit 2) for more process workers than :func:`max_process_workers`."""
    if kind == "process" and n_workers > (cap := max_process_workers()):
        raise ConfigError(f"workers={n_workers} is more than the process executor runs on this machine "
                          f"(at most {cap}: {PROCESS_WORKERS_PER_CPU} per usable CPU, within the memory "
                          "budget); use fewer workers or executor=thread")
