"""Data-parallel SGD bit-identical to serial SGD: parallel-grad's "integrate into the trainer's batch loop".

parallel-grad proves one batch of per-example gradients; this gate trains with them. The MLP and data are
parallel-grad's (the seed's formulas). Each of ``steps`` steps computes the B per-example gradients (on the
worker pool, or serially), reduces them into the batch gradient by the fixed pairwise tree over the
examples (:func:`nxgates.core.train.batch_mean`: the order depends only on B), divides by float32(B) and
updates ``w -= lr * g`` in float32, ``lr = constf(lr_num, lr_den)``. The batch streams: the examples are
computed in chunks, in the order a depth-first walk of that tree meets them, and added as they come
(:func:`nxgates.core.train.streamed_batch_mean`, the same bits), so memory holds two chunks of rows and one
row per round of the tree, never B rows. The weights live in pool shared memory and are updated in place
between steps, so forked workers always read the current step's weights.
A remote pool (dask) gets the job once and each step's weights as one more shared object; its tasks
return their gradient row and loss.

* D1 the weights after every step are bit-identical between serial and data-parallel training.
* D2 bit-identical between two worker counts (``workers`` and one more).
* D3 the mean loss falls: the last step's loss < the first step's (every step printed).
* D4 step 0's batch gradient matches float64 central differences (ta-gradcheck's ``mlp_numeric`` and
  ``compare``), over the first ``d4_examples`` examples of the batch (0 = all B).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Hashable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import NamedTuple

import numpy as np

from nxgates.core.bits import compare_bits
from nxgates.core.chunks import chunk_examples
from nxgates.core.memory import require
from nxgates.core.mlp import Dims, example_grads, init_data, mlp_params
from nxgates.core.numeric import Verdict, compare, mlp_numeric
from nxgates.core.pool import (
    EXECUTORS,
    AutoExecutor,
    TaskRecord,
    WorkerPool,
    auto_workers,
    choose_executor,
    make_pool,
    resolve,
)
from nxgates.core.tape import F32, Tape, constf, tree_sum
from nxgates.core.train import batch_mean, sgd_step, streamed_batch_mean, tree_leaf_order, tree_levels
from nxgates.errors import ConfigError
from nxgates.gatekit import ChoiceParam, Fault, GateDef, GateOutput, IntParam, RunContext
from nxgates.gates._tape_faults import ReluGradEverywhereTape

#: what executor=auto means here: dask given a scheduler address, else processes from NP = 16384 up (the
#: per-example work is parallel-grad's, and so is where a fork pays)
AUTO_EXECUTOR = AutoExecutor(process_from=16384)

PARAMS = {
    **mlp_params(IntParam("examples in the batch (one pool task each, every step)", min=2, max=1 << 20)),
    "steps": IntParam("SGD steps (D3 compares the first and the last)", min=2, max=1 << 16),
    "lr_num": IntParam("learning rate numerator: lr = constf(lr_num, lr_den)", min=1, max=1 << 24),
    "lr_den": IntParam("learning rate denominator", min=1, max=1 << 24),
    "workers": IntParam("pool workers for D1; D2 adds a pool of one more; 0 = usable CPUs, at least 2",
                        min=0, max=1023),
    "executor": ChoiceParam("worker pool: thread, process (forked, sharing memory), or auto (process from "
                            f"NP >= {AUTO_EXECUTOR.process_from} up)", ("auto", *EXECUTORS)),
    "step_exp": IntParam("D4: central-difference step d = 10^-step_exp (float64)", min=1, max=12),
    "tol_permil": IntParam("D4: a cell passes when |num - ana| * 1000 / max|grad| <= this", min=0, max=1000),
    "d4_examples": IntParam("D4: check the batch gradient of the first this many examples (0 = all B)",
                            min=0, max=1 << 20),
}

D1 = "D1 weights after every step BIT-IDENTICAL serial vs data-parallel"
D2 = "D2 weights after every step BIT-IDENTICAL across worker counts"
D3 = "D3 mean loss falls (last step < first step)"
D4 = "D4 step 0 batch gradient matches float64 central differences"

#: the worker that keeps the previous step's weights under the stale-weights fault
STALE_WORKER = 1

FAULTS = {
    "completion-order": Fault("data-parallel runs sum the gradients in the order tasks finish (worker by "
                              "worker, a left fold) instead of the tree over the examples", (D1, D2)),
    "stale-weights": Fault(f"pool worker {STALE_WORKER} computes every step with the previous step's weights",
                           (D1,)),
    "wrong-sign": Fault("gradient ascent: w += lr * g (serial and parallel alike)", (D3,)),
    "relu-grad": Fault("the tape's relu passes gradient through negative inputs, in every run alike "
                       "(D1 and D2 cannot see a gradient that is wrong the same way everywhere)", (D4,)),
}


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
             remote: bool = False) -> TrainingJob:
        """``array`` allocates: a pool's shared memory (made before its workers start) or plain numpy."""
        w, x, t = init_data(dims, B)
        chunk = chunk_examples(dims.n_params, 1, B, remote)
        job = cls(dims, array(w.shape), array((dims.D, dims.H)), array(w.shape), array((dims.D, dims.H)),
                  array(x.shape), array(t.shape), array((2, chunk, dims.n_params)), array((B,)), fault)
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
            tape = self.arenas[worker] = kind(self.dims.arena)
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
    b: int  #: the example
    half: int  #: the chunk buffer its row goes into
    slot: int  #: its row there
    step_weights: Hashable | None = None  #: on a remote worker: this step's weights, shared separately


