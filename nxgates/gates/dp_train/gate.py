"""dp-train's declaration (parameters, checks, faults), validation and run: three trainings (serial and
two worker counts) and the checks D1-D4 on them."""

from __future__ import annotations

import hashlib

import numpy as np

from nxgates.core.bits import compare_bits
from nxgates.core.chunks import chunk_examples
from nxgates.core.memory import require
from nxgates.core.mlp import Dims, MlpInputs, init_data, reduction_of
from nxgates.core.numeric import Verdict, compare, mlp_numeric
from nxgates.core.pool import EXECUTORS, AutoExecutor, auto_workers, choose_executor, make_pool
from nxgates.core.tape import Tape, constf
from nxgates.core.train import batch_mean, tree_levels
from nxgates.errors import ConfigError
from nxgates.gatekit import ChoiceParam, Fault, GateDef, GateOutput, IntParam, RunContext
from nxgates.gates._judgeable import judged_cells
from nxgates.gates._params import REDUCTION_PARAM, mlp_params
from nxgates.gates._verdict import NamedRedOutput
from nxgates.gates.dp_train.training import STALE_WORKER, SgdTrainer, TrainingJob, TrainingRun
from nxgates.tensors.mlp_spec import MLP_INPUTS

#: what executor=auto means here: dask given a scheduler address, else processes from NP = 16384 up (the
#: per-example work is parallel-grad's, and so is where a fork pays)
AUTO_EXECUTOR = AutoExecutor(process_from=16384)

PARAMS = {
    **mlp_params(IntParam("examples in the batch (one pool task each, every step)", min=2, max=1 << 20)),
    "steps": IntParam("SGD steps (D3 compares the first and the last)", min=2, max=1 << 16),
    "lr_num": IntParam("learning rate numerator: lr = constf(lr_num, lr_den)", min=1, max=1 << 24),
    "lr_den": IntParam("learning rate denominator; 0 = derived from the starting weights and batch: 8, doubled "
                       "while the rate is above 16 over a bound on the loss's curvature", min=0, max=1 << 24),
    "workers": IntParam("pool workers for D1; D2 adds a pool of one more; 0 = usable CPUs, at least 2",
                        min=0, max=1023),
    "executor": ChoiceParam("worker pool: thread, process (forked, sharing memory), or auto (process from "
                            f"NP >= {AUTO_EXECUTOR.process_from} up)", ("auto", *EXECUTORS)),
    "step_exp": IntParam("D4: central-difference step d = 10^-step_exp (float64)", min=1, max=12),
    "tol_permil": IntParam("D4: a cell passes when |num - ana| * 1000 / max|grad| <= this", min=0, max=1000),
    "d4_examples": IntParam("D4: check the batch gradient of the first this many examples (0 = all B)",
                            min=0, max=1 << 20),
    "reduction": REDUCTION_PARAM,
}

D1 = "D1 weights after every step BIT-IDENTICAL serial vs data-parallel"
D2 = "D2 weights after every step BIT-IDENTICAL across worker counts"
D3 = "D3 mean loss falls (last step < first step)"
D4 = "D4 step 0 batch gradient matches float64 central differences"

FAULTS = {
    "completion-order": Fault("data-parallel runs sum the gradients in the order tasks finish (worker by "
                              "worker, a left fold) instead of the tree over the examples", (D1, D2)),
    "stale-weights": Fault(f"pool worker {STALE_WORKER} computes every step with the previous step's weights",
                           (D1,)),
    "wrong-sign": Fault("gradient ascent: w += lr * g (serial and parallel alike)", (D3,)),
    "relu-grad": Fault("the tape's relu passes gradient through negative inputs, in every run alike "
                       "(D1 and D2 cannot see a gradient that is wrong the same way everywhere)", (D4,)),
}


#: lr_den = 0: the derived denominator starts here (the seed's 1/8) and doubles while the rate times the
#: curvature bound exceeds :data:`RATE_TIMES_CURVATURE` (the seed's sizes: 13.96, so 1/8; across D, H <= 64
#: the loss was seen to rise only from 78 up)
FIRST_DEN = 8
RATE_TIMES_CURVATURE = 16


