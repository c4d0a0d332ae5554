"""A forked worker's life: quiet about stop signals (the parent's to handle), ended with its parent, run as a
batch job, answering each batch read from its task pipe until asked to stop or the parent is gone."""

from __future__ import annotations

import contextlib
import os
import pickle
import signal

from nxgates.core.pool.forked.frames import frame, read_frame, write_all
from nxgates.core.pool.forked.lifecycle import STOP_SIGNALS
from nxgates.core.pool.tasks import describe, run_tasks, sendable


def serve(parent: int, worker: int, task_fd: int, answer_fd: int, inherited: tuple[int, ...]) -> None:
    """Answer each batch read from ``task_fd`` on ``answer_fd`` until asked to stop or the pipe reaches end of
    file (the parent is gone), then return (exit code 0). A parent that stopped reading ends it quietly too.
    ``inherited``: the parent's ends of this pool's pipes, closed here."""
    _quiet_worker(parent)
    _run_as_batch()
    for fd in inherited:
        with contextlib.suppress(OSError):
            os.close(fd)
    try:
        while (batch := read_frame(task_fd)) is not None:
            write_all(answer_fd, frame(answer(batch, worker)))
    except OSError:
        return


def answer(batch: bytes, worker: int) -> bytes:
    """The pickled answer to a pickled batch: (error text or None, value) per task. A result that cannot be
    pickled fails its own task; a batch that cannot be read or a task that leaves through a BaseException
    (``sys.exit``) fails the whole batch, and the worker goes on serving."""
    try:
        outcomes = run_tasks(pickle.loads(batch), worker)
    except BaseException as exc:  # noqa: BLE001 - SystemExit too: the parent reports it, the worker lives on
        return pickle.dumps(describe(exc))
    try:
        return pickle.dumps(outcomes, pickle.HIGHEST_PROTOCOL)
    except Exception:
        return pickle.dumps([sendable(outcome) for outcome in outcomes], pickle.HIGHEST_PROTOCOL)


def _quiet_worker(parent: int) -> None:
    """Ctrl-C, SIGTERM and SIGHUP are the parent's to handle: no worker prints a traceback.

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


def _run_as_batch() -> None:
    """Linux: schedule this worker as a batch job (SCHED_BATCH, same priority). Its wake-ups then do not
    preempt the running task: the parent handing out a pass's batches is not put aside by the first worker
    it wakes before it has woken the others (measured on 2 cores: the second worker started up to 5 ms late
    in every chunk, and parallel-grad's parallel pass at large took 0.075 s instead of 0.062 s). Elsewhere,
    or if refused, the worker runs as it is."""
    policy = getattr(os, "SCHED_BATCH", None)
    if policy is None:
        return
    with contextlib.suppress(OSError):
        os.sched_setscheduler(0, policy, os.sched_param(0))


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
        os._exit(1)  # an orphan would wait on its pipe forever, holding the caller's stdout open
