"""LoRA training in Q20 integers: the lora seed's "Train ONLY A,B", proven step by step.

The lora gate proves the adapter gradients at the initial weights. This gate runs the training loop the
seed names as the next step and proves what a gradient check cannot see: the update, its sign, which
gradients it uses, and that the base stays frozen. Model, data, forward and backward are
:mod:`nxgates.core.lora`'s (the seed's integers); each step then updates only the adapter, both tensors
from the same step's gradients, with C's truncating division: ``A[i] = A[i] - (lr_q * dA[i]) / S``, likewise ``B``.

* L1 ``loss_q`` strictly decreases at every step (losses are exact integers, step 0 included).
* L2 the base ``W`` is bit-identical after training.
* L3 at the final weights, the gradients the training loop hands to its update pass the lora gate's
  gradcheck (its rules, fast path) for A and B, and are the backward's at those weights bit for bit.
* L4 a second training run from scratch ends with the same adapter digest; when it does not, the FAIL line
  names the first step and cell where the two runs part.
* L5 (with ``--compare-grads``) another implementation's gradients at the final weights, ``dA`` and ``dB``,
  equal the ones L3 checked, integer for integer.

The default rate is the seed's, 0.1. ``lr_q = 0`` derives one from the starting model (:func:`derived_lr_q`):
0.1, or less where the loss's curvature there asks for less, so the loss falls at other sizes too; a clean
run whose loss did not fall at the seed's rate, above that one, is refused (:func:`refuse_unstable_rate`). An
intermediate that would leave int64's safe range stops the run (exit 2), never a wrapped number.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np

from nxgates.core import lora, q20
from nxgates.core.lora.gradcheck import first_unresolved, gradcheck_adapter
from nxgates.core.memory import require
from nxgates.core.q20 import S
from nxgates.core.train import q20_sgd_step
from nxgates.errors import ConfigError, ResourceError
from nxgates.gatekit import Fault, GateDef, GateOutput, IntParam, RunContext
from nxgates.gates._params import MODEL_PARAMS, check_model
from nxgates.gates._verdict import NamedRedOutput
from nxgates.tensors.lora_spec import LORA_INPUTS, lora_model, read_foreign_grads

PARAMS = {
    "T": MODEL_PARAMS["T"],
    "DM": MODEL_PARAMS["DM"],
    "R": MODEL_PARAMS["R"],
    "steps": IntParam("training steps (each: forward, backward, update A and B)", min=1, max=1 << 16),
    "lr_q": IntParam("learning rate in Q20 (104858 = 0.1); 0 = derived from the starting model: 0.1, or less "
                     "where the loss's curvature asks for less", min=0, max=1 << 40),
    "delta": MODEL_PARAMS["delta"],
    "tol_permil": MODEL_PARAMS["tol_permil"],
}

L1 = "L1 loss_q strictly decreases at every step"
L2 = "L2 base W bit-identical after training"
L3 = "L3 gradcheck of A and B at the final weights"
L4 = "L4 second run from scratch: same adapter digest"
L5 = "L5 final dA, dB EXACT vs the given file"

FAULTS = {
    "train-base": Fault("the update moves the frozen base W too (by its own gradient)", (L2,)),
    "wrong-sign": Fault("gradient ascent: A and B move up their gradients", (L1,)),
    "stale-grad": Fault("B is updated with the previous step's dB (the loss still falls at the seed size)",
                        (L3,)),
    "carry-state": Fault("the trainer keeps its adapter between runs: a second run resumes the first", (L4,)),
}

#: final A and B go into the JSON metrics as integer lists up to this many adapter cells
LIST_CELLS = 4096

#: the derived rate's ceiling, 0.1 in Q20 (the seed's rate)
LR_Q_CEILING = 104858
#: the derived rate is this share of 1/L, L a bound on the loss's curvature at the start (3/5: the seed's
#: sizes keep 0.1; across T <= 16, DM <= 96 the loss was seen to fall at up to twice 1/L)
LR_SHARE = (3, 5)


def _sum_squares(a: np.ndarray) -> int:
    """The exact sum of squares of an int64 tensor (Python ints: no wrap, the same on every machine)."""
    return sum(v * v for v in a.reshape(-1).tolist())


def derived_lr_q(m: lora.Model, f: lora.Forward) -> int:
    """``lr_q = 0``'s rate: 0.1 in Q20, or 3/5 of 1/L where that is less.

    L bounds the loss's curvature at the start, in Frobenius norms (real units): along a unit direction
    (U, V) of (A, B) the loss's second derivative is ``2|XUB + HV|^2 + 4<Y, XUV>`` with ``H = XA`` and ``Y``
    the output, so ``L = 2(|X|^2 |B|^2 + |H|^2) + 2|X||Y|``. Computed in integers, so every machine derives
    the same rate; the seed's sizes derive 0.1, its own rate.
    """
    nX, nB, nH, nY = (_sum_squares(t) for t in (m.x, m.B, f.h, f.y))
    # L * S^4 (the +1 rounds the square root up: L stays an upper bound)
    curvature = 2 * (nX * nB + nH * S * S) + 2 * S * S * (math.isqrt(nX * nY) + 1)
    return min(LR_Q_CEILING, LR_SHARE[0] * S**5 // (LR_SHARE[1] * curvature))


class Trainer:
    """One training loop over a :class:`lora.Model`; ``fault`` plants one of :data:`FAULTS`."""

    def __init__(self, m: lora.Model, lr_q: int, fault: str | None = None):
        self.m, self.lr_q, self.fault = m, lr_q, fault
        self.xw = q20.matmul(m.x, m.W, "x@W")  # frozen: computed once (unless the base is trained)
        self._previous_dB: np.ndarray | None = None

    def forward(self) -> lora.Forward:
        return lora.forward(self.m, self.xw)

    def gradients(self, f: lora.Forward) -> tuple[np.ndarray, np.ndarray]:
        """The gradients the update uses: the seed's backward (stale-grad: the previous dB for B)."""
        dA, dB = lora.backward(self.m, f)
        if self.fault == "stale-grad":
            used = dB if self._previous_dB is None else self._previous_dB
            self._previous_dB = dB
            return dA, used
        return dA, dB

    def step(self, f: lora.Forward) -> None:
        """Compute dA and dB at the current weights, then update both (and nothing else)."""
        m = self.m
        dA, dB = self.gradients(f)
        ascent = self.fault == "wrong-sign"
        if self.fault == "train-base":
            dW = q20.matmul_per_term(m.x.T, q20.mul(f.y, 2, "dy = 2y"), "dW = x^T dy")
            m.W = q20_sgd_step(m.W, dW, self.lr_q, "W")
            self.xw = q20.matmul(m.x, m.W, "x@W")
        m.A = q20_sgd_step(m.A, dA, self.lr_q, "A", ascent)
        m.B = q20_sgd_step(m.B, dB, self.lr_q, "B", ascent)


