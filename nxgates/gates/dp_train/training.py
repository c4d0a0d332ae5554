"""dp-train's training: the job the workers share, one pool task per example, and the trainer that runs SGD
steps serially or on a pool, streaming each step's batch gradient through the tree over the examples."""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import NamedTuple

import numpy as np

from nxgates.core.chunks import chunk_examples
from nxgates.core.mlp import Dims, MlpInputs, example_grads, init_data
from nxgates.core.pool import Pool, TaskRecord, resolve
from nxgates.core.tape import F32, Tape, tree_sum
from nxgates.core.train import sgd_step, streamed_batch_mean, tree_leaf_order
from nxgates.gatekit import RunContext
from nxgates.gates._tape_faults import ReluGradEverywhereTape

#: the worker that keeps the previous step's weights under the stale-weights fault
STALE_WORKER = 1


# ---- one training run's state, shared with the workers through the pool ---------------------------------


@dataclass
class TrainingJob:
    """Weights (current and previous step's), data, each step's losses, and a chunk's gradient rows.

    A step's B gradients go through in chunks of ``grads.shape[1]`` examples, in the order the batch tree
    adds them (:func:`nxgates.core.train.tree_leaf_order`), into two chunk buffers used in turn: the tree
    then holds one row per round, so memory does not grow with B.
    """

    dims: Dims
    w: np.ndarray
    w1_t: np.ndarray  # W1 transposed, refreshed with w each step (speed only, never bits)
    w_prev: np.ndarray
    w1_t_prev: np.ndarray
    x: np.ndarray
    t: np.ndarray
    grads: np.ndarray  # (2, chunk, NP): the rows of the current chunk and of the one before
    losses: np.ndarray  # (B,)
    fault: str | None
    arenas: dict[int, Tape] = field(default_factory=dict)
    remote: bool = False  #: a copy on a remote worker: each step's weights come separately, rows go back
    reduce: Callable[[np.ndarray, int], np.ndarray] = tree_sum  #: every tape's sums (the gate's ``reduction``)

    def __getstate__(self) -> dict:
        """What travels to a remote worker: data and fault, never the gradient rows nor local arenas."""
        return dict(self.__dict__, grads=self.grads.shape, losses=None, arenas={}, remote=True)

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.grads, self.losses = np.empty(self.grads, F32), np.empty(self.x.shape[0], F32)

    def weights(self) -> tuple[np.ndarray, ...]:
        """This step's weights (and the previous step's, for the stale-weights fault), as one object."""
        return tuple(a.copy() for a in (self.w, self.w1_t, self.w_prev, self.w1_t_prev))

    @classmethod
    def make(cls, dims: Dims, B: int, fault: str | None, array=lambda shape: np.empty(shape, F32),
             remote: bool = False, given: MlpInputs | None = None,
             reduce: Callable[[np.ndarray, int], np.ndarray] = tree_sum, arenas: dict[int, Tape] | None = None
             ) -> TrainingJob:
        """``array`` allocates: a pool's shared memory (made before its workers start) or plain numpy.
        ``arenas``: the workers' tapes, shared with jobs that never run at the same time as this one (the
        same fault and reduction), else this job's own."""
        w, x, t = init_data(dims, B, given)
        chunk = chunk_examples(dims.n_params, 1, B, remote)
        job = cls(dims, array(w.shape), array((dims.D, dims.H)), array(w.shape), array((dims.D, dims.H)),
                  array(x.shape), array(t.shape), array((2, chunk, dims.n_params)), array((B,)), fault,
                  {} if arenas is None else arenas, reduce=reduce)
        job.w[...], job.x[...], job.t[...] = w, x, t
        job.refresh_transpose()
        job.w_prev[...], job.w1_t_prev[...] = job.w, job.w1_t
        return job

    def refresh_transpose(self) -> None:
        self.w1_t[...] = self.w[: self.dims.n_w1].reshape(self.dims.H, self.dims.D).T

    def arena(self, worker: int) -> Tape:
        tape = self.arenas.get(worker)
        if tape is None:
            kind = ReluGradEverywhereTape if self.fault == "relu-grad" else Tape
            tape = self.arenas[worker] = kind(self.dims.arena, reduce=self.reduce)
        return tape

    def example(self, b: int, row: np.ndarray, worker: int) -> None:
        """Example ``b``'s gradient into ``row`` and its loss, at the current weights (stale-weights: the
        previous ones)."""
        stale = self.fault == "stale-weights" and worker == STALE_WORKER
        w, w1_t = (self.w_prev, self.w1_t_prev) if stale else (self.w, self.w1_t)
        with np.errstate(over="ignore", invalid="ignore"):  # a diverging rate is reported by D3, not warned
            self.losses[b] = example_grads(self.arena(worker), self.dims, w, self.x[b], self.t[b], row, w1_t=w1_t)


