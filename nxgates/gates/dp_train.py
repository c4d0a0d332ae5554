"""Data-parallel SGD bit-identical to serial SGD: parallel-grad's "integrate into the trainer's batch loop".

parallel-grad proves one batch of per-example gradients; this gate trains with them. The MLP and data are
parallel-grad's (the seed's formulas). Each of ``steps`` steps computes the B per-example gradients (on the
worker pool, or serially), reduces them into the batch gradient by the fixed pairwise tree over the
examples (:func:`nxgates.core.train.batch_mean`: the order depends only on B), divides by float32(B) and
updates ``w -= lr * g`` in float32, ``lr = constf(lr_num, lr_den)``. The weights live in pool shared
memory and are updated in place between steps, so forked workers always read the current step's weights.
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
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from nxgates.core.memory import require
from nxgates.core.mlp import Dims, example_grads, init_data
from nxgates.core.pool import EXECUTORS, TaskRecord, WorkerPool, auto_workers, make_pool, resolve
from nxgates.core.tape import F32, Tape, constf, tree_sum
from nxgates.core.train import batch_mean, sgd_step
from nxgates.errors import ConfigError
from nxgates.gatekit import ChoiceParam, Fault, GateDef, GateOutput, IntParam, RunContext
from nxgates.gates.parallel_grad import AUTO_PROCESS_PARAMS, choose_executor, compare_bits
from nxgates.gates.ta_gradcheck import compare, mlp_numeric

PARAMS = {
    "D": IntParam("input width", min=1, max=1 << 20),
    "H": IntParam("hidden width", min=1, max=1 << 20),
    "O": IntParam("output width", min=1, max=1 << 20),
    "B": IntParam("examples in the batch (one pool task each, every step)", min=2, max=1 << 20),
    "steps": IntParam("SGD steps (D3 compares the first and the last)", min=2, max=1 << 16),
    "lr_num": IntParam("learning rate numerator: lr = constf(lr_num, lr_den)", min=1, max=1 << 24),
    "lr_den": IntParam("learning rate denominator", min=1, max=1 << 24),
    "workers": IntParam("pool workers for D1; D2 adds a pool of one more; 0 = usable CPUs, at least 2",
                        min=0, max=1023),
    "executor": ChoiceParam("worker pool: thread, process (forked, sharing memory), or auto (process from "
                            f"NP >= {AUTO_PROCESS_PARAMS} up)", ("auto", *EXECUTORS)),
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
class Job:
    """Weights (current and previous step's), data, and each step's per-example gradients and losses."""

    dims: Dims
    w: np.ndarray
    w1_t: np.ndarray  # W1 transposed, refreshed with w each step (speed only, never bits)
    w_prev: np.ndarray
    w1_t_prev: np.ndarray
    x: np.ndarray
    t: np.ndarray
    grads: np.ndarray  # (B, NP)
    losses: np.ndarray  # (B,)
    fault: str | None
    arenas: dict[int, Tape] = field(default_factory=dict)
    remote: bool = False  #: a copy on a remote worker: each step's weights come separately, rows go back

    def __getstate__(self) -> dict:
        """What travels to a remote worker: data and fault, never the gradient rows nor local arenas."""
        return dict(self.__dict__, grads=None, losses=None, arenas={}, remote=True)

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        B = self.x.shape[0]
        self.grads, self.losses = np.empty((B, self.dims.n_params), F32), np.empty(B, F32)

    def weights(self) -> tuple[np.ndarray, ...]:
        """This step's weights (and the previous step's, for the stale-weights fault), as one object."""
        return tuple(a.copy() for a in (self.w, self.w1_t, self.w_prev, self.w1_t_prev))

    @classmethod
    def make(cls, dims: Dims, B: int, fault: str | None, array=lambda shape: np.empty(shape, F32)) -> Job:
        """``array`` allocates: a pool's shared memory (made before its workers start) or plain numpy."""
        w, x, t = init_data(dims, B)
        job = cls(dims, array(w.shape), array((dims.D, dims.H)), array(w.shape), array((dims.D, dims.H)),
                  array(x.shape), array(t.shape), array((B, dims.n_params)), array((B,)), fault)
        job.w[...], job.x[...], job.t[...] = w, x, t
        job.refresh_transpose()
        job.w_prev[...], job.w1_t_prev[...] = job.w, job.w1_t
        return job

    def refresh_transpose(self) -> None:
        self.w1_t[...] = self.w[: self.dims.n_w1].reshape(self.dims.H, self.dims.D).T

    def arena(self, worker: int) -> Tape:
        tape = self.arenas.get(worker)
        if tape is None:
            tape = self.arenas[worker] = Tape(self.dims.arena, fault="relu-grad" if self.fault == "relu-grad"
                                              else None)
        return tape

    def example(self, b: int, worker: int) -> None:
        """Example ``b``'s gradient row and loss at the current weights (stale-weights: the previous ones)."""
        stale = self.fault == "stale-weights" and worker == STALE_WORKER
        w, w1_t = (self.w_prev, self.w1_t_prev) if stale else (self.w, self.w1_t)
        with np.errstate(over="ignore", invalid="ignore"):  # a diverging rate is reported by D3, not warned
            self.losses[b] = example_grads(self.arena(worker), self.dims, w, self.x[b], self.t[b],
                                           self.grads[b], w1_t=w1_t)


def run_task(ctx: tuple, worker: int) -> tuple[np.ndarray, np.float32] | None:
    """Pool task: one example of the shared job (module level so it pickles). On a remote worker the
    context also names this step's weights, and the row and loss go back to the gate."""
    handle, b, *step_weights = ctx
    job = resolve(handle)
    if step_weights:
        job.w, job.w1_t, job.w_prev, job.w1_t_prev = resolve(step_weights[0])
    job.example(b, worker)
    return (job.grads[b], job.losses[b]) if job.remote else None