@dataclass
class Training:
    """One run: the model after ``steps`` updates, every loss, the final forward and gradients, and the
    adapter at every step (``A_steps[s]``: A after ``s`` updates, so step 0 is where the run started)."""

    model: lora.Model
    w_init: np.ndarray
    losses: list[int]
    final: lora.Forward
    dA: np.ndarray
    dB: np.ndarray
    A_steps: np.ndarray
    B_steps: np.ndarray

    def adapter_digest(self) -> tuple[str, str]:
        """sha256 of A's and of B's int64 little-endian bytes (row-major)."""
        return tuple(hashlib.sha256(np.ascontiguousarray(t, "<i8").tobytes()).hexdigest()
                     for t in (self.model.A, self.model.B))


def train(T: int, DM: int, R: int, steps: int, lr_q: int, ctx: RunContext, fault: str | None = None,
          carried: dict | None = None) -> Training:
    """Up to ``steps`` updates from the seed's initial weights, stopping at the first loss that does not
    fall (L1 has failed; going on would only run a rising loss into the int64 guard). ``carried`` is the
    carry-state fault's memory."""
    given = ctx.options.get("inputs")
    m = lora_model(given) if given is not None else lora.init_model(T, DM, R)
    if carried:  # the planted defect: resume the adapter an earlier run left behind
        m.A, m.B = carried["A"].copy(), carried["B"].copy()
    w_init = m.W.copy()
    trainer = Trainer(m, lr_q, fault)
    f = trainer.forward()
    losses = [f.loss]
    adapters = [(m.A.copy(), m.B.copy())]
    ctx.progress.start("training steps", steps)
    for _ in range(steps):
        trainer.step(f)
        f = trainer.forward()
        losses.append(f.loss)
        adapters.append((m.A.copy(), m.B.copy()))
        ctx.progress.advance()
        ctx.check_time()
        if losses[-1] >= losses[-2]:
            break  # L1 has failed: stop before a rising loss runs into the int64 guard
    dA, dB = trainer.gradients(f)
    if carried is not None:
        carried.update(A=m.A.copy(), B=m.B.copy())
    A_steps, B_steps = (np.stack(tensors) for tensors in zip(*adapters, strict=True))
    return Training(m, w_init, losses, f, dA, dB, A_steps, B_steps)


