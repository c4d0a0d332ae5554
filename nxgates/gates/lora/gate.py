"""The lora gate: the seed ``nx_intfp_lora_gradcheck_gate.nx``'s report, checks and planted faults.

The model is core's (:mod:`nxgates.core.lora`) and knows no faults: this gate plants them on what core
computes (:func:`planted_gradients`), so the faulty numbers come from the correct ones by one named edit.
``--inputs`` gives the model's tensors instead of the seed's formulas; ``--compare-grads`` adds a check that
another implementation's ``dA``, ``dB`` equal the gate's, integer for integer.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import numpy as np

import nxgates.core.lora.gradcheck as gradcheck
import nxgates.core.lora.pooled as pooled
from nxgates.core import q20
from nxgates.core.cpus import EXECUTORS, AutoExecutor, choose_executor
from nxgates.core.lora import Forward, backward, forward, init_model
from nxgates.core.lora.gradcheck import Gradcheck
from nxgates.core.q20 import S, tdiv
from nxgates.errors import ConfigError, ResourceError
from nxgates.gatekit import ChoiceParam, Fault, GateDef, GateOutput, IntParam, RunContext, SeedLog
from nxgates.gates._params import MODEL_PARAMS, check_model
from nxgates.gates._verdict import NamedRedOutput
from nxgates.tensors.lora_spec import LORA_INPUTS, lora_model, read_foreign_grads

#: ``executor=auto``: dask given a scheduler address, else forked processes (the cells share memory)
AUTO_EXECUTOR = AutoExecutor()

PARAMS = {
    **MODEL_PARAMS,
    "algorithm": ChoiceParam("gradcheck path: fast (exact, O(T*DM) per cell) or naive (the seed's)",
                             ("fast", "naive")),
    "workers": IntParam("processes for the fast gradcheck's cells; 0 = auto (one process at small sizes, "
                        "the usable CPUs from T*DM^2*R = 2^30 up), 1 = in-process", min=0, max=1024,
                        default=0),
    "executor": ChoiceParam("where a pooled gradcheck's cells run: process (forked, shared memory), thread, "
                            "dask (a LocalCluster of `workers`, or --scheduler ADDRESS), or auto (dask given a "
                            "scheduler address, else process)", ("auto", *EXECUTORS), default="auto"),
}

CHECK_A = "gradcheck A (lora)"
CHECK_B = "gradcheck B (lora)"
CHECK_FROZEN = "base W frozen"
CHECK_FOREIGN = "dA, dB EXACT vs the given file"

FAULTS = {
    "grad-bug": Fault("the analytic gradient of one cell of A is off by 10% of max|grad| (above the tolerance)",
                      (CHECK_A,)),
    "missing-rescale": Fault("one product h*dy in the backward of B is not divided by S", (CHECK_B,)),
    "transposed-b": Fault("dB is written with swapped indices (dB[j,k] for dB[k,j], row-major)", (CHECK_B,)),
    "train-base": Fault("the run writes to the frozen base W (one cell moved by delta, never restored)",
                        (CHECK_FROZEN,)),
}


def planted_gradients(fault: str | None, f: Forward, dA: np.ndarray, dB: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The backward's gradients with ``fault``'s defect planted (in place where it can be): a cell of dA off by
    a tenth of max|grad|, one term of dB left in Q40, or dB's indices swapped."""
    if fault == "missing-rescale":
        term = int(f.h[0, 0]) * 2 * int(f.y[0, 0])  # h * dy, with dy = 2y as the backward forms it
        dB[0, 0] += term - int(tdiv(term, S))
    elif fault == "transposed-b":
        dB = np.ascontiguousarray(dB.T).reshape(dB.shape)
    elif fault == "grad-bug":
        dA[0, 0] += max(1, int(np.max(np.abs(dA))) // 10)
    return dA, dB


#: a failed gradcheck of a tensor whose max|grad| is under this many times the central difference's rounding
#: is refused (:func:`refuse_unresolvable`): clean runs were seen to fail up to 4.6 times it (T any, DM=22,
#: R=3, 8, 14, 19), and the seed's sizes sit far above
RESOLUTION = 8


def refuse_unresolvable(f: Forward, grads: tuple[np.ndarray, np.ndarray], results: list[Gradcheck], delta: int,
                        naming: str) -> None:
    """Refuse, rather than FAIL, a gradcheck that failed on a tensor it cannot resolve
    (:func:`~nxgates.core.lora.gradcheck.first_unresolved`)."""
    bad = gradcheck.first_unresolved(f, grads, results, delta, RESOLUTION)
    if bad is not None:
        raise ConfigError(f"lora at {naming}: d{bad.name} is too small for the Q20 gradcheck to resolve (max|grad| "
                          f"{bad.largest} < {RESOLUTION} x the central difference's rounding {bad.rounding}); use "
                          "other sizes or delta")


def validate(p: dict) -> None:
    """The model's checks (:func:`~nxgates.gates._params.check_model`)."""
    check_model(p)


def run(ctx: RunContext) -> GateOutput:
    p = ctx.params
    T, DM, R, delta, tol = p["T"], p["DM"], p["R"], p["delta"], p["tol_permil"]
    naming = f"T={T} DM={DM} R={R} delta={delta}"
    try:
        return _run(ctx, T, DM, R, delta, tol)
    except q20.Q20Overflow as exc:
        raise ResourceError(f"lora at {naming}: {exc}; use smaller sizes or delta") from None


def _run(ctx: RunContext, T: int, DM: int, R: int, delta: int, tol: int) -> GateOutput:
    out = NamedRedOutput((CHECK_A, CHECK_B, CHECK_FROZEN))
    foreign = ctx.options.get("compare_grads")
    theirs = read_foreign_grads(foreign, ctx.params) if foreign is not None else None
    given = ctx.options.get("inputs")
    m = lora_model(given) if given is not None else init_model(T, DM, R)
    w_before = m.W.copy()
    f = forward(m)
    grads = backward(m, f)
    dA, dB = planted_gradients(ctx.fault, f, *(g.copy() for g in grads))

    trained = DM * R + R * DM
    total = DM * DM + trained
    out.info(f"=== nx_intfp_lora_gradcheck: LoRA parameter-efficient fine-tuning (rank {R}) in Q20 INTEGER,"
             " no float ===")
    out.info("")
    out.info(f" params: base W frozen ({DM * DM}) + LoRA A,B trainable ({trained}) = "
             f"{trained * 1000 // total}permil of full trained (PEFT) L_q32={f.loss}")
    out.info(" gradcheck:")

    ctx.progress.start("gradcheck cells", trained)
    workers = pooled.gradcheck_workers(ctx.params.get("workers", 0), T, DM, R)
    scheduler = ctx.options.get("scheduler")
    executor = choose_executor(ctx.params.get("executor", "auto"), scheduler, AUTO_EXECUTOR)
    if ctx.params["algorithm"] == "naive":
        diffs_a, diffs_b = gradcheck.adapter_diffs(m, f, delta, ctx, "naive")
    elif executor == "dask":  # asked for: on the cluster's workers (`workers`, 0 = the pool's default)
        diffs_a, diffs_b = pooled.diffs_fast_pooled(m, f, delta, ctx, ctx.params.get("workers", 0), executor, scheduler)
    elif workers > 1:
        diffs_a, diffs_b = pooled.diffs_fast_pooled(m, f, delta, ctx, workers, executor)
    else:
        diffs_a, diffs_b = gradcheck.adapter_diffs(m, f, delta, ctx, "fast")
    ctx.progress.stop()
    if ctx.fault == "train-base":
        m.W.reshape(-1)[0] += delta

    results = [gradcheck.judge(name, g, d, delta, tol)
               for name, g, d in zip(gradcheck.NAMES, (dA, dB), (diffs_a, diffs_b), strict=True)]
    refuse_unresolvable(f, grads, results, delta, f"T={T} DM={DM} R={R} delta={delta}")
    for g in results:
        for i in np.flatnonzero(g.rel > tol):
            out.detail(f" {g.name} cell {i} ana={g.analytic[i]} num={g.numeric[i]} rel={g.rel[i]}")
        out.verbose_lines(partial(_cell_lines, g))
        out.info(f" {g.name}: {g.n_pass}/{g.cells} (worst={g.worst}permil of max|grad|={g.maxabs})")
    n_ok = sum(g.n_pass for g in results)
    out.info("")
    out.info(f" LoRA gradcheck: {n_ok}/{trained} cells correct")
    for g, check in zip(results, (CHECK_A, CHECK_B), strict=True):
        out.check(check, g.passed, f"{g.n_pass}/{g.cells} cells within {tol}permil (worst={g.worst}permil)")
    changed = int(np.count_nonzero(w_before != m.W))
    out.check(CHECK_FROZEN, changed == 0,
              f"W bit-identical after the run ({DM * DM} cells)" if changed == 0
              else f"{changed} of {DM * DM} cells of W changed during the run")

    out.green = (f"NX-INTFP-LORA verdict=GREEN {n_ok}/{trained} -- integer LoRA/PEFT PROVEN (frozen base + "
                 "low-rank adapter grads), no float.")
    out.red = f"NX-INTFP-LORA verdict=RED {n_ok}/{trained} -- adapter Q-scaling bug or base W not frozen"
    out.others_failed(f"NX-INTFP-LORA verdict=RED {n_ok}/{trained}",
                      "adapter gradients gradchecked and base W frozen")
    out.metrics = {
        "loss_q": f.loss,
        "trained_params": trained,
        "total_params": total,
        "peft_permil": trained * 1000 // total,
    }
    for key, g in zip(("A", "B"), results, strict=True):
        out.metrics[key] = {
            "passed": g.passed,
            "cells_passed": g.n_pass,
            "cells": g.cells,
            "worst_permil": g.worst,
            "max_abs_grad": g.maxabs,
            "analytic": g.analytic.tolist(),  # Python ints
            "numeric": g.numeric.tolist(),
        }
    if theirs is not None:
        from nxgates.tensors.exact import judge_foreign  # only with --compare-grads

        out.metrics["compare_grads"] = judge_foreign(out, CHECK_FOREIGN, {"dA": dA, "dB": dB}, theirs, foreign)
    out.digest = partial(_digest, f.loss, results)  # hashed only if read (--repeat)
    _pin(out, f.loss, results, DM, R)
    return out


def _pin(out: GateOutput, loss: int, results: list[Gradcheck], DM: int, R: int) -> None:
    """The figures ``--baseline`` holds: the loss, and per tensor every cell's integers (shaped as the
    tensor, so a moved cell is named by its row and column) with the worst error and max|grad|."""
    out.fingerprint("loss_q", loss)
    for key, g, shape in zip(("A", "B"), results, ((DM, R), (R, DM)), strict=True):
        out.fingerprint_cells(f"{key}_analytic", g.analytic.reshape(shape))
        out.fingerprint_cells(f"{key}_numeric", g.numeric.reshape(shape))
        out.fingerprint(f"{key}_worst_permil", g.worst)
        out.fingerprint(f"{key}_max_abs_grad", g.maxabs)




def _cell_lines(g: Gradcheck) -> Iterator[str]:
    """Every cell's integers, one line each (``-v``)."""
    for i, (ana, num, rel) in enumerate(zip(g.analytic.tolist(), g.numeric.tolist(), g.rel.tolist(), strict=True)):
        yield f"   {g.name} cell {i} ana={ana} num={num} rel={rel}"


def _digest(loss: int, results: list[Gradcheck]) -> str:
    import hashlib

    h = hashlib.sha256(str(loss).encode())
    for g in results:
        h.update(g.analytic.astype("<i8").tobytes())
        h.update(g.numeric.astype("<i8").tobytes())
    return h.hexdigest()


def _seed_log() -> SeedLog:
    from nxgates.gates.lora.seedlog import SEED_LOG

    return SEED_LOG


GATE = GateDef(
    params=PARAMS,
    checks=(CHECK_A, CHECK_B, CHECK_FROZEN, CHECK_FOREIGN),
    optional_checks=(CHECK_FOREIGN,),
    run=run,
    faults=FAULTS,
    validate=validate,
    options=("scheduler", "inputs", "compare_grads"),
    seed_log=_seed_log,
    inputs=LORA_INPUTS,
)
