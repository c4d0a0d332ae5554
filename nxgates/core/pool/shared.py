"""What a pool's tasks share with the gate: objects registered under small picklable handles, and the
records a pool keeps of its tasks.

A task reaches shared state only through :func:`resolve`. Forked workers inherit the registry; a remote
executor's workers fill their own copy through :func:`register` (see :mod:`nxgates.core.pool.dask`).
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

_SHARED: dict[Hashable, Any] = {}  # what pools have shared, by handle; forked workers inherit it
_handles = itertools.count(1)


def resolve(handle: Hashable) -> Any:
    """In a task: the object a pool shared under ``handle``."""
    return _SHARED[handle]


def register(obj: Any, handle: Hashable | None = None) -> Hashable:
    """Make ``obj`` reachable through :func:`resolve`; a new handle unless ``handle`` is given."""
    if handle is None:
        handle = next(_handles)
    _SHARED[handle] = obj
    return handle


def forget(handle: Hashable) -> None:
    """Drop what was registered under ``handle`` (nothing if there is none)."""
    _SHARED.pop(handle, None)


@dataclass
class TaskRecord:
    task: int
    worker: int
    label: str
    done: bool = False
    error: str | None = None
    address: str = ""  #: a remote executor's address of the worker that really ran the task


@dataclass
class WaitResult:
    reached: bool  #: the completion count reached the target
    timed_out: bool
    finished: int  #: tasks that ended (completed or raised)
