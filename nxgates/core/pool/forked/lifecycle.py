"""Forked workers' lives as the parent sees them: held stop signals while forking, no worker outliving the
interpreter, ending processes within a bound, and the line a lost worker's tasks fail with."""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from multiprocessing.process import BaseProcess
from typing import Any

#: how long closing a process pool waits for its workers to exit before it terminates them
CLOSE_SECONDS = 5.0

STOP_SIGNALS = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n))

#: workers (:class:`~nxgates.core.pool.forked.worker.ForkedWorker`) forked and not yet reaped, whatever became
#: of their pool: stopped at exit if nobody closed it
RUNNING: set[Any] = set()
_exit_hook_installed = False


def end_processes(processes: list[BaseProcess]) -> None:
    """SIGTERM to each, a second for it to exit, then SIGKILL (which cannot be ignored) and a second more."""
    for process in processes:
        process.terminate()
    for process in processes:
        process.join(1.0)
        if process.exitcode is None:
            process.kill()
            process.join(1.0)


def ended_reason(index: int, exitcode: int | None) -> str:
    """One line for the tasks of a worker that ended before answering them."""
    how = "exit code unknown" if exitcode is None else f"exit code {exitcode}"
    if exitcode is not None and exitcode < 0:
        with contextlib.suppress(ValueError):
            how += f", {signal.Signals(-exitcode).name}"
    return f"worker {index}'s process ended ({how}) before answering its tasks"


def stop_running_workers_at_exit() -> None:
    """A pool nobody closed must not hang the interpreter's exit: multiprocessing's exit handler joins every
    child, and an idle worker waits for its next batch for ever. This handler, registered after
    multiprocessing's, runs before it and ends those workers. Installed once; a forked child forgets its
    parent's workers (they are not its children)."""
    global _exit_hook_installed
    if _exit_hook_installed:
        return
    import multiprocessing.util  # noqa: F401 - registers its exit handler first, so this one runs before it

    atexit.register(_end_running_workers)
    os.register_at_fork(after_in_child=RUNNING.clear)
    _exit_hook_installed = True


def _end_running_workers() -> None:
    """At exit: end the workers of pools nobody closed."""
    end_processes([w.process for w in list(RUNNING)
                   if w.process is not None and w.forked_by == os.getpid() and w.is_running()])


@contextlib.contextmanager
def stop_signals_deferred() -> Iterator[None]:
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