def run_task(ctx: TrainTask, worker: int) -> tuple[np.ndarray, np.float32] | None:
    """Pool task: example ``b`` into row ``slot`` of chunk buffer ``half`` (module level so it pickles). On
    a remote worker the context also names this step's weights, and the row and loss go back to the gate."""
    job = resolve(ctx.handle)
    if ctx.step_weights is not None:
        job.w, job.w1_t, job.w_prev, job.w1_t_prev = resolve(ctx.step_weights)
    job.example(ctx.b, job.grads[ctx.half, ctx.slot], worker)
    return (job.grads[ctx.half, ctx.slot], job.losses[ctx.b]) if job.remote else None


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

    def __init__(self, job: TrainingJob, lr: np.float32, ctx: RunContext, pool: WorkerPool | None = None):
        self.job, self.lr, self.ctx, self.pool = job, lr, ctx, pool
        self.handle = pool.share(job) if pool is not None else 0
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
                    self.step_weights = pool.share(job.weights()) if pool.remote else None
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


# ---- the gate ------------------------------------------------------------------------------------------


def validate(p: dict) -> None:
    if p["workers"] == 1:
        raise ConfigError("workers=1 is not data-parallel; use 0 (auto) or >= 2 (D2 adds one more)")
    if p["d4_examples"] > p["B"]:
        raise ConfigError(f"d4_examples={p['d4_examples']} exceeds the batch B={p['B']}")
    dims = Dims.of(p)
    workers = (p["workers"] or auto_workers()) + 1
    B, NP = p["B"], dims.n_params
    chunk = chunk_examples(NP, 1, B, remote=p["executor"] == "dask")
    # one job at a time: two chunks of rows, a row per round of the tree, weights, inputs and losses
    job = 2 * chunk * NP + (len(tree_levels(B)) + 1) * NP + 4 * NP + 2 * dims.n_w1 + B * (dims.D + dims.O + 1)
    kept = 3 * p["steps"] * NP + (p["d4_examples"] % B) * NP  # every run's weights after every step; D4's rows
    arenas = (workers + 1) * (2 * dims.arena + dims.n_w1)
    nbytes = 4 * (job + kept + arenas) + 8 * 4 * NP
    require(nbytes, f"dp-train at D={p['D']} H={p['H']} O={p['O']} B={p['B']} steps={p['steps']}")


