"""The process executor's scheduling: tasks queue per worker, go over as one batch a worker, and their answers
are read and delivered by the thread that waits.

Forking is the costly part, and a round trip to a worker costs about as much as a small task, so tasks go
over in one batch when :meth:`ProcessWorkerPool.wait` (or ``flush``) is called, like ``chunksize`` in
``Executor.map``; each task is still run, counted and recorded on its own. There is no helper thread in the
parent: a pass of tasks must cost the parent next to nothing, and a thread of the parent that wakes while the
workers keep every core busy takes their CPU. A worker that dies is seen through its process's sentinel, and
the tasks it did not answer fail with one line naming it and its exit code. One flush's claimable tasks
(:mod:`.claims`) are in flight at a time; movable tasks flushed meanwhile run where they were dealt.
"""

from __future__ import annotations

import math
import mmap
import os
import pickle
import select
import threading
import time
from collections.abc import Callable, Hashable
from functools import partial
from typing import Any

import numpy as np

from nxgates.core.pool.forked.claims import MAX_CLAIMABLE, ClaimableTasks, ClaimPipe, run_claims
from nxgates.core.pool.forked.frames import Answer
from nxgates.core.pool.forked.lifecycle import (
    CLOSE_SECONDS,
    RUNNING,
    end_processes,
    ended_reason,
    stop_running_workers_at_exit,
    stop_signals_deferred,
)
from nxgates.core.pool.forked.limits import check_workers
from nxgates.core.pool.forked.worker import ForkedWorker, QueuedTask
from nxgates.core.pool.interface import CANCELLED, WAIT_SLICE_SECONDS, Pool, TaskRecord, WaitResult
from nxgates.errors import ConfigError, refused_a_resource


