"""One forked worker as the parent sees it: its process, the parent's ends of its two pipes, the bytes of
batches not yet written, the batches it has not answered (oldest first) and the answer bytes read so far.

The parent writes a batch only as far as the pipe takes it without blocking, and reads the answers while it
waits: a worker writing a large answer and the parent writing a large batch never wait on each other.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable
from multiprocessing.process import BaseProcess
from typing import Any

from nxgates.core.pool.forked.child import serve
from nxgates.core.pool.forked.frames import READ_BYTES, STOP_FRAME, cut_frames, frame
from nxgates.core.pool.forked.lifecycle import RUNNING
from nxgates.core.pool.interface import TaskRecord

#: a queued task: the function, its context, its record and where its value goes in this process. A worker's
#: claims of a flush's claimable tasks are queued last in its batch, with no record
#: (:class:`~nxgates.core.pool.forked.claims.ClaimableTasks`)
QueuedTask = tuple[Callable[[Any, int], Any], Any, TaskRecord | None, Callable[..., None] | None]


class ForkedWorker:
    """The parent's handle on one worker. Nothing is made before the worker's first batch: the pipes and the
    fork cost file descriptors and a process, and a pool may be made and closed without running a task."""

    def __init__(self, index: int):
        self.index = index
        self.process: BaseProcess | None = None
        self.forked_by = 0  #: the pid that forked it: only that process may signal or reap it
        self.task_fd = -1  #: the parent writes batches here
        self.answer_fd = -1  #: and reads the answers here
        self.unsent: deque[memoryview] = deque()
        self.unanswered: deque[list[QueuedTask]] = deque()
        self.received = bytearray()
        self.answers_ended = False  #: the answer pipe reached end of file
        self.stopping = False  #: the stop frame is queued (the pool retired or closed)
        self.lost: str | None = None  #: why it is gone before its tasks were answered

    def parent_fds(self) -> tuple[int, ...]:
        return tuple(fd for fd in (self.task_fd, self.answer_fd) if fd >= 0)

    def start(self, mp: Any, siblings: list[ForkedWorker], claims_write: tuple[int, ...] = ()) -> None:
        """Make the pipes and fork the worker (``claims_write``: the pool's claim pipe's write end, closed in
        the worker). An OSError (no file descriptor, no process) propagates, with nothing left open: the
        runner reports it as this machine's limit."""
        made: list[int] = []
        try:
            task_read, task_write = os.pipe()
            made += [task_read, task_write]
            answer_read, answer_write = os.pipe()
            made += [answer_read, answer_write]
            # the parent's ends, this worker's and its siblings' (and the claim pipe's write end): a worker
            # holding a write end would keep the pipe from reaching end of file when the parent goes
            inherited = (task_write, answer_read, *(fd for w in siblings if w is not self for fd in w.parent_fds()),
                         *claims_write)
            forked_by = os.getpid()  # read now: the process that imported this module may have forked since
            process = mp.Process(target=serve, args=(forked_by, self.index, task_read, answer_write, inherited),
                                 name=f"nxgates-worker{self.index}")
            process.start()
        except BaseException:
            for fd in made:
                os.close(fd)
            raise
        os.close(task_read)
        os.close(answer_write)
        os.set_blocking(task_write, False)
        os.set_blocking(answer_read, False)
        self.process, self.forked_by, self.task_fd, self.answer_fd = process, forked_by, task_write, answer_read
        RUNNING.add(self)

    def send(self, payload: bytes) -> None:
        """Queue one frame and write what the pipe takes now."""
        self.unsent.append(memoryview(frame(payload)))
        self.send_some()

    def ask_to_stop(self) -> None:
        """Queue the stop frame (once): the worker exits after the batches queued before it."""
        if self.process is not None and self.lost is None and not self.stopping:
            self.stopping = True
            self.unsent.append(memoryview(STOP_FRAME))
            self.send_some()

    def send_some(self) -> None:
        """Write what the pipe takes without blocking. A worker that is gone takes nothing more: its sentinel
        tells the waiting parent why."""
        try:
            while self.unsent:
                chunk = self.unsent[0]
                written = os.write(self.task_fd, chunk)
                if written < len(chunk):
                    self.unsent[0] = chunk[written:]
                    return
                self.unsent.popleft()
        except BlockingIOError:
            return
        except BrokenPipeError:
            self.unsent.clear()

    def receive(self, until_end: bool = False) -> list[bytes]:
        """Read what the worker sent without blocking; the complete answers, oldest first. ``until_end``: read
        on until the pipe is empty (a worker that has ended sends nothing more)."""
        while not self.answers_ended:
            try:
                data = os.read(self.answer_fd, READ_BYTES)
            except BlockingIOError:
                break
            if not data:
                self.answers_ended = True
                break
            self.received += data
            if len(data) < READ_BYTES and not until_end:
                break  # most likely all there was: spare the read that would say so
        return cut_frames(self.received)

    def is_running(self) -> bool:
        """Forked and not yet reaped (after a join, ``exitcode`` is set once the process has exited)."""
        return self.process is not None and self.process.exitcode is None

    def join(self, seconds: float) -> None:
        """Wait up to ``seconds`` for the process to exit, and reap it if it did."""
        if self.process is not None:
            self.process.join(seconds)

    def close_fds(self) -> None:
        for fd in self.parent_fds():
            os.close(fd)
        self.task_fd = self.answer_fd = -1
        self.unsent.clear()
