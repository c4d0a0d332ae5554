"""The process executor: forked workers, arrays in shared memory mapped before the workers start, nothing
large pickled. Forking is the costly part, so the pool batches tasks per worker and guards the fork
against stop signals and a parent that dies.

The transport is two pipes per worker and no helper thread in the parent: a pass of tasks must cost the
parent next to nothing, and a thread of the parent that wakes while the workers keep every core busy takes
their CPU. A message either way is a frame, an 8-byte length and a pickle. The parent sends a worker's
queued tasks as one batch, ``[(fn, ctx), ...]``; a length of 0 asks the worker to stop. The worker answers
each batch with one frame: ``(error text or None, value)`` per task, or one error text for the whole batch.
The parent writes a batch only as far as the pipe takes it without blocking, and reads the answers while it
waits, in the thread that waits: a worker writing a large answer and the parent writing a large batch never
wait on each other. A worker that dies is seen through its process's sentinel, and the tasks it did not
answer fail with one line naming it and its exit code.

Movable tasks (``submit(..., movable=True)``) balance the workers without waking the parent: a flush that
sends batches to two or more workers hands its movable tasks to all of them, and writes one claim per task
(its index, 4 bytes) into the pool's claim pipe, which every worker inherits. Each of those workers ends
its batch by claiming and running shared tasks until the pipe is empty (:func:`_claim_shared`), so the
worker that is done first runs more of them. A shared task is delivered by the worker that claimed it, and
its record names that worker. A pipe, not a lock: a worker that dies holding a claim holds nobody up. Once
every one of those workers has answered or is lost, a shared task nobody delivered was claimed by a worker
that ended, and fails with why. One flush's shared tasks are in flight at a time; movable tasks flushed
meanwhile run where they were dealt.
"""

from __future__ import annotations

import atexit
import contextlib
import math
import os
import pickle
import select
import signal
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from functools import partial
from multiprocessing.process import BaseProcess
from typing import Any

import numpy as np

from nxgates.core.cpus import auto_workers
from nxgates.core.pool.local import CANCELLED_WHY, WorkerPool
from nxgates.core.pool.shared import TaskRecord, WaitResult
from nxgates.errors import ConfigError, refused_a_resource

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
#: the longest :meth:`ProcessWorkerPool.wait` sleeps at a time, so Ctrl-C stays prompt
WAIT_SLICE_SECONDS = 0.25
#: what a task handed to a worker and not answered when the pool closes fails with (the thread pool's words)
CANCELLED = f"CancelledError: {CANCELLED_WHY}"

#: a frame's header: the length of the pickle that follows; a length of 0 asks the worker to stop
_LENGTH = struct.Struct("<Q")
_STOP_FRAME = _LENGTH.pack(0)
#: how much the parent reads from an answer pipe at a time (a pipe holds 64 KiB unless enlarged)
_READ_BYTES = 1 << 16

#: a queued task: the function, its context, its record and where its value goes in this process. A worker's
#: claims of a flush's shared tasks are queued last in its batch, with no record (:class:`SharedTasks`)
QueuedTask = tuple[Callable[[Any, int], Any], Any, TaskRecord | None, Callable[..., None] | None]
#: a claim of a shared task: its index in the flush's shared tasks
_CLAIM = struct.Struct("<I")
#: the most movable tasks one flush shares: their claims must fit the claim pipe at once (16 KiB of its 64)
MAX_SHARED = 4096

#: a worker's answer to a batch: (error text or None, value) per task, or one error text for the whole batch
Answer = list[tuple[str | None, Any]] | str


class SharedTasks:
    """One flush's movable tasks, shared by the workers it sent batches to (``waiting`` until each answers).

    ``why``: the first reason one of them did not answer (lost, its batch failed, the pool closed), and
    ``why_worker`` which: the shared tasks nobody delivered once none is left waiting were claimed by a worker
    that did not answer, so they fail with that reason, recorded on that worker.
    """

    def __init__(self, items: list[QueuedTask], participants: set[int]):
        self.items = items
        self.waiting = set(participants)
        self.why: BaseException | str | None = None
        self.why_worker: int | None = None