def run(ctx: RunContext) -> GateOutput:
    p = ctx.params
    dims, B, steps = Dims.of(p), p["B"], p["steps"]
    lr = constf(p["lr_num"], p["lr_den"])
    scheduler = ctx.options.get("scheduler")
    executor = choose_executor(p["executor"], scheduler, AUTO_EXECUTOR, dims.n_params)
    n_workers = p["workers"] or auto_workers()
    out = GateOutput()
    out.info(f"nx_dp_train: {steps} steps of minibatch SGD (B={B}, lr=constf({p['lr_num']},{p['lr_den']})="
             f"{float(lr):.9g}) on the f32 autograd; batch gradient = pairwise tree over the examples / B")
    ctx.progress.start("training steps", 3 * steps)

    k = p["d4_examples"] or B
    serial = SgdTrainer(TrainingJob.make(dims, B, ctx.fault), lr, ctx).train(steps, "serial",
                                                                            keep_rows=k if k < B else 0)
    runs = [serial]
    for workers in (n_workers, n_workers + 1):
        pool = make_pool(executor, workers, None, scheduler)
        try:
            job = TrainingJob.make(dims, B, ctx.fault, pool.array, pool.remote)
            runs.append(SgdTrainer(job, lr, ctx, pool).train(steps, f"{workers} workers"))
        finally:
            pool.close()
    _, par, par2 = runs

    for s, loss in enumerate(serial.losses):
        out.info(f" step {s}: mean loss={float(loss):.9g}")
    out.info(f" executor={executor} workers={par.workers} and {par2.workers}")

    ok1, why1 = compare_runs(serial, par)
    out.check(D1, ok1, why1)
    ok2, why2 = compare_runs(par, par2)
    out.check(D2, ok2, why2)

    falls = serial.diverged is None and serial.losses[-1] < serial.losses[0]
    out.check(D3, falls, f"{float(serial.losses[0]):.9g} -> {float(serial.losses[-1]):.9g} over {steps} steps"
              if serial.diverged is None else f"diverged: weights not finite after step {serial.diverged} "
              f"(loss {float(serial.losses[0]):.9g} -> {float(serial.losses[-1]):.9g}); use a smaller lr")

    v = check_d4(dims, serial, k, 10.0 ** -p["step_exp"], p["tol_permil"])
    out.check(D4, v.passed, f"mean of {k}/{B} examples: {v.n_pass}/{v.cells} cells within {p['tol_permil']}permil "
              f"(worst={v.worst}permil of max|grad|={v.maxabs:.6g})")

    final = serial.weights[-1]
    digest = hashlib.sha256(memoryview(final).cast("B")).hexdigest()
    out.metrics = {
        "losses": [float(loss) if np.isfinite(loss) else None for loss in serial.losses],  # JSON: no inf/NaN
        "weights_sha256": digest,
        "steps": steps,
        "workers": par.workers,
        "workers_d2": par2.workers,
        "executor": executor,
        "lr": float(lr),
        "d4_worst_permil": v.worst,
        "serial_seconds": serial.seconds,
        "parallel_seconds": par.seconds,
        "parallel_d2_seconds": par2.seconds,
    }
    out.digest = hashlib.sha256(digest.encode() + b"".join(loss.tobytes() for loss in serial.losses)).hexdigest()
    out.green = ("DP-TRAIN GREEN -- data-parallel SGD on the worker pool is bit-identical to serial SGD at every "
                 "step, across worker counts; the loss falls and the batch gradient is right.")
    out.red = "DP-TRAIN RED -- data-parallel training is not correct (see FAIL lines)"
    return out


def compare_runs(reference: TrainingRun, other: TrainingRun) -> tuple[bool, str]:
    """Every step's weights, raw float32 bits; a run that stopped early fails with its reason."""
    for run in (other, reference):
        if run.problem:
            return False, f"{run.label} run stopped: {run.problem}"
    n = len(reference.weights)
    if len(other.weights) != n:
        return False, f"{reference.label} ran {n} steps, {other.label} {len(other.weights)}"
    bad = []
    for s in range(n):
        mism = compare_bits(reference.weights[s][None], other.weights[s][None]).mismatches
        if mism:
            bad.append(f"step {s}: {mism} cells")
    if bad:
        return False, f"{reference.label} vs {other.label}: " + ", ".join(bad[:6])
    return True, f"{reference.label} vs {other.label}: {n} steps x {reference.weights[0].size} weights"


def check_d4(dims: Dims, serial: TrainingRun, k: int, step: float, tol: int) -> Verdict:
    """The tree mean of step 0's first ``k`` per-example gradients (all B: the batch gradient the first
    update used) vs the mean of their float64 central differences."""
    analytic = batch_mean(serial.grads0) if len(serial.grads0) else serial.g0
    w, x, t = init_data(dims, k)  # the weights step 0 saw; rows of x, t do not depend on the batch size
    numeric = np.zeros(dims.n_params)
    for b in range(k):
        numeric += mlp_numeric(dims, w, x[b], t[b], step)
    return compare(analytic, numeric / k, tol)


GATE = GateDef(
    params=PARAMS,
    checks=(D1, D2, D3, D4),
    run=run,
    faults=FAULTS,
    validate=validate,
    options=("scheduler",),
)