def store_example(job: Job, b: int, result: tuple[np.ndarray, np.float32]) -> None:
    """``on_result`` of a remote task: its row and loss land in the gate's job."""
    job.grads[b], job.losses[b] = result


@dataclass
class Training:
    """One run: the weights after every step, each step's mean loss, step 0's batch gradient."""

    label: str
    workers: int  #: 0 for the serial run
    weights: list[np.ndarray] = field(default_factory=list)
    losses: list[np.float32] = field(default_factory=list)
    g0: np.ndarray | None = None
    grads0: np.ndarray | None = None  #: step 0's per-example gradients (the serial run keeps them for D4)
    problem: str = ""  #: why a data-parallel run stopped early (a task raised or was lost)
    diverged: int | None = None  #: the step after which the weights stopped being finite (training stops)
    seconds: float = 0.0


class Trainer:
    """Runs ``steps`` SGD steps of a job, serially (``pool`` None) or as B pool tasks per step."""

    def __init__(self, job: Job, lr: np.float32, ctx: RunContext, pool: WorkerPool | None = None):
        self.job, self.lr, self.ctx, self.pool = job, lr, ctx, pool
        self.handle = pool.share(job) if pool is not None else 0
        self.records: list[TaskRecord] = []  #: this step's task records (the completion-order fault reads them)
        B = job.grads.shape[0]
        self.scratch = np.empty((B - B // 2, job.grads.shape[1]), F32)

    def per_example(self) -> str:
        """Fill the job's gradient rows and losses; returns a problem description, or ''."""
        job, B = self.job, self.job.grads.shape[0]
        job.grads[:, ::1024] = np.nan  # a row no task wrote cannot match by accident
        if self.pool is None:
            for b in range(B):
                job.example(b, 0)
            return ""
        pool = self.pool
        first, done_before = len(pool.records), pool.n_completed()
        step = (pool.share(job.weights()),) if pool.remote else ()
        for b in range(B):
            pool.submit(run_task, (self.handle, b, *step), label=f"example {b}",
                        on_result=partial(store_example, job, b) if pool.remote else None)
        waited = pool.wait(done_before + B, self.ctx.remaining())
        records = pool.records[first:]
        bad = [r for r in records if r.error or not r.done]
        if bad or not waited.reached:
            r = bad[0] if bad else records[-1]
            return f"{r.label} on worker {r.worker}: {r.error or 'never completed'}"
        self.records = records
        return ""

    def reduce(self) -> np.ndarray:
        """The batch gradient: the tree over the examples (completion-order fault: a fold in finish order)."""
        if self.job.fault == "completion-order" and self.pool is not None:
            order = finish_order(self.records)
            acc = self.job.grads[order[0]].copy()
            for b in order[1:]:
                np.add(acc, self.job.grads[b], out=acc)
            return acc / F32(len(order))
        return batch_mean(self.job.grads, self.scratch)

    def train(self, steps: int, label: str, keep_rows: int = 0) -> Training:
        """``keep_rows``: how many of step 0's per-example gradient rows to keep (for D4)."""
        job = self.job
        run = Training(label, self.pool.n_workers if self.pool is not None else 0)
        t0 = time.perf_counter()
        for s in range(steps):
            run.problem = self.per_example()
            if run.problem:
                run.problem = f"step {s}: {run.problem}"
                break
            with np.errstate(over="ignore", invalid="ignore"):
                g = self.reduce()
                run.losses.append(F32(tree_sum(job.losses.copy(), 0) / F32(job.losses.size)))
                if s == 0:
                    run.g0 = g.copy()
                    run.grads0 = job.grads[:keep_rows].copy()
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
    dims = Dims(p["D"], p["H"], p["O"])
    workers = (p["workers"] or auto_workers()) + 1
    per_run = 2 * p["B"] * dims.n_params + p["steps"] * dims.n_params  # gradients + scratch, snapshots
    arenas = (workers + 1) * (2 * dims.arena + dims.n_w1)
    nbytes = 4 * (2 * per_run + p["B"] * (dims.n_params + dims.D + dims.O) + arenas) + 8 * 4 * dims.n_params
    require(nbytes, f"dp-train at D={p['D']} H={p['H']} O={p['O']} B={p['B']} steps={p['steps']}")


def run(ctx: RunContext) -> GateOutput:
    p = ctx.params
    dims, B, steps = Dims(p["D"], p["H"], p["O"]), p["B"], p["steps"]
    lr = constf(p["lr_num"], p["lr_den"])
    scheduler = ctx.options.get("scheduler")
    executor = choose_executor(p["executor"], dims, scheduler)
    n_workers = p["workers"] or auto_workers()
    out = GateOutput()
    out.info(f"nx_dp_train: {steps} steps of minibatch SGD (B={B}, lr=constf({p['lr_num']},{p['lr_den']})="
             f"{float(lr):.9g}) on the f32 autograd; batch gradient = pairwise tree over the examples / B")
    ctx.progress.start("training steps", 3 * steps)

    k = p["d4_examples"] or B
    serial = Trainer(Job.make(dims, B, ctx.fault), lr, ctx).train(steps, "serial", keep_rows=k if k < B else 0)
    runs = [serial]
    for workers in (n_workers, n_workers + 1):
        pool = make_pool(executor, workers, None, scheduler)
        try:
            job = Job.make(dims, B, ctx.fault, pool.array)
            runs.append(Trainer(job, lr, ctx, pool).train(steps, f"{workers} workers"))
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


def compare_runs(reference: Training, other: Training) -> tuple[bool, str]:
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


def check_d4(dims: Dims, serial: Training, k: int, step: float, tol: int):
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