class ForkedWorker:
    """One worker as the parent sees it: its process, the parent's ends of its two pipes, the bytes of batches
    not yet written, the batches it has not answered (oldest first) and the answer bytes read so far.

    Nothing is made before the worker's first batch: the pipes and the fork cost file descriptors and a
    process, and a pool may be made and closed without running a task.
    """

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
            process = mp.Process(target=_serve, args=(forked_by, self.index, task_read, answer_write, inherited),
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
        _RUNNING.add(self)

    def send(self, payload: bytes) -> None:
        """Queue one frame and write what the pipe takes now."""
        self.unsent.append(memoryview(_LENGTH.pack(len(payload)) + payload))
        self.send_some()

    def ask_to_stop(self) -> None:
        """Queue the stop frame (once): the worker exits after the batches queued before it."""
        if self.process is not None and self.lost is None and not self.stopping:
            self.stopping = True
            self.unsent.append(memoryview(_STOP_FRAME))
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
                data = os.read(self.answer_fd, _READ_BYTES)
            except BlockingIOError:
                break
            if not data:
                self.answers_ended = True
                break
            self.received += data
            if len(data) < _READ_BYTES and not until_end:
                break  # most likely all there was: spare the read that would say so
        answers, start = [], 0
        while len(self.received) - start >= _LENGTH.size:
            (length,) = _LENGTH.unpack_from(self.received, start)
            end = start + _LENGTH.size + length
            if end > len(self.received):
                break
            answers.append(bytes(self.received[start + _LENGTH.size:end]))
            start = end
        del self.received[:start]
        return answers

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


class ProcessWorkerPool(WorkerPool):
    """Forked worker processes; arrays from :meth:`array` live in shared memory, nothing large is pickled.

    A round trip to a worker process costs about as much as a small task, so tasks queue per worker and go
    over in one batch when :meth:`wait` (or :meth:`flush`) is called, like ``chunksize`` in ``Executor.map``;
    each task is still run, counted and recorded on its own. The answers are read and delivered by the
    thread that calls :meth:`wait`, so ``on_result`` runs there.
    """

    kind = "process"
    moves_tasks = True
    _executors: list[ForkedWorker]  #: the base class keeps one per worker, made by :meth:`_make_executor`

    def __init__(self, n_workers: int = 0):
        import multiprocessing  # only the process executor pays for this import

        if "fork" not in multiprocessing.get_all_start_methods():
            raise ConfigError("the process executor needs fork() (Linux or macOS); use executor=thread")
        self._mp = multiprocessing.get_context("fork")
        check_workers("process", n_workers)
        _stop_running_workers_at_exit()
        super().__init__(n_workers)
        self._queued: dict[int, list[QueuedTask]] = {}
        self._movable: list[tuple[int, QueuedTask]] = []  #: movable tasks queued, with the worker each was dealt
        self._sharing: SharedTasks | None = None  #: the movable tasks in flight, shared by a flush's workers
        self._claims: tuple[int, int] | None = None  #: the claim pipe (read end, write end), made before any fork
        self._refusal: str | None = None  #: why batches are refused (retired, closed); None while they are taken
        self._transport = threading.RLock()  #: one thread at a time writes, reads and forks

    def _make_executor(self, worker: int) -> ForkedWorker:  # type: ignore[override]
        return ForkedWorker(worker)

    def _dispatch(self, worker: int, fn: Callable[[Any, int], Any], ctx: Any, record: TaskRecord,
                  on_result: Callable[[Any], None] | None) -> None:
        self._queued.setdefault(worker, []).append((fn, ctx, record, on_result))

    def _dispatch_movable(self, worker: int, fn: Callable[[Any, int], Any], ctx: Any, record: TaskRecord,
                          on_result: Callable[[Any], None] | None) -> None:
        self._movable.append((worker, (fn, ctx, record, on_result)))

    def _share_movable(self) -> None:
        """Deal the movable tasks queued: shared by the workers this flush sends batches to, when there are two
        or more and no earlier shared tasks are in flight; else each to the worker it was dealt."""
        movable, self._movable = self._movable, []
        if not movable:
            return
        participants = set() if self._refusal is not None else {*self._queued, *(w for w, _ in movable)}
        shared: list[QueuedTask] = []
        if len(participants) >= 2 and self._sharing is None:
            shared = self._write_claims([item for _, item in movable[:MAX_SHARED]])
        for index, item in movable[len(shared):]:
            self._dispatch(index, *item)
        if not shared:
            return
        try:
            blob = pickle.dumps([(fn, ctx) for fn, ctx, _, _ in shared], pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            if refused_a_resource(exc):  # still queued, so cancelled when the pool closes
                for index, item in movable[: len(shared)]:
                    self._dispatch(index, *item)
                raise
            self._fail(shared, exc)
            return
        group = self._sharing = SharedTasks(shared, participants)
        for index in sorted(participants):  # last in each batch: a worker claims once its own tasks are done
            self._queued.setdefault(index, []).append(
                (_claim_shared, (self._claim_pipe()[0], blob), None, partial(self._claims_answered, group, index)))

    def _claim_pipe(self) -> tuple[int, int]:
        """The claim pipe (read end, write end), made before the first worker is forked: every worker inherits
        it, whenever the pool first shares tasks."""
        if self._claims is None:
            read_end, write_end = os.pipe()
            os.set_blocking(read_end, False)  # the workers inherit it so: a claim on an empty pipe fails at once
            os.set_blocking(write_end, False)
            self._claims = (read_end, write_end)
        return self._claims

    def _close_claim_pipe(self) -> None:
        if self._claims is not None:
            for fd in self._claims:
                os.close(fd)
            self._claims = None

    def _close_claim_pipe_if_unused(self) -> None:
        """A fork that failed leaves nothing open: the claim pipe too, while no worker holds it."""
        if all(w.process is None for w in self._executors):
            self._close_claim_pipe()

    def _write_claims(self, items: list[QueuedTask]) -> list[QueuedTask]:
        """Empty the claim pipe of claims nobody took (their workers ended), then write one claim per item;
        the items whose claims the pipe took (an empty pipe takes at least a page of them)."""
        read_end, write_end = self._claim_pipe()
        with contextlib.suppress(BlockingIOError):
            while os.read(read_end, _READ_BYTES):
                pass
        written = os.write(write_end, b"".join(_CLAIM.pack(i) for i in range(len(items))))
        return items[: written // _CLAIM.size]

    def _claims_answered(self, group: SharedTasks, index: int, error: BaseException | str | None,
                         claimed: list[tuple[int, str | None, Any]] | None) -> None:
        """Worker ``index``'s answer to its claims of ``group`` (``error``: it gave none, and why): each shared
        task it ran is delivered and recorded as its; once no worker is left waiting, the shared tasks nobody
        delivered fail."""
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
                if self._sharing is group:
                    self._sharing = None
                for _, _, record, _ in group.items:
                    if not record.done and group.why_worker is not None:
                        record.worker = group.why_worker
                self._fail(group.items, group.why or "no worker claimed it")

    def flush(self) -> None:
        """Pickle each worker's queued tasks into one batch and start writing it, forking the worker first if
        this is its first batch. A batch that cannot be pickled fails its tasks with the reason; running out of
        file descriptors or processes raises (the tasks not handed over are cancelled when the pool closes)."""
        with self._transport:
            self._share_movable()
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
                    with _stop_signals_deferred():
                        try:
                            worker.start(self._mp, self._executors, self._claim_pipe()[1:])
                        except BaseException:
                            self._close_claim_pipe_if_unused()
                            raise
                del self._queued[index]
                worker.unanswered.append(items)
                worker.send(payload)

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
                if record is None:  # the worker's claims of shared tasks
                    on_result(error, value)
                else:
                    self._deliver(record, error, lambda v=value: v, on_result)
        except BaseException:
            self._fail(items, CANCELLED)
            raise

    def _fail(self, items: list[QueuedTask], error: BaseException | str) -> None:
        """Each task not yet done fails with ``error``; a worker's claims of shared tasks end with it."""
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
        worker.lost = _ended_reason(worker.index, worker.process.exitcode if worker.process is not None else None)
        while worker.unanswered:
            self._fail(worker.unanswered.popleft(), worker.lost)
        worker.close_fds()
        _RUNNING.discard(worker)

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
            self._forget_shared()
            workers = [w for w in self._executors if w.process is not None and w.forked_by == os.getpid()]
            if not busy:
                for worker in workers:
                    worker.ask_to_stop()
                deadline = time.monotonic() + CLOSE_SECONDS
                for worker in workers:
                    worker.join(max(0.0, deadline - time.monotonic()))
            _end_processes([w.process for w in workers if w.process is not None and w.is_running()])
            for worker in workers:
                if worker.lost is None and worker.answer_fd >= 0:
                    self._take_answers(worker, until_end=True)  # what it answered before it stopped
                worker.close_fds()
                _RUNNING.discard(worker)
            for worker in self._executors:
                while worker.unanswered:
                    self._fail(worker.unanswered.popleft(), CANCELLED)
            queued, self._queued = self._queued, {}
            for items in queued.values():
                self._fail(items, CANCELLED)
            movable, self._movable = self._movable, []
            self._fail([item for _, item in movable], CANCELLED)
            self._close_claim_pipe()

    def array(self, shape: tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
        if self.started:
            raise RuntimeError("shared arrays must be made before the first task starts the workers")
        import mmap

        dt = np.dtype(dtype)
        count = math.prod(shape)
        buf = mmap.mmap(-1, max(1, count * dt.itemsize), flags=mmap.MAP_SHARED)  # anonymous, inherited by the forks
        return np.frombuffer(buf, dtype=dt, count=count).reshape(shape)

    def barrier(self, parties: int, timeout: float) -> Any:
        if self.started:
            raise RuntimeError("a barrier must be made before the first task starts the workers")
        return self._mp.Barrier(parties, timeout=timeout)


def _end_processes(processes: list[BaseProcess]) -> None:
    """SIGTERM to each, a second for it to exit, then SIGKILL (which cannot be ignored) and a second more."""
    for process in processes:
        process.terminate()
    for process in processes:
        process.join(1.0)
        if process.exitcode is None:
            process.kill()
            process.join(1.0)


def _ended_reason(index: int, exitcode: int | None) -> str:
    """One line for the tasks of a worker that ended before answering them."""
    how = "exit code unknown" if exitcode is None else f"exit code {exitcode}"
    if exitcode is not None and exitcode < 0:
        with contextlib.suppress(ValueError):
            how += f", {signal.Signals(-exitcode).name}"
    return f"worker {index}'s process ended ({how}) before answering its tasks"


#: workers forked and not yet reaped, whatever became of their pool: stopped at exit if nobody closed it
_RUNNING: set[ForkedWorker] = set()
_exit_hook_installed = False


def _stop_running_workers_at_exit() -> None:
    """A pool nobody closed must not hang the interpreter's exit: multiprocessing's exit handler joins every
    child, and an idle worker waits for its next batch for ever. This handler, registered after
    multiprocessing's, runs before it and ends those workers. Installed once; a forked child forgets its
    parent's workers (they are not its children)."""
    global _exit_hook_installed
    if _exit_hook_installed:
        return
    import multiprocessing.util  # noqa: F401 - registers its exit handler first, so this one runs before it

    atexit.register(_end_running_workers)
    os.register_at_fork(after_in_child=_RUNNING.clear)
    _exit_hook_installed = True


def _end_running_workers() -> None:
    """At exit: end the workers of pools nobody closed."""
    _end_processes([w.process for w in list(_RUNNING)
                    if w.process is not None and w.forked_by == os.getpid() and w.is_running()])


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


def _serve(parent: int, worker: int, task_fd: int, answer_fd: int, inherited: tuple[int, ...]) -> None:
    """A worker's life: answer each batch read from ``task_fd`` on ``answer_fd`` until asked to stop or the
    pipe reaches end of file (the parent is gone), then return (exit code 0). A parent that stopped reading
    ends it quietly too."""
    _quiet_worker(parent)
    _run_as_batch()
    for fd in inherited:  # the parent's ends of this pool's pipes
        with contextlib.suppress(OSError):
            os.close(fd)
    try:
        while (batch := _read_frame(task_fd)) is not None:
            answer = _answer(batch, worker)
            _write_all(answer_fd, _LENGTH.pack(len(answer)) + answer)
    except OSError:
        return


def _answer(batch: bytes, worker: int) -> bytes:
    """The pickled answer to a pickled batch: (error text or None, value) per task. A result that cannot be
    pickled fails its own task; a batch that cannot be read or a task that leaves through a BaseException
    (``sys.exit``) fails the whole batch, and the worker goes on serving."""
    try:
        outcomes = [(None if error is None else _describe(error), value)
                    for error, value in _run_batch(pickle.loads(batch), worker)]
    except BaseException as exc:  # noqa: BLE001 - SystemExit too: the parent reports it, the worker lives on
        return pickle.dumps(_describe(exc))
    try:
        return pickle.dumps(outcomes, pickle.HIGHEST_PROTOCOL)
    except Exception:
        return pickle.dumps([_sendable(outcome) for outcome in outcomes], pickle.HIGHEST_PROTOCOL)


def _sendable(outcome: tuple[str | None, Any]) -> tuple[str | None, Any]:
    """``outcome`` if it can be pickled, else its task's failure saying why."""
    try:
        pickle.dumps(outcome, pickle.HIGHEST_PROTOCOL)
    except Exception as exc:
        return f"the task's result cannot be sent back: {_describe(exc)}", None
    return outcome


def _describe(exc: BaseException) -> str:
    """An exception as a task record shows it."""
    return f"{type(exc).__name__}: {exc}"


def _read_frame(fd: int) -> bytes | None:
    """The next frame's pickle from a blocking ``fd``; None for the stop frame or end of file."""
    header = _read_exactly(fd, _LENGTH.size)
    if header is None:
        return None
    (length,) = _LENGTH.unpack(header)
    return _read_exactly(fd, length) if length else None


def _read_exactly(fd: int, size: int) -> bytes | None:
    """``size`` bytes from ``fd``, or None if it reaches end of file first."""
    data = bytearray()
    while len(data) < size:
        chunk = os.read(fd, size - len(data))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


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


def _run_batch(tasks: list[tuple[Callable[[Any, int], Any], Any]], worker: int) -> list[tuple[Any, Any]]:
    """Run a batch in a worker process: (exception or None, value) per task; one failure does not stop the rest."""
    outcomes: list[tuple[Any, Any]] = []
    for fn, ctx in tasks:
        try:
            outcomes.append((None, fn(ctx, worker)))
        except Exception as exc:  # reported per task by the parent
            outcomes.append((exc, None))
    return outcomes


def _claim_shared(ctx: tuple[int, bytes], worker: int) -> list[tuple[int, str | None, Any]]:
    """In a worker, last in its batch: claim the flush's shared tasks from the claim pipe one at a time and run
    each, until the pipe is empty. Returns (index, error text or None, value) per task it ran; a value that
    cannot be pickled fails its own task."""
    claims_fd, blob = ctx
    tasks = None
    outcomes: list[tuple[int, str | None, Any]] = []
    while True:
        try:
            claim = os.read(claims_fd, _CLAIM.size)
        except BlockingIOError:
            break
        if len(claim) < _CLAIM.size:
            break
        (i,) = _CLAIM.unpack(claim)
        if tasks is None:
            tasks = pickle.loads(blob)
        fn, task_ctx = tasks[i]
        try:
            outcomes.append((i, None, fn(task_ctx, worker)))
        except Exception as exc:  # reported per task by the parent
            outcomes.append((i, _describe(exc), None))
    try:
        pickle.dumps(outcomes, pickle.HIGHEST_PROTOCOL)
    except Exception:
        outcomes = [(i, *_sendable((error, value))) for i, error, value in outcomes]
    return outcomes