def where_runs_part(run1: Training, run2: Training) -> str:
    """The first step at which two runs' adapters differ, and the first cell there (A before B, row-major)
    with both runs' values; or how many steps each ran when they agree as far as both went."""
    n = min(len(run1.losses), len(run2.losses))
    for s in range(n):
        for name, one, two in (("A", run1.A_steps[s], run2.A_steps[s]), ("B", run1.B_steps[s], run2.B_steps[s])):
            differ = np.argwhere(one != two)
            if differ.size:
                i, j = (int(k) for k in differ[0])
                return f"run 1 vs run 2: first part at step {s}, {name}[{i}, {j}] {int(one[i, j])} vs {int(two[i, j])}"
    return f"run 1 ran {len(run1.losses) - 1} steps, run 2 {len(run2.losses) - 1}"


def validate(p: dict) -> None:
    """The model's limits, and room for both runs' adapters at every step (L4 compares them step by step)."""
    check_model(p)
    # both runs' adapters at every step, with room for one copy each (stacked; run 1's for its fingerprint)
    kept = 2 * 2 * (p["steps"] + 1) * 2 * p["DM"] * p["R"]
    require(8 * kept, f"lora-train at DM={p['DM']} R={p['R']} steps={p['steps']}")


def starting_rate(p: dict, ctx: RunContext) -> int:
    """The run's rate: ``lr_q`` as given, or derived from the starting model (lr_q = 0). A start where
    ``h = x@A`` is all zero is refused: B gets no gradient until A moves, and after training its gradient
    stays below what the Q20 gradcheck of L3 resolves (the seed's formulas give it at DM and R multiples of
    11); so are sizes whose curvature asks for a rate below one Q20 unit."""
    given = ctx.options.get("inputs")
    m = lora_model(given) if given is not None else lora.init_model(p["T"], p["DM"], p["R"])
    f = lora.forward(m)
    sizes = f"T={p['T']} DM={p['DM']} R={p['R']}"
    if not np.any(f.h):
        raise ConfigError(f"lora-train at {sizes}: h = x@A is zero at the start, so L3 could not resolve B's "
                          "gradient after training; use sizes whose DM or R is not a multiple of 11, or other inputs")
    if p["lr_q"]:
        return p["lr_q"]
    rate = stable_lr_q(p, ctx)
    if rate < 1:
        raise ConfigError(f"lora-train at {sizes}: the loss's curvature asks for a rate below one Q20 unit; "
                          "use smaller sizes")
    return rate


def stable_lr_q(p: dict, ctx: RunContext) -> int:
    """The rate ``lr_q = 0`` derives from the starting model (:func:`derived_lr_q`)."""
    given = ctx.options.get("inputs")
    m = lora_model(given) if given is not None else lora.init_model(p["T"], p["DM"], p["R"])
    return derived_lr_q(m, lora.forward(m))


