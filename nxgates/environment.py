"""Where a run's numbers came from: nxgates, Python, numpy and its BLAS, the OS and CPU, and per gate the
executor and worker count. Two reports or a report and a baseline that differ can then say whether the
machine differed too.

Collected only when a JSON report or a baseline is written: the BLAS query and /proc/cpuinfo cost a plain
run nothing.
"""

from __future__ import annotations

import functools
import platform
from collections.abc import Iterator, Mapping
from typing import Any

#: the per-gate fields, read from the gate's metrics when it reports them, else from its params
EXECUTION_FIELDS = ("executor", "workers")


@functools.cache
def machine() -> dict[str, str]:
    """This process's software and hardware, as short strings (the same for every gate of a run)."""
    import numpy as np

    from nxgates import __version__

    return {
        "nxgates": __version__,
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "numpy": np.__version__,
        "blas": blas(),
        "os": platform.platform(),
        "cpu": cpu_model(),
    }


def blas() -> str:
    """The BLAS numpy was built with, as ``name version`` (numpy's own report of its build)."""
    import numpy as np

    try:
        config = np.show_config(mode="dicts")
    except TypeError:  # a numpy whose show_config only prints: its build's __config__ module instead
        return _legacy_blas()
    info = config.get("Build Dependencies", {}).get("blas", {}) if isinstance(config, dict) else {}
    return " ".join(str(info[k]) for k in ("name", "version") if info.get(k)) or "unknown"


def _legacy_blas() -> str:
    import numpy as np

    for key in ("blas_ilp64_opt_info", "blas_opt_info", "openblas_info", "blas_mkl_info"):
        info = getattr(np.__config__, key, None) or getattr(np.__config__, "get_info", lambda k: {})(key)
        if info:
            return f"{key}: {', '.join(info.get('libraries', [])) or 'found'}"
    return "unknown"


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo where there is one, else what :mod:`platform` says."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Model", "Hardware", "cpu model"):
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def execution(params: Mapping[str, Any], metrics: Mapping[str, Any]) -> dict[str, Any]:
    """A gate run's executor and worker count: what it used (its metrics), else what it was asked (params)."""
    return {k: metrics.get(k, params.get(k)) for k in EXECUTION_FIELDS if k in metrics or k in params}


def differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> Iterator[str]:
    """One line per field that differs, ``environment FIELD: OLD -> NEW``, in ``old``'s order."""
    for key in [*old, *(k for k in new if k not in old)]:
        if key == "gates":
            continue
        if old.get(key) != new.get(key):
            yield f"environment {key}: {old.get(key, '(none)')} -> {new.get(key, '(none)')}"
