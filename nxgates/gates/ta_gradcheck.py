"""The f32 tape autograd against float64 central differences: each op, then the MLP's per-example grads.

parallel-grad's T1 proves parallel equals serial, but a wrong gradient computed the same way twice passes
it. This gate checks the gradients themselves. The float64 reference functions below share no code with
the tape. A cell passes when ``|num - ana| * 1000 / max|ana| <= tol_permil``, as in the lora gate.

For the MLP the numeric gradient needs no whole forward per cell: moving ``W1[i,j]`` by ``+-d`` moves only
``h[i]`` (by ``d * x[j]``), hence ``y`` by ``W2[:, i] * e+-`` with ``e+- = relu(h[i] +- d x[j]) - relu(h[i])``;
moving ``W2[k,i]`` moves only ``y[k]``. The loss is quadratic in ``y``, so with the residual ``r = y - t``
and ``c = W2[:, i]``, ``O * (L(+d) - L(-d)) = 2 (r.c) (e+ - e-) + (c.c) (e+^2 - e-^2)``: each W1 cell is O(1)
once ``r.c`` and ``c.c`` are known per i, O(H*D + H*O) per example instead of O((H*D)^2) for whole forwards
(and O(H*D*O) for moving y cell by cell). The relu's kink is still crossed by the difference, not assumed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from nxgates.core.memory import require
from nxgates.core.mlp import Dims, example_grads, init_data
from nxgates.core.tape import F32, Node, Tape
from nxgates.gatekit import Fault, GateDef, GateOutput, IntParam, RunContext

PARAMS = {
    "D": IntParam("MLP input width", min=1, max=1 << 16),
    "H": IntParam("MLP hidden width", min=1, max=1 << 16),
    "O": IntParam("MLP output width", min=1, max=1 << 12),
    "B": IntParam("examples whose gradients are checked", min=1, max=1 << 16),
    "step_exp": IntParam("central-difference step d = 10^-step_exp (float64)", min=1, max=12),
    "tol_permil": IntParam("a cell passes when |num - ana| * 1000 / max|grad| <= this", min=0, max=1000),
}

FAULTS = {
    "relu-grad": Fault("the tape's relu passes the gradient through negative inputs (derivative 1 everywhere)",
                       ("op relu", "MLP per-example grads")),
}


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


@dataclass
class Verdict:
    cells: int
    n_pass: int
    worst: int
    maxabs: float

    @property
    def passed(self) -> bool:
        return self.cells > 0 and self.n_pass == self.cells


def compare(analytic: np.ndarray, numeric: np.ndarray, tol: int) -> Verdict:
    """The lora gate's rule in floating point: error in permil of the largest analytic gradient."""
    analytic = np.asarray(analytic, np.float64).reshape(-1)
    numeric = np.asarray(numeric, np.float64).reshape(-1)
    maxabs = max(float(np.max(np.abs(analytic))) if analytic.size else 0.0, 1e-30)
    rel = np.floor(np.abs(numeric - analytic) * 1000 / maxabs)
    rel = np.where(np.isfinite(rel), rel, np.inf)
    return Verdict(int(rel.size), int(np.count_nonzero(rel <= tol)), int(min(np.max(rel), 1 << 62)), maxabs)


def check_op(case: OpCase, step: float, tol: int, fault: str | None) -> Verdict:
    """L = sum(op(inputs) * weights); tape gradient of every input vs float64 central differences."""
    inputs = [_values(int(np.prod(s)), 3 + 2 * k).reshape(s) for k, s in enumerate(case.shapes)]
    out_shape = np.shape(case.reference([x.astype(np.float64) for x in inputs]))
    weights = _values(int(np.prod(out_shape)), 11).reshape(out_shape)

    tape = Tape(4096, fault=fault)
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


