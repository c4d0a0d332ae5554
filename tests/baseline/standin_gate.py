"""A stand-in gate that pins a scalar, a text and a cell array, for proving baselines end to end before the
built-in gates pin theirs. ``NXGATES_STANDIN_MOVE`` plants a change in one figure: ``loss`` (the scalar),
``name`` (the text), ``cell`` (one cell of ``grads``), ``big-cell`` (one cell of ``big``, kept as blocks only)
or ``none`` (the gate pins nothing)."""

from __future__ import annotations

import os

import numpy as np

from nxgates.gatekit import ChoiceParam, GateDef, GateOutput, IntParam, RunContext

CHECK = "figures computed"

TABLE = {
    "description": "stand-in gate pinning figures",
    "params": {"N": 4, "M": 3, "scale": 7, "executor": "auto"},
    "presets": {"large": {"N": 40, "M": 30}},
}


def run(ctx: RunContext) -> GateOutput:
    n, m, scale = ctx.params["N"], ctx.params["M"], ctx.params["scale"]
    move = os.environ.get("NXGATES_STANDIN_MOVE", "")
    out = GateOutput()
    grads = (np.arange(n * m, dtype=np.int64).reshape(n, m) * scale) - 5
    big = np.arange(1000, dtype=np.int64) * scale
    loss = int(grads.sum()) * 1_000_003
    if move == "loss":
        loss += 1
    if move == "cell":
        grads[n - 1, m - 1] += 1
    if move == "big-cell":
        big[700] -= 1
    out.check(CHECK, True, f"{n}x{m} cells")
    out.metrics = {"loss": loss, "executor": "thread", "workers": 2, "solve_seconds": 0.01}
    if move != "none":
        out.fingerprint("loss", loss)
        out.fingerprint("name", "standin-v2" if move == "name" else "standin")
        out.fingerprint_cells("grads", grads)
        out.fingerprint_cells("big", big)
    return out


GATE = GateDef(
    params={"N": IntParam("rows", max=1000), "M": IntParam("columns", max=1000),
            "scale": IntParam("a factor", max=1000),
            "executor": ChoiceParam("how (never what)", ("auto", "thread", "process"))},
    checks=(CHECK,),
    run=run,
)
