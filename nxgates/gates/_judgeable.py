"""Which float32 MLP gradients a float64 central difference can judge.

Two places hold no information a comparison could use, and the seed's periodic formulas reach both at some
sizes: a weight of W1 whose hidden unit sits at relu's kink, and an example whose output already equals its
target to float32's rounding. ta-gradcheck and dp-train's D4 judge every other cell and count these apart.

* At the kink: where a unit's pre-activation ``h = W1 @ x`` is zero to within the rounding of the tape's
  float32 sum, float32 and float64 may put ``h`` on different sides of relu's kink, so the analytic relu mask
  of its W1 row is a coin toss (the formulas give ``h`` exactly 0 at some sizes). A coarse step's own
  truncation error, crossing the kink included, stays judged: it is the step's to show.
* At the target: where ``y - t`` is within float32's rounding of ``y`` and ``t``, the analytic gradient is
  that rounding, not the derivative.
"""

from __future__ import annotations

import numpy as np

from nxgates.core.mlp import Dims

#: float32's relative rounding, doubled
F32_MARGIN = 2.0**-23
#: a pre-activation this close to zero, relative to the sum of its terms' sizes, is zero in exact arithmetic:
#: float32 inputs rounded from the formulas' fractions leave such a unit a few hundredths of a float32 ULP off,
#: while a unit the formulas put off zero sits many ULPs away
KINK = 2.0**-22


def judged_cells(dims: Dims, w: np.ndarray, x: np.ndarray) -> np.ndarray:
    """A mask over the weights ``[W1, W2]``: False for W1's rows whose unit is at the kink for input ``x`` (its
    ``h`` within :data:`KINK` of the sum of its terms' sizes), True elsewhere."""
    W1 = w[: dims.n_w1].reshape(dims.H, dims.D).astype(np.float64)
    xs = x.astype(np.float64)
    h = W1 @ xs
    reach = KINK * (np.abs(W1) @ np.abs(xs))
    keep = np.ones(dims.n_params, dtype=bool)
    keep[: dims.n_w1].reshape(dims.H, dims.D)[np.abs(h) <= reach] = False
    return keep


def at_target(dims: Dims, w: np.ndarray, x: np.ndarray, t: np.ndarray, tol: int) -> bool:
    """Whether example ``(x, t)``'s largest residual ``|y - t|`` is so small that float32's rounding of ``y``
    (a sum of H products, after one of D) would move the gradient by more than ``tol`` permil of it."""
    W1 = w[: dims.n_w1].reshape(dims.H, dims.D).astype(np.float64)
    W2 = w[dims.n_w1 :].reshape(dims.O, dims.H).astype(np.float64)
    xs, ts = x.astype(np.float64), t.astype(np.float64)
    a = np.maximum(W1 @ xs, 0.0)
    rounding = F32_MARGIN * ((dims.H + 1) * (np.abs(W2) @ (np.abs(W1) @ np.abs(xs))) + np.abs(ts))
    return bool(np.max(np.abs(W2 @ a - ts)) * max(tol, 1) <= 1000 * np.max(rounding))
