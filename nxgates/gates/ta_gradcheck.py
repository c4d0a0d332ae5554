"""The f32 tape autograd against float64 central differences: each op, then the MLP's per-example grads.

parallel-grad's T1 proves parallel equals serial, but a wrong gradient computed the same way twice passes
it. This gate checks the gradients themselves. The float64 reference functions below share no code with
the tape. A cell passes when ``|num - ana| * 1000 / max|ana| <= tol_permil``, as in the lora gate.

The MLP's numeric gradient is :func:`nxgates.core.numeric.mlp_numeric`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from nxgates.core.memory import require
from nxgates.core.mlp import Dims, MlpInputs, example_grads, init_data, reduction_of
from nxgates.core.numeric import Verdict, compare, mlp_numeric
from nxgates.core.tape import F32, Node, Tape, tree_sum
from nxgates.errors import ConfigError
from nxgates.gatekit import Fault, GateDef, GateOutput, IntParam, RunContext
from nxgates.gates._judgeable import at_target, judged_cells
from nxgates.gates._params import REDUCTION_PARAM, mlp_params
from nxgates.gates._tape_faults import ReluGradEverywhereTape
from nxgates.gates._verdict import NamedRedOutput
from nxgates.tensors.mlp_spec import MLP_INPUTS

PARAMS = {
    **mlp_params(IntParam("examples whose gradients are checked", min=1, max=1 << 16), max_width=1 << 16,
                 max_out=1 << 12, prefix="MLP "),
    "step_exp": IntParam("central-difference step d = 10^-step_exp (float64)", min=1, max=12),
    "tol_permil": IntParam("a cell passes when |num - ana| * 1000 / max|grad| <= this", min=0, max=1000),
    "reduction": REDUCTION_PARAM,
}

FAULTS = {
    "relu-grad": Fault("the tape's relu passes the gradient through negative inputs (derivative 1 everywhere)",
                       ("op relu", "MLP per-example grads")),
}


def tape_for(fault: str | None, capacity: int, reduce: Callable[[np.ndarray, int], np.ndarray] = tree_sum) -> Tape:
    """The tape a run differentiates on: relu-grad plants its wrong derivative through a tape subclass."""
    return (ReluGradEverywhereTape if fault == "relu-grad" else Tape)(capacity, reduce=reduce)


def _values(n: int, salt: int) -> np.ndarray:
    """Deterministic float32 inputs in [-13/16, 13/16], never 0 (relu's kink stays out of reach of d)."""
    i = np.arange(n, dtype=np.int64)
    return ((((i * 7 + salt) % 13) * 2 - 13) / 16).astype(F32)


@dataclass
class OpCase:
    """One op under test: its tape form, its float64 reference, and the input shapes."""

    name: str
    shapes: tuple[tuple[int, ...], ...]
    tape_op: Callable[[Tape, list[Node]], Node]
    reference: Callable[[list[np.ndarray]], np.ndarray]


OPS = [
    OpCase("matvec", ((5, 7), (7,)), lambda t, n: t.matvec(n[0], n[1]), lambda a: a[0] @ a[1]),
    OpCase("matmul", ((3, 4), (4, 5)), lambda t, n: t.matmul(n[0], n[1]), lambda a: a[0] @ a[1]),
    OpCase("add", ((6,), (6,)), lambda t, n: t.add(n[0], n[1]), lambda a: a[0] + a[1]),
    OpCase("mul", ((6,), (6,)), lambda t, n: t.mul(n[0], n[1]), lambda a: a[0] * a[1]),
    OpCase("relu", ((9,),), lambda t, n: t.relu(n[0]), lambda a: np.maximum(a[0], 0.0)),
    OpCase("sum", ((2, 5),), lambda t, n: t.sum(n[0]), lambda a: np.sum(a[0])),
    OpCase("mse", ((4,), (4,)), lambda t, n: t.mse(n[0], n[1]), lambda a: np.mean((a[0] - a[1]) ** 2)),
]


#: every check the gate records: one per op, then the MLP's
CHECKS = (*(f"op {c.name}" for c in OPS), "MLP per-example grads")


def check_op(case: OpCase, step: float, tol: int, fault: str | None,
             reduce: Callable[[np.ndarray, int], np.ndarray] = tree_sum) -> Verdict:
    """L = sum(op(inputs) * weights); tape gradient of every input vs float64 central differences."""
    inputs = [_values(int(np.prod(s)), 3 + 2 * k).reshape(s) for k, s in enumerate(case.shapes)]
    out_shape = np.shape(case.reference([x.astype(np.float64) for x in inputs]))
    weights = _values(int(np.prod(out_shape)), 11).reshape(out_shape)

    tape = tape_for(fault, 4096, reduce)
    leaves = [tape.leaf(x) for x in inputs]
    loss = tape.sum(tape.mul(case.tape_op(tape, leaves), tape.leaf(weights, requires_grad=False)))
    tape.backward(loss)
    analytic = np.concatenate([tape.grad(n).reshape(-1) for n in leaves])

    def f64_loss(args: list[np.ndarray]) -> float:
        return float(np.sum(case.reference(args) * weights.astype(np.float64)))

    numeric = []
    base = [x.astype(np.float64) for x in inputs]
    for k, x in enumerate(base):
        for idx in range(x.size):
            moved = []
            for sign in (1.0, -1.0):
                args = [a.copy() for a in base]
                args[k].reshape(-1)[idx] += sign * step
                moved.append(f64_loss(args))
            numeric.append((moved[0] - moved[1]) / (2 * step))
    return compare(analytic, np.array(numeric), tol)


def validate(p: dict) -> None:
    dims = Dims.of(p)
    require(8 * (4 * dims.n_params + (1 << 23)) + 4 * p["B"] * (dims.D + dims.O),
            f"ta-gradcheck at D={p['D']} H={p['H']} O={p['O']}")


def run(ctx: RunContext) -> GateOutput:
    p = ctx.params
    step, tol = 10.0 ** -p["step_exp"], p["tol_permil"]
    out = NamedRedOutput(CHECKS)
    out.info(f"nx_ta_gradcheck: f32 tape autograd vs float64 central differences (d=1e-{p['step_exp']}, "
             f"tol={tol}permil of max|grad|)")
    ok = 0
    for case in OPS:
        v = check_op(case, step, tol, ctx.fault, reduction_of(p))
        ok += v.passed
        out.check(f"op {case.name}", v.passed,
                  f"{v.n_pass}/{v.cells} cells (worst={v.worst}permil of max|grad|={v.maxabs:.6g})")
        _pin(out, case.name, v)
        ctx.check_time()

    dims, B = Dims.of(p), p["B"]
    w, x, t = init_data(dims, B, MlpInputs.of(ctx.options))
    tape = tape_for(ctx.fault, dims.arena, reduction_of(p))
    grads = np.empty((B, dims.n_params), F32)
    cells = n_pass = worst = at_kink = 0
    bad, on_target = [], []
    ctx.progress.start("MLP examples", B)
    for b in range(B):
        example_grads(tape, dims, w, x[b], t[b], grads[b])
        ctx.progress.advance()
        ctx.check_time()
        if at_target(dims, w, x[b], t[b], tol):  # its gradient is float32's rounding (see _judgeable)
            on_target.append(b)
            continue
        keep = judged_cells(dims, w, x[b])  # not the cells at relu's kink
        v = compare(grads[b][keep], mlp_numeric(dims, w, x[b], t[b], step)[keep], tol)
        at_kink += dims.n_params - v.cells
        cells, n_pass, worst = cells + v.cells, n_pass + v.n_pass, max(worst, v.worst)
        if not v.passed:
            bad.append(b)
    if not cells:
        raise ConfigError(f"ta-gradcheck at D={p['D']} H={p['H']} O={p['O']} B={B}: every example is at its target "
                          "to float32's rounding, so no MLP gradient can be judged; use other sizes or a larger B")
    out.info(f" MLP per-example: {n_pass}/{cells} cells over {B} examples (worst={worst}permil)")
    mlp_ok = n_pass == cells
    kinks = (f"; {at_kink} cells at relu's kink not judged" if at_kink else "") + (
        f"; examples {', '.join(map(str, on_target[:8]))} at their target to float32's rounding not judged"
        if on_target else "")
    out.check("MLP per-example grads", mlp_ok,
              (f"{B} examples x {dims.n_params} cells, worst={worst}permil" if mlp_ok
               else f"{cells - n_pass} cells wrong in examples {', '.join(map(str, bad[:8]))}") + kinks)
    total = len(OPS) + 1
    passed = ok + mlp_ok
    out.green = f"TA-GRADCHECK GREEN {passed}/{total} -- every autograd op and the MLP match float64 differences"
    out.red = f"TA-GRADCHECK RED {passed}/{total} -- an autograd gradient is wrong"
    out.others_failed(f"TA-GRADCHECK RED {passed}/{total}", "every autograd op and the MLP match float64 "
                      "differences")
    out.metrics = {"ops_passed": ok, "ops": len(OPS), "mlp_cells": cells, "mlp_cells_passed": n_pass,
                   "mlp_worst_permil": worst}
    out.digest = f"{ok}:{n_pass}:{worst}"
    out.fingerprint("mlp_cells", cells)
    out.fingerprint("mlp_cells_passed", n_pass)
    out.fingerprint("mlp_worst_permil", worst)
    return out


def _pin(out: GateOutput, op: str, v: Verdict) -> None:
    """An op's figures for ``--baseline``: cells checked and passed, the worst error and max|grad|."""
    out.fingerprint(f"{op}_cells", v.cells)
    out.fingerprint(f"{op}_cells_passed", v.n_pass)
    out.fingerprint(f"{op}_worst_permil", v.worst)
    out.fingerprint(f"{op}_max_abs_grad", v.maxabs)


GATE = GateDef(
    params=PARAMS,
    checks=CHECKS,
    run=run,
    faults=FAULTS,
    validate=validate,
    options=("inputs",),
    inputs=MLP_INPUTS,
)