class ProcessWorkerPool(Pool):
    """Forked worker processes; arrays from :meth:`array` live in shared memory, nothing large is pickled."""

    kind = "process"
    moves_tasks = True
    _executors: list[ForkedWorker]  #: one per worker, made by :meth:`_make_executor`

    def __init__(self, n_workers: int = 0):
        import multiprocessing  # only the process executor pays for this import

        if "fork" not in multiprocessing.get_all_start_methods():
            raise ConfigError("the process executor needs fork() (Linux or macOS); use executor=thread")
        self._mp = multiprocessing.get_context("fork")
        check_workers("process", n_workers)
        stop_running_workers_at_exit()
        super().__init__(n_workers)
        self._queued: dict[int, list[QueuedTask]] = {}
        self._movable: list[tuple[int, QueuedTask]] = []  #: movable tasks queued, with the worker each was dealt
        self._claimable: ClaimableTasks | None = None  #: the movable tasks in flight, claimable by a flush's workers
        self._claim_pipe = ClaimPipe()
        self._refusal: str | None = None  #: why batches are refused (retired, closed); None while they are taken
        self._transport = threading.RLock()  #: one thread at a time writes, reads and forks

    def _make_executor(self, worker: int) -> ForkedWorker:
        return ForkedWorker(worker)

    # ---- memory the workers share with the parent: made before they are forked -------------------------

    def array(self, shape: tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
        if self.started:
            raise RuntimeError("shared arrays must be made before the first task starts the workers")
        dt = np.dtype(dtype)
        count = math.prod(shape)
        buf = mmap.mmap(-1, max(1, count * dt.itemsize), flags=mmap.MAP_SHARED)  # anonymous, inherited by the forks
        return np.frombuffer(buf, dtype=dt, count=count).reshape(shape)

    def barrier(self, parties: int, timeout: float) -> Any:
        if self.started:
            raise RuntimeError("a barrier must be made before the first task starts the workers")
        return self._mp.Barrier(parties, timeout=timeout)

    def register(self, obj: Any) -> Hashable:
        """Forked workers inherit what was registered before they were forked, nothing after."""
        if self.started:
            raise RuntimeError("objects must be registered before the first task starts the workers")
        return super().register(obj)

    # ---- queueing and handing over ----------------------------------------------------------------------

    def _dispatch(self, worker: int, fn: Callable[[Any, int], Any], ctx: Any, record: TaskRecord,
                  on_result: Callable[[Any], None] | None) -> None:
        self._queued.setdefault(worker, []).append((fn, ctx, record, on_result))

    def _dispatch_movable(self, worker: int, fn: Callable[[Any, int], Any], ctx: Any, record: TaskRecord,
                          on_result: Callable[[Any], None] | None) -> None:
        self._movable.append((worker, (fn, ctx, record, on_result)))

    def _offer_movable(self) -> None:
        """Deal the movable tasks queued: claimable by the workers this flush sends batches to, when there are
        two or more and no earlier claimable tasks are in flight; else each to the worker it was dealt."""
        movable, self._movable = self._movable, []
        if not movable:
            return
        participants = set() if self._refusal is not None else {*self._queued, *(w for w, _ in movable)}
        offered: list[QueuedTask] = []
        if len(participants) >= 2 and self._claimable is None:
            offered = self._claim_pipe.write([item for _, item in movable[:MAX_CLAIMABLE]])
        for index, item in movable[len(offered):]:
            self._dispatch(index, *item)
        if not offered:
            return
        try:
            blob = pickle.dumps([(fn, ctx) for fn, ctx, _, _ in offered], pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            if refused_a_resource(exc):  # still queued, so cancelled when the pool closes
                for index, item in movable[: len(offered)]:
                    self._dispatch(index, *item)
                raise
            self._fail(offered, exc)
            return
        group = self._claimable = ClaimableTasks(offered, participants)
        for index in sorted(participants):  # last in each batch: a worker claims once its own tasks are done
            self._queued.setdefault(index, []).append(
                (run_claims, (self._claim_pipe.ends()[0], blob), None, partial(self._claims_answered, group, index)))

    def _claims_answered(self, group: ClaimableTasks, index: int, error: BaseException | str | None,
                         claimed: list[tuple[int, str | None, Any]] | None) -> None:
        """Worker ``index``'s answer to its claims of ``group`` (``error``: it gave none, and why): each task it
        ran is delivered and recorded as its; once no worker is left waiting, the tasks nobody delivered fail."""
        if index not in group.waiting:
            return
        try:
            for i, task_error, value in claimed if error is None else ():
                _, _, record, on_result = group.items[i]
                record.worker = index
                self._deliver(record, task_error, lambda v=value: v, on_result)
        finally:
            group.waiting.discard(index)
            if error is not None and group.why is None:
                group.why, group.why_worker = error, index
            if not group.waiting:
                if self._claimable is group:
                    self._claimable = None
                for _, _, record, _ in group.items:
                    if not record.done and group.why_worker is not None:
                        record.worker = group.why_worker
                self._fail(group.items, group.why or "no worker claimed it")

    def flush(self) -> None:
        """Pickle each worker's queued tasks into one batch and start writing it, forking the worker first if
        this is its first batch. A batch that cannot be pickled fails its tasks with the reason; running out of
        file descriptors or processes raises (the tasks not handed over are cancelled when the pool closes)."""
        with self._transport:
            self._offer_movable()
            for index in list(self._queued):
                worker, items = self._executors[index], self._queued[index]
                refusal = worker.lost or self._refusal
                if refusal is not None:
                    del self._queued[index]
                    self._fail(items, refusal)
                    continue
                try:
                    payload = pickle.dumps([(fn, ctx) for fn, ctx, _, _ in items], pickle.HIGHEST_PROTOCOL)
                except Exception as exc:
                    if refused_a_resource(exc):  # no memory: this machine's limit, not the tasks' fault
                        raise
                    del self._queued[index]
                    self._fail(items, exc)
                    continue
                if worker.process is None:  # its first batch: fork it
                    with stop_signals_deferred():
                        try:
                            worker.start(self._mp, self._executors, self._claim_pipe.ends()[1:])
                        except BaseException:
                            if all(w.process is None for w in self._executors):  # nobody holds the claim pipe
                                self._claim_pipe.close()
                            raise
                del self._queued[index]
                worker.unanswered.append(items)
                worker.send(payload)

    # ---- waiting: writing the batches and reading the answers -------------------------------------------

    def wait(self, target: int, timeout: float | None) -> WaitResult:
        """Block until ``target`` tasks completed, nothing is in flight, or ``timeout`` seconds passed, writing
        the batches and reading the answers meanwhile (at least once, even with no time left)."""
        deadline = None if timeout is None else time.monotonic() + timeout  # forks in flush() count too
        self.flush()
        exchanged = False
        while True:
            with self._cv:
                finished = self._completed + self._failed
                if self._completed >= target or self._in_flight <= 0:
                    return WaitResult(self._completed >= target, False, finished)
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0 and exchanged:
                return WaitResult(False, True, finished)
            self._exchange(WAIT_SLICE_SECONDS if left is None else max(0.0, min(left, WAIT_SLICE_SECONDS)))
            exchanged = True

    def _exchange(self, seconds: float) -> None:
        """Wait up to ``seconds`` for a pipe to take more of a batch, an answer to arrive or a worker to end,
        and deal with each that did."""
        if not self._transport.acquire(timeout=seconds):  # another thread is exchanging
            return
        try:
            poller = select.poll()
            roles: dict[int, tuple[ForkedWorker, str]] = {}
            for worker in self._executors:
                if worker.process is None or worker.lost is not None:
                    continue
                if worker.unsent:
                    roles[worker.task_fd] = (worker, "writable")
                    poller.register(worker.task_fd, select.POLLOUT)
                if worker.unanswered:
                    if not worker.answers_ended:
                        roles[worker.answer_fd] = (worker, "answers")
                        poller.register(worker.answer_fd, select.POLLIN)
                    roles[worker.process.sentinel] = (worker, "ended")
                    poller.register(worker.process.sentinel, select.POLLIN)
            ended = []
            for fd, _ in poller.poll(math.ceil(seconds * 1000)):
                worker, role = roles[fd]
                if role == "writable":
                    worker.send_some()
                elif role == "answers":
                    self._take_answers(worker)
                else:
                    ended.append(worker)
            for worker in ended:  # after the answers: what a worker sent before it ended is delivered
                self._lose(worker)
        finally:
            self._transport.release()

    def _take_answers(self, worker: ForkedWorker, until_end: bool = False) -> None:
        for payload in worker.receive(until_end):
            items = worker.unanswered.popleft()
            try:
                answer: Answer = pickle.loads(payload)
            except Exception as exc:
                answer = f"the worker's answer cannot be unpickled: {type(exc).__name__}: {exc}"
            self._deliver_batch(items, answer)

    def _deliver_batch(self, items: list[QueuedTask], answer: Answer) -> None:
        """Each task's outcome to its record, in order; if delivering is interrupted (Ctrl-C in an
        ``on_result``), the tasks not yet delivered are cancelled, so none stays in flight for ever."""
        outcomes = [(answer, None)] * len(items) if isinstance(answer, str) else answer
        try:
            for (_, _, record, on_result), (error, value) in zip(items, outcomes, strict=True):
                if record is None:  # the worker's claims of claimable tasks
                    on_result(error, value)
                else:
                    self._deliver(record, error, lambda v=value: v, on_result)
        except BaseException:
            self._fail(items, CANCELLED)
            raise

    def _fail(self, items: list[QueuedTask], error: BaseException | str) -> None:
        """Each task not yet done fails with ``error``; a worker's claims of claimable tasks end with it."""
        for _, _, record, on_result in items:
            if record is None:
                on_result(error, None)
            elif not record.done:
                self._finish(record, error)

    def _lose(self, worker: ForkedWorker) -> None:
        """A worker ended with batches unanswered: deliver what it still sent, then fail the rest with one line
        naming it and its exit code. Later batches for it fail the same way (it is not forked again)."""
        self._take_answers(worker, until_end=True)
        worker.join(1.0)  # its sentinel is ready: it has exited, this reaps it
        worker.lost = ended_reason(worker.index, worker.process.exitcode if worker.process is not None else None)
        while worker.unanswered:
            self._fail(worker.unanswered.popleft(), worker.lost)
        worker.close_fds()
        RUNNING.discard(worker)

    # ---- the end ----------------------------------------------------------------------------------------

    def retire(self) -> None:
        """No more tasks: the tasks already submitted (even those still queued here) go over and run, then each
        worker exits on its own, so its exit (unmapping what it touched) overlaps the caller's last work instead
        of :meth:`close`."""
        self.flush()
        with self._transport:
            self._refusal = "the pool was retired: it takes no more tasks"
            for worker in self._executors:
                worker.ask_to_stop()

    def close(self) -> None:
        """Stop the workers and see each exit and reaped; tasks handed over and not answered fail as cancelled.

        An idle pool's workers are asked to stop and get :data:`CLOSE_SECONDS` in all to exit. A busy pool's
        (a stuck task, a run that timed out or was stopped) are terminated at once: the console script may
        leave through ``os._exit``, which would orphan a worker, holding the caller's stdout open. A worker
        still alive a second after SIGTERM (a task that ignores it) is killed.
        """
        with self._transport:
            with self._cv:
                busy = self._in_flight > 0
            self._refusal = CANCELLED
            self._forget_registered()
            workers = [w for w in self._executors if w.process is not None and w.forked_by == os.getpid()]
            if not busy:
                for worker in workers:
                    worker.ask_to_stop()
                deadline = time.monotonic() + CLOSE_SECONDS
                for worker in workers:
                    worker.join(max(0.0, deadline - time.monotonic()))
            end_processes([w.process for w in workers if w.process is not None and w.is_running()])
            for worker in workers:
                if worker.lost is None and worker.answer_fd >= 0:
                    self._take_answers(worker, until_end=True)  # what it answered before it stopped
                worker.close_fds()
                RUNNING.discard(worker)
            for worker in self._executors:
                while worker.unanswered:
                    self._fail(worker.unanswered.popleft(), CANCELLED)
            queued, self._queued = self._queued, {}
            for items in queued.values():
                self._fail(items, CANCELLED)
            movable, self._movable = self._movable, []
            self._fail([item for _, item in movable], CANCELLED)
            self._claim_pipe.close()
