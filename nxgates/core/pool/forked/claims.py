"""Claimable tasks: movable tasks balanced between the workers without waking the parent.

A flush that sends batches to two or more workers hands its movable tasks to all of them as one flush's
:class:`ClaimableTasks`, and writes one claim per task (its index, 4 bytes) into the pool's claim pipe, which
every worker inherits. Each of those workers ends its batch by claiming and running tasks until the pipe is
empty (:func:`run_claims`), so the worker that is done first runs more of them. A claimed task is delivered
by the worker that claimed it, and its record names that worker. A pipe, not a lock: a worker that dies
holding a claim holds nobody up. Once every one of those workers has answered or is lost, a claimable task
nobody delivered was claimed by a worker that ended, and fails with why.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import struct
from collections.abc import Iterator
from typing import Any

from nxgates.core.pool.forked.frames import READ_BYTES
from nxgates.core.pool.forked.worker import QueuedTask
from nxgates.core.pool.tasks import Task, run_tasks, sendable

#: a claim of a claimable task: its index in the flush's claimable tasks
CLAIM = struct.Struct("<I")
#: the most movable tasks one flush makes claimable: their claims must fit the claim pipe at once (16 KiB of 64)
MAX_CLAIMABLE = 4096


class ClaimableTasks:
    """One flush's movable tasks, claimable by the workers it sent batches to (``waiting`` until each answers).

    ``why``: the first reason one of them did not answer (lost, its batch failed, the pool closed), and
    ``why_worker`` which: the tasks nobody delivered once none is left waiting were claimed by a worker that
    did not answer, so they fail with that reason, recorded on that worker.
    """

    def __init__(self, items: list[QueuedTask], participants: set[int]):
        self.items = items
        self.waiting = set(participants)
        self.why: BaseException | str | None = None
        self.why_worker: int | None = None


class ClaimPipe:
    """The pool's claim pipe, made before the first worker is forked: every worker inherits it, whenever the
    pool first has claimable tasks."""

    def __init__(self) -> None:
        self.fds: tuple[int, int] | None = None  #: (read end, write end) once made

    def ends(self) -> tuple[int, int]:
        """(read end, write end), made now if need be."""
        if self.fds is None:
            read_end, write_end = os.pipe()
            os.set_blocking(read_end, False)  # the workers inherit it so: a claim on an empty pipe fails at once
            os.set_blocking(write_end, False)
            self.fds = (read_end, write_end)
        return self.fds

    def close(self) -> None:
        if self.fds is not None:
            for fd in self.fds:
                os.close(fd)
            self.fds = None

    def write(self, items: list[QueuedTask]) -> list[QueuedTask]:
        """Empty the pipe of claims nobody took (their workers ended), then write one claim per item; the items
        whose claims the pipe took (an empty pipe takes at least a page of them)."""
        read_end, write_end = self.ends()
        with contextlib.suppress(BlockingIOError):
            while os.read(read_end, READ_BYTES):
                pass
        written = os.write(write_end, b"".join(CLAIM.pack(i) for i in range(len(items))))
        return items[: written // CLAIM.size]


def run_claims(ctx: tuple[int, bytes], worker: int) -> list[tuple[int, str | None, Any]]:
    """In a worker, last in its batch: claim the flush's claimable tasks from the claim pipe one at a time and
    run each, until the pipe is empty. Returns (index, error text or None, value) per task it ran; a value
    that cannot be pickled fails its own task."""
    claimed: list[int] = []
    outcomes = run_tasks(_claimed(ctx, claimed), worker)
    try:
        pickle.dumps(outcomes, pickle.HIGHEST_PROTOCOL)
    except Exception:
        outcomes = [sendable(outcome) for outcome in outcomes]
    return [(i, error, value) for i, (error, value) in zip(claimed, outcomes, strict=True)]


def _claimed(ctx: tuple[int, bytes], claimed: list[int]) -> Iterator[Task]:
    """Each task claimed from the pipe, its index noted in ``claimed``; the tasks are unpickled at the first."""
    claims_fd, blob = ctx
    tasks = None
    while True:
        try:
            claim = os.read(claims_fd, CLAIM.size)
        except BlockingIOError:
            return
        if len(claim) < CLAIM.size:
            return
        (i,) = CLAIM.unpack(claim)
        if tasks is None:
            tasks = pickle.loads(blob)
        claimed.append(i)
        yield tasks[i]