def curvature_bound(dims: Dims, B: int, given: MlpInputs | None = None) -> float:
    """A bound on the batch loss's curvature at the starting weights, from norms alone: per example, with
    ``n1 = |W1|``, ``n2 = |W2|`` (Frobenius), ``|a| <= n1 |x|`` and ``|y - t| <= n1 n2 |x| + |t|``, the mean
    squared error's second derivative is at most ``2/O ((n1 + n2)^2 |x|^2 + 2 (n1 n2 |x| + |t|) |x|)``; the
    batch's is at most its largest. Norms are exactly rounded sums (:func:`math.fsum`), so every machine
    derives the same rate."""
    import math

    w, x, t = init_data(dims, B, given)
    n1 = math.sqrt(math.fsum(np.square(w[: dims.n_w1].astype(np.float64))))
    n2 = math.sqrt(math.fsum(np.square(w[dims.n_w1 :].astype(np.float64))))
    worst = 0.0
    for xb, tb in zip(x.astype(np.float64), t.astype(np.float64), strict=True):
        nx, nt = math.sqrt(math.fsum(xb * xb)), math.sqrt(math.fsum(tb * tb))
        worst = max(worst, ((n1 + n2) * nx) ** 2 + 2 * (n1 * n2 * nx + nt) * nx)
    return 2 / dims.O * worst


def learning_rate(p: dict, given: MlpInputs | None = None) -> tuple[int, np.float32]:
    """The run's denominator and rate ``constf(lr_num, lr_den)``; ``lr_den = 0`` derives the denominator from
    :func:`curvature_bound`. A start where the seed's formulas turn every hidden unit off for every example
    is refused: the gradient is zero there, so no rate makes the loss fall (D3); given inputs are judged as
    they are."""
    dims, B = Dims.of(p), p["B"]
    w, x, _ = init_data(dims, B, given)
    W1 = w[: dims.n_w1].reshape(dims.H, dims.D)
    sizes = f"D={p['D']} H={p['H']} O={p['O']} B={B}"
    if given is None and not np.any(x @ W1.T > 0):
        raise ConfigError(f"dp-train at {sizes}: every hidden unit is off (relu) for every example at the start, "
                          "so the gradient is zero and the loss cannot fall (D3); use other sizes")
    den = p["lr_den"] or derived_den(p, given)
    return den, constf(p["lr_num"], den)


def derived_den(p: dict, given: MlpInputs | None = None) -> int:
    """``lr_den = 0``'s denominator: :data:`FIRST_DEN`, doubled while the rate times :func:`curvature_bound`
    exceeds :data:`RATE_TIMES_CURVATURE`."""
    dims, B = Dims.of(p), p["B"]
    bound, den = curvature_bound(dims, B, given), FIRST_DEN
    while p["lr_num"] * bound > RATE_TIMES_CURVATURE * den:
        den *= 2
        if den > 1 << 24:
            raise ConfigError(f"dp-train at D={p['D']} H={p['H']} O={p['O']} B={B}: the loss's curvature asks for "
                              "lr_den above 2^24; use smaller sizes or set lr_num and lr_den")
    return den


def refuse_unstable_rate(p: dict, fault: str | None, lr_den: int, given: MlpInputs | None) -> None:
    """A clean run whose loss did not fall at the seed's default rate (1/8), above the one these sizes allow,
    is refused, not RED: that rate was made for the seed's sizes, and the user broke nothing (``lr_den = 0``
    derives a rate at which the loss falls). A rate or inputs the user chose keep their verdict."""
    if fault is not None or given is not None or (p["lr_num"], p["lr_den"]) != (1, FIRST_DEN):
        return  # a planted fault, the user's own inputs or rate: the verdict stands
    stable = derived_den(p, given)
    if lr_den < stable:
        raise ConfigError(f"dp-train at D={p['D']} H={p['H']} O={p['O']} B={p['B']}: the loss did not fall at "
                          f"lr=constf({p['lr_num']},{lr_den}), above the rate constf({p['lr_num']},{stable}) these "
                          f"sizes allow; use lr_den=0 to derive it, or lr_den >= {stable}")


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
    # every run's weights after every step, the serial run's twice more for its fingerprint; D4's rows
    kept = 5 * p["steps"] * NP + (p["d4_examples"] % B) * NP
    arenas = (workers + 1) * (2 * dims.arena + dims.n_w1)
    nbytes = 4 * (job + kept + arenas) + 8 * 4 * NP
    require(nbytes, f"dp-train at D={p['D']} H={p['H']} O={p['O']} B={p['B']} steps={p['steps']}")


