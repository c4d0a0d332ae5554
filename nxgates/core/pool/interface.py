"""The interface every executor's pool keeps (threads :mod:`.local`, forked processes :mod:`.forked`, a Dask
cluster :mod:`.dask`), and the bookkeeping they share: task records, completion counts, bounded waits.

A gate talks to a pool only through ``register`` (hand the workers an object, get a small picklable handle),
``array``, ``barrier``, ``submit``, ``wait`` and the task records, and a task reaches the gate's objects only
through :func:`nxgates.core.pool.handles.resolve`. A task is ``fn(ctx, worker)``; the pool records which
worker ran it and whether it raised. A task's return value reaches the gate through ``submit(...,
on_result=...)``, called in the gate's process: that is how a remote executor that shares no memory with the
gate brings the rows back.

Tasks are dealt round-robin (task n -> worker n mod W). Static assignment is what makes "the tasks ran on
more than one worker" a property of the pool rather than of timing: with one queue and tiny tasks, the first
worker to wake can take them all. A caller may mark tasks ``movable`` (the process executor then lets
whichever worker is done first run them): parallel-grad marks only each pass's tail. Two methods are
override points: :meth:`Pool.worker_for` (which worker a task is dealt to) and :meth:`Pool.accepts` (whether
it is handed over at all). ``wait`` is bounded by a timeout and also returns as soon as nothing is left in
flight, so a lost task is reported, not waited for.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from nxgates.core.cpus import auto_workers
from nxgates.core.pool.handles import forget, register
from nxgates.core.pool.tasks import describe

#: why a task handed over and not run when its pool closed fails
CANCELLED_WHY = "cancelled when the pool closed"
#: that failure as a task record shows it, whatever the executor
CANCELLED = f"CancelledError: {CANCELLED_WHY}"
#: the longest a wait sleeps at a time, so Ctrl-C stays prompt
WAIT_SLICE_SECONDS = 0.25


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


class Pool:
    """What every executor's pool offers a gate; an executor says how a worker is made and a task handed over."""

    kind = ""
    remote = False  #: tasks run where this process's memory is not: they return what they make
    moves_tasks = False  #: a movable task may run on another worker than the one it was dealt to

    def __init__(self, n_workers: int = 0):
        self.n_workers = n_workers or auto_workers()
        self._executors = [self._make_executor(w) for w in range(self.n_workers)]
        self._cv = threading.Condition()
        self._submitted = 0
        self._completed = 0
        self._failed = 0
        self._in_flight = 0
        self.records: list[TaskRecord] = []
        self.started = False
        self._registered: list[Hashable] = []

    # ---- what an executor provides ----------------------------------------------------------------------

    def _make_executor(self, worker: int) -> Any:
        """What runs worker ``worker``'s tasks (made when the pool is)."""
        raise NotImplementedError

    def _dispatch(self, worker: int, fn: Callable[[Any, int], Any], ctx: Any, record: TaskRecord,
                  on_result: Callable[[Any], None] | None) -> None:
        """Hand a task to ``worker``; its outcome reaches :meth:`_deliver`."""
        raise NotImplementedError

    def _dispatch_movable(self, worker: int, fn: Callable[[Any, int], Any], ctx: Any, record: TaskRecord,
                          on_result: Callable[[Any], None] | None) -> None:
        """A movable task: run where it was dealt, unless the executor balances (the process executor)."""
        self._dispatch(worker, fn, ctx, record, on_result)

    def array(self, shape: tuple[int, ...], dtype: Any = None) -> Any:
        """An array tasks may write (for processes it must be made before the first submit)."""
        raise NotImplementedError

    def barrier(self, parties: int, timeout: float) -> Any:
        raise NotImplementedError

    def flush(self) -> None:
        """Hand queued tasks to the workers (an executor that queues them at submit has none)."""

    # ---- objects the tasks reach ------------------------------------------------------------------------

    def register(self, obj: Any) -> Hashable:
        """Make ``obj`` reachable from tasks through :func:`resolve`; returns the handle to pass them."""
        handle = register(obj)
        self._registered.append(handle)
        return handle

    def _forget_registered(self) -> None:
        for handle in self._registered:
            forget(handle)
        self._registered.clear()

    # ---- dealing, submitting, counting ------------------------------------------------------------------

    def worker_for(self, task: int) -> int:
        """The worker that task number ``task`` is dealt to (round-robin), so callers can plan memory."""
        return task % self.n_workers

    def accepts(self, task: int) -> bool:
        """Whether task number ``task`` is handed to its worker. A task not accepted stays in the records and
        never completes, so :meth:`wait` reports it lost as soon as nothing else is in flight."""
        return True

    @property
    def n_submitted(self) -> int:
        return self._submitted

    @property
    def in_flight(self) -> int:
        """Tasks handed over and not yet ended: what a wait still waits for."""
        with self._cv:
            return self._in_flight

    def submit(self, fn: Callable[[Any, int], Any], ctx: Any, label: str = "", worker: int | None = None,
               on_result: Callable[[Any], None] | None = None, movable: bool = False) -> int:
        """Queue ``fn(ctx, worker)`` on the next worker in turn (or on ``worker``); returns the task number.

        ``on_result(value)`` gets what ``fn`` returned, in this process, before the task counts as done.
        ``movable``: another worker that is dealt tasks at the same time may run it once its own are done
        (the process executor; the others run it where it was dealt). Its record then names that worker.
        """
        task = self._submitted
        worker = self.worker_for(task) if worker is None else worker
        record = TaskRecord(task, worker, label or f"task {task}")
        self.records.append(record)
        self._submitted += 1
        self.started = True
        if not self.accepts(task):
            return task
        with self._cv:
            self._in_flight += 1
        if movable:
            self._dispatch_movable(worker, fn, ctx, record, on_result)
        else:
            self._dispatch(worker, fn, ctx, record, on_result)
        return task

    def _deliver(self, record: TaskRecord, error: BaseException | str | None, value: Callable[[], Any],
                 on_result: Callable[[Any], None] | None) -> None:
        """Hand a finished task's value to ``on_result`` (a failure there fails the task), then count it."""
        if error is None and on_result is not None:
            try:
                on_result(value())
            except Exception as exc:
                error = exc
        self._finish(record, error)

    def _finish(self, record: TaskRecord, error: BaseException | str | None) -> None:
        with self._cv:
            record.done = True
            if error is None:
                self._completed += 1
            else:
                record.error = error if isinstance(error, str) else describe(error)
                self._failed += 1
            self._in_flight -= 1
            self._cv.notify_all()

    def wait(self, target: int, timeout: float | None) -> WaitResult:
        """Block until ``target`` tasks completed, nothing is in flight, or ``timeout`` seconds passed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        self.flush()
        while True:
            with self._cv:
                if self._completed >= target or self._in_flight <= 0:
                    return WaitResult(self._completed >= target, False, self._completed + self._failed)
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return WaitResult(False, True, self._completed + self._failed)
                self._cv.wait(WAIT_SLICE_SECONDS if left is None else min(left, WAIT_SLICE_SECONDS))

    def n_completed(self) -> int:
        with self._cv:
            return self._completed

    # ---- what the records say ---------------------------------------------------------------------------

    def workers_used(self, records: list[TaskRecord]) -> set[int]:
        return {r.worker for r in records if r.done and r.error is None}

    def tasks_per_worker(self, records: list[TaskRecord]) -> dict[str, int]:
        """Completed tasks per worker that really ran them (by index, or by address for a remote pool)."""
        counts: dict[str, int] = {}
        for r in records:
            if r.done and r.error is None:
                name = r.address or str(r.worker)
                counts[name] = counts.get(name, 0) + 1
        return dict(sorted(counts.items()))

    def health(self, records: list[TaskRecord]) -> tuple[list[str], dict[str, Any]]:
        """What the pool saw go wrong beyond the task records (e.g. a lost worker): lines and metrics."""
        return [], {}

    # ---- the end ----------------------------------------------------------------------------------------

    def retire(self) -> None:
        """No more tasks: the workers may start exiting while the caller finishes with their results, so
        :meth:`close` later finds less to wait for. Tasks already submitted still run."""

    def close(self) -> None:
        """Stop the workers and forget the registered objects."""
        self._forget_registered()

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