def refuse_unstable_rate(p: dict, ctx: RunContext, lr_q: int, naming: str) -> None:
    """A clean run whose loss did not fall at the seed's default rate, above the one these sizes allow, is
    refused, not RED: that rate was made for the seed's sizes, and the user broke nothing (``lr_q = 0``
    derives a rate at which the loss falls). A rate or inputs the user chose keep their verdict."""
    if ctx.fault is not None or ctx.options.get("inputs") is not None or p["lr_q"] != LR_Q_CEILING:
        return  # a planted fault, the user's own inputs or rate (0.1 is the seed's): the verdict stands
        return
    stable = stable_lr_q(p, ctx)
    if lr_q > stable:
        raise ConfigError(f"lora-train at {naming}: the loss did not fall at lr_q={lr_q}, above the rate {stable} "
                          "these sizes allow (3/5 of 1/L, L the loss's curvature at the start); use lr_q=0 to "
                          f"derive it, or lr_q <= {stable}")


#: a failed final gradcheck (L3) of a tensor whose max|grad| is under this many times the central difference's
#: rounding is refused (:func:`refuse_unresolvable`): clean runs were seen to fail L3 up to 6.1 times it, and
#: the seed's sizes and the presets sit above 150
RESOLUTION = 16


def refuse_unresolvable(f: lora.Forward, grads: tuple[np.ndarray, np.ndarray], results: list, delta: int,
                        naming: str) -> None:
    """Refuse, rather than FAIL, a final gradcheck that failed on a tensor it cannot resolve
    (:func:`~nxgates.core.lora.gradcheck.first_unresolved`): L3's FAIL would say nothing about the loop."""
    bad = first_unresolved(f, grads, results, delta, RESOLUTION)
    if bad is not None:
        raise ConfigError(f"lora-train at {naming}: the final d{bad.name} is too small for L3's Q20 gradcheck to "
                          f"resolve (max|grad| {bad.largest} < {RESOLUTION} x the central difference's rounding "
                          f"{bad.rounding}); use other steps, lr_q or delta")


def run(ctx: RunContext) -> GateOutput:
    p = ctx.params
    naming = f"T={p['T']} DM={p['DM']} R={p['R']} steps={p['steps']} lr_q={p['lr_q']} delta={p['delta']}"
    try:
        return _run(ctx, p)
    except q20.Q20Overflow as exc:
        raise ResourceError(f"lora-train at {naming}: {exc}; use a smaller lr_q, steps or sizes") from None


