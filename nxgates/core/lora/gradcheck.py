"""The lora gradcheck's verdict per cell, and the seed's own algorithm: one whole forward per perturbation.

The analytic adapter gradients are checked against central differences ``num = (L(+delta) - L(-delta)) /
(2 delta)``, cell by cell, with the seed's truncating divisions. :func:`gradcheck_adapter` is the whole
check for callers outside this gate (lora-train, crosscheck): serial, either algorithm.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

import nxgates.core.lora.fast as fast
from nxgates.core import q20
from nxgates.core.lora.model import Forward, Model, forward
from nxgates.core.pacing import Pacer
from nxgates.core.q20 import tdiv

#: the tensors' names in the seed's lines, in the order it checks them
NAMES = ("A (lora)", "B (lora)")


@dataclass(eq=False, repr=False)
class Gradcheck:
    """One tensor's gradcheck, with every cell's integers (row-major, as the seed walks them)."""

    name: str
    analytic: np.ndarray
    numeric: np.ndarray
    rel: np.ndarray
    maxabs: int
    tol_permil: int

    @property
    def cells(self) -> int:
        return int(self.analytic.size)

    @property
    def n_pass(self) -> int:
        return int(np.count_nonzero(self.rel <= self.tol_permil))

    @property
    def worst(self) -> int:
        return int(self.rel.max()) if self.rel.size else 0

    @property
    def passed(self) -> bool:
        return self.n_pass == self.cells


def judge(name: str, analytic: np.ndarray, diffs: np.ndarray, delta: int, tol: int) -> Gradcheck:
    """Turn loss differences ``L(+d) - L(-d)`` into the seed's truncated ``num`` and ``rel`` per cell."""
    analytic = analytic.reshape(-1)
    maxabs = max(1, int(np.max(np.abs(analytic))) if analytic.size else 1)
    num = tdiv(diffs.reshape(-1), 2 * delta)
    err = np.abs(q20.add(num, -analytic, "num - ana"))
    rel = tdiv(q20.mul(err, 1000, "|num - ana| * 1000"), maxabs)
    return Gradcheck(name, analytic, num, rel, maxabs, tol)


def diffs_naive(m: Model, tensor: np.ndarray, delta: int, pace: Pacer) -> np.ndarray:
    """``L(+delta) - L(-delta)`` for every cell of ``tensor`` (A or B of ``m``), perturbing it in place."""
    flat = tensor.reshape(-1)  # a view: writes move the model's tensor
    out = np.zeros(flat.size, dtype=np.int64)
    for i in range(flat.size):
        save = int(flat[i])
        flat[i] = save + delta
        lp = forward(m).loss
        flat[i] = save - delta
        lm = forward(m).loss
        flat[i] = save
        out[i] = int(q20.add(np.int64(lp), np.int64(-lm), "Lp - Lm"))
        pace.advance(1)
        if i % 64 == 63:
            pace.check_time()
    return out


def adapter_diffs(m: Model, f: Forward, delta: int, pace: Pacer, algorithm: str) -> tuple[np.ndarray, np.ndarray]:
    """``L(+delta) - L(-delta)`` for every cell of A and of B, in one process, by ``algorithm``."""
    if algorithm == "naive":
        return diffs_naive(m, m.A, delta, pace), diffs_naive(m, m.B, delta, pace)
    return fast.diffs_fast_a(m, f, delta, pace), fast.diffs_fast_b(m, f, delta, pace)


def gradcheck_adapter(m: Model, f: Forward, grads: tuple[np.ndarray, np.ndarray], delta: int, tol: int,
                      pace: Pacer, algorithm: str = "fast") -> list[Gradcheck]:
    """The gradcheck of ``grads`` (dA, dB) at the model ``m`` with its forward ``f``: one verdict per tensor."""
    diffs = adapter_diffs(m, f, delta, pace, algorithm)
    return [judge(name, g, d, delta, tol) for name, g, d in zip(NAMES, grads, diffs, strict=True)]


#: the seed's central-difference step, in Q20 units: a finer step's rounding is the user's choice
SEED_DELTA = 2097


class Unresolved(NamedTuple):
    """A tensor whose gradcheck failed where its gradients are too small for the central difference."""

    name: str  #: "A" or "B"
    largest: int  #: its largest |gradient|
    rounding: int  #: the most the central difference's truncation moves ``num``


def first_unresolved(f: Forward, grads: tuple[np.ndarray, np.ndarray], results: list[Gradcheck], delta: int,
                     times: int) -> Unresolved | None:
    """The first tensor whose gradcheck failed on gradients within ``times`` the rounding of the central
    difference, or None. Each side of a central difference truncates every output cell by under one unit,
    which moves ``L(+delta) - L(-delta)`` by up to twice a row's sum of |y|, so ``num`` by up to
    ``2 max_t sum_j |y[t,j]| / delta``: where a tensor's largest gradient is within ``times`` that, a FAIL says
    that rounding, not a wrong gradient. A step finer than the seed's is the user's choice of resolution: its
    rounding is taken at the seed's step, so its FAIL stands."""
    widest = max((sum(abs(v) for v in row) for row in f.y.tolist()), default=0)
    rounding = 2 * widest // max(delta, SEED_DELTA) + 1
    for name, g, check in zip("AB", grads, results, strict=True):
        largest = int(np.max(np.abs(g))) if g.size else 0
        if not check.passed and largest < times * rounding:
            return Unresolved(name, largest, rounding)
    return None
