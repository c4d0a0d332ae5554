"""The thread pool: the tasks run in this process, each worker a single-worker :mod:`concurrent.futures`
executor with its own queue (the seed's ``nx_thread_pool``: submit, wait for a completion count, count,
workers). Threads share this process's memory: arrays are plain numpy, objects may be registered at any time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import CancelledError, Executor, Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from nxgates.core.pool.interface import CANCELLED_WHY, Pool, TaskRecord


class ThreadWorkerPool(Pool):
    """Worker threads: a task's outcome is delivered by the thread that ran it."""

    kind = "thread"

    def _make_executor(self, worker: int) -> Executor:
        return ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"nxgates-worker{worker}")

    def array(self, shape: tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
        return np.empty(shape, dtype)

    def barrier(self, parties: int, timeout: float) -> Any:
        return threading.Barrier(parties, timeout=timeout)

    def _dispatch(self, worker: int, fn: Callable[[Any, int], Any], ctx: Any, record: TaskRecord,
                  on_result: Callable[[Any], None] | None) -> None:
        future = self._executors[worker].submit(fn, ctx, worker)
        future.add_done_callback(lambda f, r=record: self._deliver(r, future_error(f), f.result, on_result))

    def close(self) -> None:
        """Stop the workers; joins them when nothing is in flight (a stuck task must not hang the exit)."""
        with self._cv:
            idle = self._in_flight == 0
        for ex in self._executors:
            ex.shutdown(wait=idle, cancel_futures=True)
        super().close()




def future_error(future: Future) -> BaseException | None:
    """A finished task's exception, or None; a task cancelled at shutdown (Ctrl-C) is an error, quietly."""
    if future.cancelled():
        return CancelledError(CANCELLED_WHY)
    return future.exception()
