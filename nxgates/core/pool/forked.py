"""The process executor: forked workers, arrays in shared memory mapped before the workers start, nothing
large pickled. Forking is the costly part, so the pool batches tasks per worker and guards the fork
against stop signals and a parent that dies."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from typing import Any

import numpy as np

from nxgates.core.cpus import auto_workers
from nxgates.core.pool.local import WorkerPool, future_error
from nxgates.core.pool.shared import TaskRecord
from nxgates.errors import ConfigError, ResourceError, refused_a_resource

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


#: how long closing a process pool waits for its workers to exit before it terminates them
CLOSE_SECONDS = 5.0


class ProcessWorkerPool(WorkerPool):
    """Forked worker processes; arrays from :meth:`array` live in shared memory, nothing large is pickled.

    A round trip to a worker process costs about as much as a small task (measured: ~0.4 ms), so tasks
    queue per worker and go over in one batch when :meth:`wait` (or :meth:`flush`) is called, like
    ``chunksize`` in ``Executor.map``; each task is still run, counted and recorded on its own.
    """

    kind = "process"

    def __init__(self, n_workers: int = 0):
        import multiprocessing  # only the process executor pays for this import

        if "fork" not in multiprocessing.get_all_start_methods():
            raise ConfigError("the process executor needs fork() (Linux or macOS); use executor=thread")
        self._mp = multiprocessing.get_context("fork")
        check_workers("process", n_workers)
        _watch_manager_threads()
        super().__init__(n_workers)
        self._queued: dict[int, list[tuple[Callable, Any, TaskRecord]]] = {}
        self._retired: tuple[list, list] = ([], [])  #: the workers and manager threads retire() let go
        self._pending: dict[Future, tuple[int, list]] = {}  #: batches handed over and not yet delivered

    def _dispatch(self, worker: int, fn: Callable[[Any, int], Any], ctx: Any, record: TaskRecord,
                  on_result: Callable[[Any], None] | None) -> None:
        self._queued.setdefault(worker, []).append((fn, ctx, record, on_result))

    def flush(self) -> None:
        queued, self._queued = self._queued, {}
        with _stop_signals_deferred():  # a worker's first batch forks it
            for worker, items in queued.items():
                future = self._executors[worker].submit(_run_batch, [(fn, ctx) for fn, ctx, _, _ in items], worker)
                self._pending[future] = (worker, items)
                future.add_done_callback(lambda f, its=items: self._finish_batch(its, f))

    def _finish_batch(self, items: list, future: Future) -> None:
        self._pending.pop(future, None)
        error = future_error(future)
        outcomes = [(error, None)] * len(items) if error is not None else future.result()
        for (_, _, record, on_result), (err, value) in zip(items, outcomes, strict=True):
            self._deliver(record, err, lambda v=value: v, on_result)

    def _check_alive(self) -> None:
        """A worker's batches are delivered by its executor's manager thread. Under a tight ``ulimit -v``
        that thread can die starting its queue's feeder thread ("can't start new thread"): its batches would
        never finish, and a run without --timeout would wait forever. That is the machine's limit (exit 2);
        a manager thread that ended for another reason fails its batches' tasks with the reason."""
        for future, (worker, items) in list(self._pending.items()):
            manager = getattr(self._executors[worker], "_executor_manager_thread", None)
            if manager is None or manager.is_alive() or future.done():  # done: delivered before it ended
                continue
            why = _MANAGER_FAILURES.get(manager)
            if why is not None and refused_a_resource(why):
                raise ResourceError(f"the system refused the process pool a thread ({type(why).__name__}: {why}; "
                                    "a tight ulimit -v leaves no room for thread stacks); raise the limit or use "
                                    "fewer workers")
            self._pending.pop(future, None)
            for _, _, record, _ in items:
                self._finish(record, f"the pool's manager thread ended: {why!r}")

    def _make_executor(self, worker: int) -> Executor:
        from concurrent.futures import ProcessPoolExecutor

        # the forking process's pid, read now: the process that imported this module may have forked since
        return ProcessPoolExecutor(max_workers=1, mp_context=self._mp, initializer=_quiet_worker,
                                   initargs=(os.getpid(),))

    def retire(self) -> None:
        """Each executor's manager thread stops its worker once the worker's queue is drained; a worker's exit
        (unmapping what it touched) then overlaps the caller's last work instead of :meth:`close`."""
        self.flush()  # queued tasks go over first: an executor that is shut down takes no more
        self._retired = self._workers()  # shutdown() forgets them; close() must still join or terminate them
        for ex in self._executors:
            ex.shutdown(wait=False)

    def _workers(self) -> tuple[list, list]:
        """The executors' worker processes and manager threads (empty once an executor is shut down)."""
        processes = [p for ex in self._executors for p in (getattr(ex, "_processes", None) or {}).values()]
        managers = [getattr(ex, "_executor_manager_thread", None) for ex in self._executors]
        return processes, managers

    def close(self) -> None:
        """Stop the workers and see them exit, waiting at most :data:`CLOSE_SECONDS`. A worker still busy (a
        stuck task, a run that timed out at start-up) is terminated at once, and so is one whose executor has
        not finished shutting down by then: the console script may leave through ``os._exit``, which would
        orphan a worker blocked forever on its queue, holding the caller's stdout open, and a stop (Ctrl-C,
        SIGTERM) must not wait on an executor's manager thread that does not end (``shutdown(wait=True)``
        joins it without a limit). A worker still alive a second after SIGTERM (a task that ignores it) is
        killed."""
        with self._cv:
            busy = self._in_flight > 0
        processes, managers = self._workers()
        processes, managers = processes + self._retired[0], managers + self._retired[1]
        for ex in self._executors:
            ex.shutdown(wait=False, cancel_futures=True)  # each manager thread stops its worker and reaps it
        self._forget_shared()
        deadline = time.monotonic() + (0.0 if busy else CLOSE_SECONDS)
        for manager in managers:
            if manager is not None and manager.ident is not None:  # started
                manager.join(max(0.0, deadline - time.monotonic()))
        for p in processes:
            if p.is_alive():
                p.terminate()
        from multiprocessing.connection import wait as _wait_ready

        for p in processes:
            p.join(1.0)
            # a task that ignores SIGTERM: SIGKILL cannot be ignored. Alive by its sentinel, not is_alive(),
            # which stays True for a worker that exited and that the executor's manager thread reaped
            if not _wait_ready([p.sentinel], 0):
                p.kill()
                p.join(1.0)

    def array(self, shape: tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
        if self.started:
            raise RuntimeError("shared arrays must be made before the first task starts the workers")
        import math
        import mmap

        dt = np.dtype(dtype)
        count = math.prod(shape)
        buf = mmap.mmap(-1, max(1, count * dt.itemsize), flags=mmap.MAP_SHARED)  # anonymous, inherited by the forks
        return np.frombuffer(buf, dtype=dt, count=count).reshape(shape)

    def barrier(self, parties: int, timeout: float) -> Any:
        if self.started:
            raise RuntimeError("a barrier must be made before the first task starts the workers")
        return self._mp.Barrier(parties, timeout=timeout)


_MANAGER_FAILURES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  #: manager thread -> what ended it


def _watch_manager_threads() -> None:
    """Record, and keep off stderr, the exception that ends a process executor's manager thread:
    :meth:`ProcessWorkerPool._check_alive` turns it into one line. Other threads' exceptions go to the hook
    that was there. Installed once."""
    from concurrent.futures import process

    manager_class = getattr(process, "_ExecutorManagerThread", None)  # CPython 3.9+
    if manager_class is None or getattr(threading.excepthook, "nxgates_manager_hook", False):
        return
    previous = threading.excepthook

    def hook(args: Any) -> None:
        if isinstance(args.thread, manager_class):
            _MANAGER_FAILURES[args.thread] = args.exc_value
            return
        previous(args)

    hook.nxgates_manager_hook = True  # type: ignore[attr-defined]
    threading.excepthook = hook


STOP_SIGNALS = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n))


