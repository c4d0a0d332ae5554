"""What runs on a Dask worker and what travels to and from it: a worker's batch of tasks, its rows packed
as one block, and an object the gate registered, installed on every worker as a plugin."""

from __future__ import annotations

from typing import Any

import numpy as np

from nxgates.core.pool.handles import forget, register
from nxgates.core.pool.tasks import Outcome, Task, run_tasks

try:  # this module is imported only for executor=dask; without the extra the pool says what to install
    from distributed.diagnostics.plugin import WorkerPlugin
except ImportError:
    WorkerPlugin = object


def run_remote_batch(tasks: list[Task], worker: int) -> tuple[str, Any]:
    """On a Dask worker: run the tasks; (this worker's address, (error text or None, value) per task, packed)."""
    from distributed import get_worker

    return get_worker().address, pack(run_tasks(tasks, worker))


def pack(outcomes: list[Outcome]) -> Any:
    """Equal-shape array results travel as one block (one frame on the wire, not one per task)."""
    values = [v for _, v in outcomes]
    if all(e is None for e, _ in outcomes) and values and all(isinstance(v, np.ndarray) for v in values) and len(
            {(v.shape, v.dtype.str) for v in values}) == 1:
        return np.stack(values)
    return outcomes


def unpack(packed: Any) -> list[Outcome]:
    if isinstance(packed, np.ndarray):
        return [(None, row) for row in packed]
    return packed


class RegisteredObject(WorkerPlugin):
    """An object the gate registered, in transit: on each worker, registered under its handle for
    :func:`~nxgates.core.pool.handles.resolve`."""

    def __init__(self, handle: str, obj: Any):
        self.handle, self.obj = handle, obj

    def setup(self, worker: Any) -> None:
        register(self.obj, self.handle)

    def teardown(self, worker: Any) -> None:
        forget(self.handle)
