"""Float64 central differences against the f32 tape's gradients: the permil rule and the MLP's numeric
gradient, shared by the gates that check a gradient itself rather than its reproducibility.

A cell passes when ``|num - ana| * 1000 / max|ana| <= tol_permil``, as in the lora gate.

For the MLP the numeric gradient needs no whole forward per cell: moving ``W1[i,j]`` by ``+-d`` moves only
``h[i]`` (by ``d * x[j]``), hence ``y`` by ``W2[:, i] * e+-`` with ``e+- = relu(h[i] +- d x[j]) - relu(h[i])``;
moving ``W2[k,i]`` moves only ``y[k]``. The loss is quadratic in ``y``, so with the residual ``r = y - t``
and ``c = W2[:, i]``, ``O * (L(+d) - L(-d)) = 2 (r.c) (e+ - e-) + (c.c) (e+^2 - e-^2)``: each W1 cell is O(1)
once ``r.c`` and ``c.c`` are known per i, O(H*D + H*O) per example instead of O((H*D)^2) for whole forwards
(and O(H*D*O) for moving y cell by cell). The relu's kink is still crossed by the difference, not assumed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nxgates.core.mlp import Dims


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
    maxabs = max(float(np.max(np.abs(analytic))), 1e-30)  # no cells: numpy's ValueError (nothing to judge)
    with np.errstate(over="ignore", invalid="ignore"):  # a non-finite gradient (a diverged run) fails its cell
        rel = np.floor(np.abs(numeric - analytic) * 1000 / maxabs)
    rel = np.where(np.isfinite(rel), rel, np.inf)
    return Verdict(int(rel.size), int(np.count_nonzero(rel <= tol)), int(min(np.max(rel), 1 << 62)), maxabs)


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