@contextlib.contextmanager
def _stop_signals_deferred() -> Iterator[None]:
    """Hold Ctrl-C, SIGTERM and SIGHUP while forking; they are delivered as soon as the forks are done.

    A signal landing inside ``os.fork``'s at-fork hooks raises there, where Python prints the traceback
    and drops the exception ("Exception ignored"): the run would go on as if never stopped. Only the main
    thread forks here, and only it runs Python's signal handlers.
    """
    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, saved)


def _quiet_worker(parent: int) -> None:
    """In each forked worker: Ctrl-C, SIGTERM and SIGHUP are the parent's to handle: no worker prints a traceback.

    SIGINT reaches the whole process group; the parent stops the run and the workers with it. SIGTERM gets
    its default action back (the parent's handler, inherited by fork, would raise in the worker).
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, signal.SIG_IGN)  # a hang-up, like Ctrl-C, is the parent's to handle
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)  # held by the parent while it forked
    _end_with_parent(parent)


def _end_with_parent(parent: int) -> None:
    """Linux: the kernel sends this worker SIGTERM when ``parent`` (the pid that forked it) dies, even by SIGKILL
    (no orphans)."""
    import sys

    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGTERM), 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return  # without it, close() still terminates busy workers
    if os.getppid() != parent:  # the parent died between the fork and the prctl: nobody will signal
        os._exit(1)  # an orphan would wait on its queue forever, holding the caller's stdout open


def _run_batch(tasks: list[tuple[Callable[[Any, int], Any], Any]], worker: int) -> list[tuple[Any, Any]]:
    """Run a batch in a worker process: (exception or None, value) per task; one failure does not stop the rest."""
    outcomes: list[tuple[Any, Any]] = []
    for fn, ctx in tasks:
        try:
            outcomes.append((None, fn(ctx, worker)))
        except Exception as exc:  # reported per task by the parent
            outcomes.append((exc, None))
    return outcomes
