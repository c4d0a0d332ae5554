"""Objects a pool's tasks reach by handle: registered under small picklable handles, resolved in a task.

A task reaches the gate's objects only through :func:`resolve`. Forked workers inherit the registry; a remote
executor's workers fill their own copy through :func:`register` (see :mod:`nxgates.core.pool.dask`).
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable
from typing import Any

_REGISTERED: dict[Hashable, Any] = {}  # what pools registered, by handle; forked workers inherit it
_handles = itertools.count(1)


def resolve(handle: Hashable) -> Any:
    """In a task: the object a pool registered under ``handle``."""
    return _REGISTERED[handle]


def register(obj: Any, handle: Hashable | None = None) -> Hashable:
    """Make ``obj`` reachable through :func:`resolve`; a new handle unless ``handle`` is given."""
    if handle is None:
        handle = next(_handles)
    _REGISTERED[handle] = obj
    return handle


def forget(handle: Hashable) -> None:
    """Drop what was registered under ``handle`` (nothing if there is none)."""
    _REGISTERED.pop(handle, None)