def mlp_numeric(dims: Dims, w: np.ndarray, x: np.ndarray, t: np.ndarray, step: float) -> np.ndarray:
    """Central differences of the float64 MLP loss for every weight, O(H*D + H*O) (see the module doc)."""
    D, H, O = dims.D, dims.H, dims.O
    w = w.astype(np.float64)
    W1, W2 = w[: dims.n_w1].reshape(H, D), w[dims.n_w1 :].reshape(O, H)
    x, t = x.astype(np.float64), t.astype(np.float64)
    h = W1 @ x
    a = np.maximum(h, 0.0)
    y = W2 @ a

    def loss(ys: np.ndarray) -> np.ndarray:  # ys (..., O)
        return np.mean((ys - t) ** 2, axis=-1)

    rc, cc = W2.T @ (y - t), np.sum(W2 * W2, axis=0)  # per i: r.c and c.c, c = W2[:, i]
    g1 = np.empty((H, D))
    rows = max(1, (1 << 20) // max(1, D))  # bound the (rows, D) temporaries: about 6 alive, 8 MiB each
    for i0 in range(0, H, rows):
        i = slice(i0, i0 + rows)
        e_plus, e_minus = (np.maximum(h[i, None] + sign * step * x[None, :], 0.0) - a[i, None] for sign in (1.0, -1.0))
        moved = 2 * rc[i, None] * (e_plus - e_minus) + cc[i, None] * (e_plus * e_plus - e_minus * e_minus)
        g1[i] = moved / O / (2 * step)  # O * (L(+d) - L(-d)), over O, over 2d
    moved = []
    for sign in (1.0, -1.0):
        dy = np.eye(O)[:, None, :] * (sign * step * a)[None, :, None]  # y[k] moves by +-d a[i]: (O, H, O)
        moved.append(loss(y[None, None, :] + dy))
    g2 = (moved[0] - moved[1]) / (2 * step)
    return np.concatenate([g1.reshape(-1), g2.reshape(-1)])


def validate(p: dict) -> None:
    dims = Dims(p["D"], p["H"], p["O"])
    require(8 * (4 * dims.n_params + (1 << 23)) + 4 * p["B"] * (dims.D + dims.O),
            f"ta-gradcheck at D={p['D']} H={p['H']} O={p['O']}")


def run(ctx: RunContext) -> GateOutput:
    p = ctx.params
    step, tol = 10.0 ** -p["step_exp"], p["tol_permil"]
    out = GateOutput()
    out.info(f"nx_ta_gradcheck: f32 tape autograd vs float64 central differences (d=1e-{p['step_exp']}, "
             f"tol={tol}permil of max|grad|)")
    ok = 0
    for case in OPS:
        v = check_op(case, step, tol, ctx.fault)
        ok += v.passed
        out.check(f"op {case.name}", v.passed,
                  f"{v.n_pass}/{v.cells} cells (worst={v.worst}permil of max|grad|={v.maxabs:.6g})")
        ctx.check_time()

    dims, B = Dims(p["D"], p["H"], p["O"]), p["B"]
    w, x, t = init_data(dims, B)
    tape = Tape(dims.arena, fault=ctx.fault)
    grads = np.empty((B, dims.n_params), F32)
    cells = n_pass = worst = 0
    bad = []
    ctx.progress.start("MLP examples", B)
    for b in range(B):
        example_grads(tape, dims, w, x[b], t[b], grads[b])
        v = compare(grads[b], mlp_numeric(dims, w, x[b], t[b], step), tol)
        cells, n_pass, worst = cells + v.cells, n_pass + v.n_pass, max(worst, v.worst)
        if not v.passed:
            bad.append(b)
        ctx.progress.advance()
        ctx.check_time()
    out.info(f" MLP per-example: {n_pass}/{cells} cells over {B} examples (worst={worst}permil)")
    mlp_ok = n_pass == cells
    out.check("MLP per-example grads", mlp_ok,
              f"{B} examples x {dims.n_params} cells, worst={worst}permil" if mlp_ok
              else f"{cells - n_pass} cells wrong in examples {', '.join(map(str, bad[:8]))}")
    total = len(OPS) + 1
    passed = ok + mlp_ok
    out.green = f"TA-GRADCHECK GREEN {passed}/{total} -- every autograd op and the MLP match float64 differences"
    out.red = f"TA-GRADCHECK RED {passed}/{total} -- an autograd gradient is wrong"
    out.metrics = {"ops_passed": ok, "ops": len(OPS), "mlp_cells": cells, "mlp_cells_passed": n_pass,
                   "mlp_worst_permil": worst}
    out.digest = f"{ok}:{n_pass}:{worst}"
    return out


GATE = GateDef(
    params=PARAMS,
    checks=(*(f"op {c.name}" for c in OPS), "MLP per-example grads"),
    run=run,
    faults=FAULTS,
    validate=validate,
)