class TrainTask(NamedTuple):
    """What one pool task is told."""

    handle: Hashable  #: the shared :class:`TrainingJob`
    example: int  #: the example
    chunk_buffer: int  #: the chunk buffer its row goes into
    slot: int  #: its row there
    step_weights: Hashable | None = None  #: on a remote worker: this step's weights, shared separately


def run_task(ctx: TrainTask, worker: int) -> tuple[np.ndarray, np.float32] | None:
    """Pool task: ``example`` into row ``slot`` of ``chunk_buffer`` (module level so it pickles). On
    a remote worker the context also names this step's weights, and the row and loss go back to the gate."""
    job = resolve(ctx.handle)
    if ctx.step_weights is not None:
        job.w, job.w1_t, job.w_prev, job.w1_t_prev = resolve(ctx.step_weights)
    job.example(ctx.example, job.grads[ctx.chunk_buffer, ctx.slot], worker)
    return (job.grads[ctx.chunk_buffer, ctx.slot], job.losses[ctx.example]) if job.remote else None


def store_example(job: TrainingJob, b: int, row: np.ndarray, result: tuple[np.ndarray, np.float32]) -> None:
    """``on_result`` of a remote task: its row and loss land in the gate's job."""
    row[...], job.losses[b] = result


class StepFailed(Exception):
    """A task of the step raised or was lost: the run stops there (D1/D2 report why)."""


@dataclass
class TrainingRun:
    """One run: the weights after every step, each step's mean loss, step 0's batch gradient."""

    label: str
    workers: int  #: 0 for the serial run
    weights: list[np.ndarray] = field(default_factory=list)
    losses: list[np.float32] = field(default_factory=list)
    g0: np.ndarray | None = None
    grads0: np.ndarray | None = None  #: step 0's first per-example gradients, in example order (D4)
    problem: str = ""  #: why a data-parallel run stopped early (a task raised or was lost)
    diverged: int | None = None  #: the step after which the weights stopped being finite (training stops)
    seconds: float = 0.0