def fault_applies(fault: str, p: dict) -> str | None:
    """Where a planted fault cannot change a bit of any run: a usage error, never a green ``--inject``."""
    if fault == "completion-order" and p["B"] < 4:
        # B=2: one addition, commutative; B=3: the tree adds (0+2)+1, and a left fold over any order of
        # three rows can round alike, so no check could be relied on to tell them apart
        return f"at B={p['B']} a left fold cannot be told from the tree over the examples; use B >= 4"
    if fault == "stale-weights":
        workers, B, steps = p["workers"] or auto_workers(), p["B"], p["steps"]
        # tasks are dealt round-robin, numbered on across steps; step 0's previous weights are its own
        first_stale = B + (STALE_WORKER - B) % workers
        if first_stale >= steps * B:
            return (f"at workers={workers} B={B} steps={steps} worker {STALE_WORKER} runs no task after step 0, "
                    "so stale weights change nothing; use fewer workers, a larger B or more steps")
    return None


def run(ctx: RunContext) -> GateOutput:
    p = ctx.params
    dims, B, steps = Dims.of(p), p["B"], p["steps"]
    lr_den, lr = learning_rate(p, MlpInputs.of(ctx.options))
    scheduler = ctx.options.get("scheduler")
    executor = choose_executor(p["executor"], scheduler, AUTO_EXECUTOR, dims.n_params)
    n_workers = p["workers"] or auto_workers()
    out = NamedRedOutput((D1, D2, D3, D4))
    out.info(f"nx_dp_train: {steps} steps of minibatch SGD (B={B}, lr=constf({p['lr_num']},{lr_den})="
             f"{float(lr):.9g}) on the f32 autograd; batch gradient = pairwise tree over the examples / B")
    ctx.progress.start("training steps", 3 * steps)

    k = p["d4_examples"] or B
    given, reduce = MlpInputs.of(ctx.options), reduction_of(p)
    # the trainings run one after another, so they share their tapes: worker w's (the serial run's is worker
    # 0's) records the pass once per run, not once per training
    tapes: dict[int, Tape] = {}
    serial_job = TrainingJob.make(dims, B, ctx.fault, given=given, reduce=reduce, arenas=tapes)
    serial = SgdTrainer(serial_job, lr, ctx).train(steps, "serial", keep_rows=k if k < B else 0)
    runs = [serial]
    for workers in (n_workers, n_workers + 1):
        pool = make_pool(executor, workers, None, scheduler)
        try:
            job = TrainingJob.make(dims, B, ctx.fault, pool.array, pool.remote, given, reduce, tapes)
            runs.append(SgdTrainer(job, lr, ctx, pool).train(steps, f"{workers} workers"))
        finally:
            pool.close()
    _, par, par2 = runs

    for s, loss in enumerate(serial.losses):
        out.info(f" step {s}: mean loss={float(loss):.9g}")
    out.info(f" executor={executor} workers={par.workers} and {par2.workers}")

    ok1, why1 = compare_runs(serial, par, dims)
    out.check(D1, ok1, why1)
    ok2, why2 = compare_runs(par, par2, dims)
    out.check(D2, ok2, why2)

    falls = serial.diverged is None and serial.losses[-1] < serial.losses[0]
    if not falls:
        refuse_unstable_rate(p, ctx.fault, lr_den, MlpInputs.of(ctx.options))
    out.check(D3, falls, f"{float(serial.losses[0]):.9g} -> {float(serial.losses[-1]):.9g} over {steps} steps"
              if serial.diverged is None else f"diverged: weights not finite after step {serial.diverged} "
              f"(loss {float(serial.losses[0]):.9g} -> {float(serial.losses[-1]):.9g}); use a smaller lr")

    v = check_d4(dims, serial, k, 10.0 ** -p["step_exp"], p["tol_permil"], given)
    kinks = dims.n_params - v.cells
    out.check(D4, v.passed, f"mean of {k}/{B} examples: {v.n_pass}/{v.cells} cells within {p['tol_permil']}permil "
              f"(worst={v.worst}permil of max|grad|={v.maxabs:.6g})"
              + (f"; {kinks} cells at relu's kink not judged" if kinks else ""))

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
    _pin(out, dims, serial, v)
    out.green = ("DP-TRAIN GREEN -- data-parallel SGD on the worker pool is bit-identical to serial SGD at every "
                 "step, across worker counts; the loss falls and the batch gradient is right.")
    out.red = "DP-TRAIN RED -- data-parallel training is not correct (see FAIL lines)"
    out.others_failed("DP-TRAIN RED", "data-parallel SGD bit-identical to serial SGD at every step, across "
                      "worker counts; the loss falls and the batch gradient is right")
    return out