def _run(ctx: RunContext, p: dict) -> GateOutput:
    T, DM, R, steps = p["T"], p["DM"], p["R"], p["steps"]
    lr_q = starting_rate(p, ctx)
    delta, tol = p["delta"], p["tol_permil"]
    out = NamedRedOutput((L1, L2, L3, L4))
    out.info(f"=== nx_intfp_lora_train: train ONLY the LoRA adapter (rank {R}) in Q20 INTEGER, no float: "
             f"{steps} steps of A -= (lr_q * dA) / S, lr_q={lr_q} ===")
    foreign = ctx.options.get("compare_grads")
    theirs = read_foreign_grads(foreign, p) if foreign is not None else None
    carried = {} if ctx.fault == "carry-state" else None
    run1 = train(T, DM, R, steps, lr_q, ctx, ctx.fault, carried)
    for s, loss in enumerate(run1.losses):
        out.info(f" step {s}: L_q32={loss}" + ("" if s == 0 else f" (delta {loss - run1.losses[s - 1]})"))

    done = len(run1.losses) - 1
    fell = run1.losses[-1] < run1.losses[-2]
    if not fell:
        refuse_unstable_rate(p, ctx, lr_q, f"T={T} DM={DM} R={R} steps={steps}")
    out.check(L1, fell, f"{run1.losses[0]} -> {run1.losses[-1]} over {steps} steps" if fell
              else f"loss did not fall at step {done} ({run1.losses[-2]} -> {run1.losses[-1]}); training stopped there")

    changed = int(np.count_nonzero(run1.w_init != run1.model.W))
    out.check(L2, changed == 0, f"W bit-identical ({DM * DM} cells)" if changed == 0
              else f"{changed} of {DM * DM} cells of W changed during training")

    m, f = run1.model, run1.final
    now = lora.backward(m, f)  # the backward's gradients at the final weights
    ctx.progress.start("gradcheck cells", DM * R + R * DM)
    results = gradcheck_adapter(m, f, (run1.dA, run1.dB), delta, tol, ctx)
    ctx.progress.stop()
    refuse_unresolvable(f, now, results, delta, f"T={T} DM={DM} R={R} steps={steps} lr_q={lr_q} delta={delta}")
    for g in results:
        for i in np.flatnonzero(g.rel > tol)[:16]:
            out.detail(f" {g.name} cell {i} ana={g.analytic[i]} num={g.numeric[i]} rel={g.rel[i]}")
        out.info(f" final {g.name}: {g.n_pass}/{g.cells} (worst={g.worst}permil of max|grad|={g.maxabs})")
    # the gradcheck's tolerance cannot see a gradient one step stale where a step moves it little (tiny
    # sizes): the gradients the loop uses must also be the backward's at these weights, bit for bit
    stale = [name for name, used, ours in zip("AB", (run1.dA, run1.dB), now, strict=True)
             if not np.array_equal(used, ours)]
    out.check(L3, all(g.passed for g in results) and not stale,
              ", ".join(f"{g.name} {g.n_pass}/{g.cells} (worst={g.worst}permil)" for g in results)
              + "".join(f"; the loop's d{name} is not the backward's at the final weights" for name in stale))

    run2 = train(T, DM, R, steps, lr_q, ctx, ctx.fault, carried)
    (a1, b1), (a2, b2) = run1.adapter_digest(), run2.adapter_digest()
    same = (a1, b1) == (a2, b2)
    out.check(L4, same, f"A sha256 {a1[:16]}, B sha256 {b1[:16]} both runs" if same
              else f"{where_runs_part(run1, run2)}; run 2 ended at A {a2[:16]} B {b2[:16]}, "
                   f"run 1 at A {a1[:16]} B {b1[:16]}")

    trained = 2 * DM * R
    out.green = (f"NX-INTFP-LORA-TRAIN GREEN -- {steps} integer steps train ONLY A,B: loss falls every step, "
                 "base W frozen, final adapter grads gradchecked, reproducible.")
    out.red = "NX-INTFP-LORA-TRAIN RED -- the adapter training loop is wrong (see FAIL lines)"
    out.others_failed("NX-INTFP-LORA-TRAIN RED", f"{steps} integer steps train ONLY A,B: loss falls every step, "
                      "base W frozen, final adapter grads gradchecked, reproducible")
    out.metrics = {
        "losses": [int(v) for v in run1.losses],
        "steps": steps,
        "lr_q": lr_q,
        "A_sha256": a1,
        "B_sha256": b1,
        "trained_params": trained,
        "w_changed_cells": changed,
        "final_worst_permil": {"A": results[0].worst, "B": results[1].worst},
    }
    if trained <= LIST_CELLS:
        out.metrics["A"] = [int(v) for v in m.A.reshape(-1)]
        out.metrics["B"] = [int(v) for v in m.B.reshape(-1)]
    if theirs is not None:
        ours = {"dA": run1.dA, "dB": run1.dB}
        from nxgates.tensors.exact import judge_foreign  # only with --compare-grads

        out.metrics["compare_grads"] = judge_foreign(out, L5, ours, theirs, foreign)
    h = hashlib.sha256(" ".join(map(str, run1.losses)).encode())
    h.update(f"{a1}{b1}".encode())
    out.digest = h.hexdigest()
    # what --baseline holds: every step's loss and adapter (a moved cell is named by its step, row and
    # column), and the final gradcheck's worst errors
    out.fingerprint_cells("losses", np.array(run1.losses, dtype=np.int64))
    out.fingerprint_cells("A_steps", run1.A_steps)
    out.fingerprint_cells("B_steps", run1.B_steps)
    out.fingerprint("A_final_worst_permil", results[0].worst)
    out.fingerprint("B_final_worst_permil", results[1].worst)
    return out


GATE = GateDef(
    params=PARAMS,
    checks=(L1, L2, L3, L4, L5),
    optional_checks=(L5,),
    run=run,
    faults=FAULTS,
    validate=validate,
    options=("inputs", "compare_grads"),
    inputs=LORA_INPUTS,
)