class SgdTrainer:
    """Runs ``steps`` SGD steps of a job, serially (``pool`` None) or as B pool tasks per step."""

    def __init__(self, job: TrainingJob, lr: np.float32, ctx: RunContext, pool: Pool | None = None):
        self.job, self.lr, self.ctx, self.pool = job, lr, ctx, pool
        self.handle = pool.register(job) if pool is not None else 0
        self.order = tree_leaf_order(job.losses.size)  #: the examples in the order the batch tree adds them
        self.keep: np.ndarray | None = None  #: where step 0's first rows are kept (D4), by example
        self.step_weights: Hashable | None = None

    def chunks(self) -> Iterator[tuple[np.ndarray, np.ndarray, list[TaskRecord]]]:
        """The step's gradient rows, a chunk at a time in the tree's order: (examples, rows, task records).

        A chunk's buffer is written again two chunks later, so rows handed out stay valid while the next
        chunk is computed (the streamed tree adds a pair of rows where they are)."""
        job, pool = self.job, self.pool
        size = job.grads.shape[1]
        for c, first in enumerate(range(0, self.order.size, size)):
            examples = self.order[first : first + size]
            half = c % 2
            rows = job.grads[half, : examples.size]
            rows[:, ::1024] = np.nan  # a row no task wrote cannot match by accident
            records: list[TaskRecord] = []
            if pool is None:
                for b, row in zip(examples.tolist(), rows, strict=True):
                    job.example(b, row, 0)
            else:
                done_before, start = pool.n_completed(), len(pool.records)
                if c == 0:  # a remote worker gets this step's weights once, as one more shared object
                    self.step_weights = pool.register(job.weights()) if pool.remote else None
                for slot, b in enumerate(examples.tolist()):
                    task = TrainTask(self.handle, b, half, slot, self.step_weights)
                    pool.submit(run_task, task, label=f"example {b}",
                                on_result=partial(store_example, job, b, rows[slot]) if pool.remote else None)
                waited = pool.wait(done_before + examples.size, self.ctx.remaining())
                records = pool.records[start:]
                bad = [r for r in records if r.error or not r.done]
                if bad or not waited.reached:
                    r = bad[0] if bad else records[-1]
                    raise StepFailed(f"{r.label} on worker {r.worker}: {r.error or 'never completed'}")
            if self.keep is not None:
                kept = examples < self.keep.shape[0]
                self.keep[examples[kept]] = rows[kept]
            yield examples, rows, records

    def reduce(self) -> np.ndarray:
        """The batch gradient: the tree over the examples, streamed (completion-order fault: a left fold in
        the order the tasks finished, worker by worker, chunk after chunk)."""
        B, width = self.job.losses.size, self.job.grads.shape[2]
        if self.job.fault == "completion-order" and self.pool is not None:
            acc = None
            for _, rows, records in self.chunks():
                for slot in finish_order(records):
                    acc = rows[slot].copy() if acc is None else np.add(acc, rows[slot], out=acc)
            return acc / F32(B)
        chunks = self.chunks()
        rows = iter(())

        def take() -> np.ndarray:
            nonlocal rows
            for row in rows:
                return row
            rows = iter(next(chunks)[1])
            return next(rows)

        return streamed_batch_mean(B, width, take)

    def train(self, steps: int, label: str, keep_rows: int = 0) -> TrainingRun:
        """``keep_rows``: how many of step 0's per-example gradient rows to keep (for D4)."""
        job = self.job
        run = TrainingRun(label, self.pool.n_workers if self.pool is not None else 0)
        run.grads0 = np.empty((keep_rows, job.grads.shape[2]), F32)
        t0 = time.perf_counter()
        for s in range(steps):
            self.keep = run.grads0 if s == 0 and keep_rows else None
            with np.errstate(over="ignore", invalid="ignore"):
                try:
                    g = self.reduce()
                except StepFailed as exc:
                    run.problem = f"step {s}: {exc}"
                    break
                run.losses.append(F32(tree_sum(job.losses.copy(), 0) / F32(job.losses.size)))
                if s == 0:
                    run.g0 = g.copy()
                job.w_prev[...], job.w1_t_prev[...] = job.w, job.w1_t
                sgd_step(job.w, g, self.lr, ascent=job.fault == "wrong-sign")
            job.refresh_transpose()
            run.weights.append(job.w.copy())
            if not np.all(np.isfinite(job.w)):
                run.diverged = s
                break
            self.ctx.progress.advance()
            self.ctx.check_time()
        run.seconds = time.perf_counter() - t0
        return run


def finish_order(records: list[TaskRecord]) -> list[int]:
    """The completion-order fault's order, made deterministic: worker by worker, each in its queue order.

    ``records`` are one step's tasks in submission order, so record ``b`` is example ``b``.
    """
    return sorted(range(len(records)), key=lambda b: (records[b].worker, records[b].task))