def _pin(out: GateOutput, dims: Dims, serial: TrainingRun, d4: Verdict) -> None:
    """What ``--baseline`` holds: every step's mean loss and the weights after every step, W1 and W2 apart
    (a moved cell is named by its step, row and column), and D4's worst error. Never timings or workers."""
    out.fingerprint_cells("losses", np.array(serial.losses, dtype=np.float32))
    weights = np.stack(serial.weights)
    out.fingerprint_cells("W1_steps", weights[:, : dims.n_w1].reshape(-1, dims.H, dims.D))
    out.fingerprint_cells("W2_steps", weights[:, dims.n_w1 :].reshape(-1, dims.O, dims.H))
    out.fingerprint("d4_worst_permil", d4.worst)


def compare_runs(reference: TrainingRun, other: TrainingRun, dims: Dims) -> tuple[bool, str]:
    """Every step's weights, raw float32 bits; a run that stopped early fails with its reason. A difference
    is reported where it starts (:func:`where_runs_part`), then as cells per step."""
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
        return False, (f"{reference.label} vs {other.label}: {where_runs_part(reference, other, dims)}; "
                       + ", ".join(bad[:6]))
    return True, f"{reference.label} vs {other.label}: {n} steps x {reference.weights[0].size} weights"


def where_runs_part(reference: TrainingRun, other: TrainingRun, dims: Dims) -> str:
    """The first step whose weights differ in their float32 bits, and the first cell there (W1 before W2,
    row-major), with both values as float32 reprs and bits."""
    for s, (one, two) in enumerate(zip(reference.weights, other.weights, strict=False)):
        differ = np.flatnonzero(one.view(np.uint32) != two.view(np.uint32))
        if differ.size:
            k = int(differ[0])
            return f"first part at step {s}, {cell_name(dims, k)} {_bits(one[k])} vs {_bits(two[k])}"
    return "no step differs"


def cell_name(dims: Dims, k: int) -> str:
    """Flat weight ``k`` as its tensor and cell: ``W1[row, column]`` (H x D) or ``W2[row, column]`` (O x H)."""
    if k < dims.n_w1:
        return f"W1[{k // dims.D}, {k % dims.D}]"
    return f"W2[{(k - dims.n_w1) // dims.H}, {(k - dims.n_w1) % dims.H}]"


def _bits(value: np.float32) -> str:
    """A float32 as its shortest repr and its raw bits, e.g. ``0.1 (0x3dcccccd)``."""
    value = np.float32(value)
    return f"{value!s} (0x{int(value.view(np.uint32)):08x})"


def check_d4(dims: Dims, serial: TrainingRun, k: int, step: float, tol: int, given: MlpInputs | None = None
             ) -> Verdict:
    """The tree mean of step 0's first ``k`` per-example gradients (all B: the batch gradient the first
    update used) vs the mean of their float64 central differences, over the cells no example puts at relu's
    kink (:mod:`nxgates.gates._judgeable`)."""
    analytic = batch_mean(serial.grads0) if len(serial.grads0) else serial.g0
    w, x, t = init_data(dims, k, given)  # the weights step 0 saw; rows of x, t do not depend on the batch size
    numeric = np.zeros(dims.n_params)
    keep = np.ones(dims.n_params, dtype=bool)
    for b in range(k):
        numeric += mlp_numeric(dims, w, x[b], t[b], step)
        keep &= judged_cells(dims, w, x[b])
    return compare(analytic[keep], (numeric / k)[keep], tol)


GATE = GateDef(
    params=PARAMS,
    checks=(D1, D2, D3, D4),
    run=run,
    faults=FAULTS,
    validate=validate,
    options=("scheduler", "inputs"),
    inputs=MLP_INPUTS,
    fault_applies=fault_applies,
)
