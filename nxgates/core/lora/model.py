"""The seed's LoRA model in Q20 integers: ``y = x@W + (x@A)@B``, loss ``L = sum y^2`` (left in Q40).

``nx_intfp_lora_gradcheck_gate.nx``'s initialisation, forward and backward, number for number: what the lora
and lora-train gates and ``nxgates crosscheck`` all compute with. The base ``W`` is frozen; the adapter
``A`` (DM x R) and ``B`` (R x DM) are trained.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nxgates.core import q20
from nxgates.core.q20 import S, tdiv


@dataclass(eq=False, repr=False)  # arrays: == and repr would mean little, and cost start-up to generate
class Model:
    """The seed's tensors: input ``x``, frozen base ``W``, adapter ``A`` and ``B`` (Q20 int64)."""

    x: np.ndarray  # (T, DM)
    W: np.ndarray  # (DM, DM) frozen
    A: np.ndarray  # (DM, R)
    B: np.ndarray  # (R, DM)


def init_model(T: int, DM: int, R: int) -> Model:
    """The seed's deterministic initialisation, with C's truncating division."""

    def fill(n: int, mul: int, add: int, mod: int, centre: int, div: int) -> np.ndarray:
        i = np.arange(n, dtype=np.int64)
        return tdiv((((i * mul + add) % mod) - centre) * S, div)

    return Model(
        x=fill(T * DM, 5, 2, 11, 5, 10).reshape(T, DM),
        W=fill(DM * DM, 7, 3, 13, 6, 12).reshape(DM, DM),
        A=fill(DM * R, 7, 1, 11, 5, 16).reshape(DM, R),
        B=fill(R * DM, 3, 2, 11, 5, 16).reshape(R, DM),
    )


@dataclass(eq=False, repr=False)
class Forward:
    """The forward pass with the unrounded sums kept, so the fast gradcheck can re-divide them."""

    xw: np.ndarray  # tdiv(x@W, S)
    acc_h: np.ndarray  # x@A, unrounded
    h: np.ndarray  # tdiv(acc_h, S)
    acc_y: np.ndarray  # h@B, unrounded
    y: np.ndarray  # xw + tdiv(acc_y, S)
    loss: int  # sum y^2 (Q40)


def forward(m: Model, xw: np.ndarray | None = None) -> Forward:
    """The seed's ``lora_fwd``; pass ``xw`` to reuse the frozen ``x@W``."""
    if xw is None:
        xw = q20.matmul(m.x, m.W, "x@W")
    acc_h = q20.matmul_raw(m.x, m.A, "x@A")
    h = tdiv(acc_h, S)
    acc_y = q20.matmul_raw(h, m.B, "h@B")
    y = q20.add(xw, tdiv(acc_y, S), "y = xw + yl")
    return Forward(xw, acc_h, h, acc_y, y, int(q20.sum_squares(y, what="L = sum y^2")))


def backward(m: Model, f: Forward) -> tuple[np.ndarray, np.ndarray]:
    """The seed's ``lora_bwd``: every product is divided by S before it is accumulated."""
    dy = q20.mul(f.y, 2, "dy = 2y")
    dB = q20.matmul_per_term(f.h.T, dy, "dB = h^T dy")  # dB[k,j] = sum_t h[t,k] dy[t,j] / S
    dh = q20.matmul_per_term(dy, m.B.T, "dh = dy B^T")  # dh[t,k] = sum_j dy[t,j] B[k,j] / S
    dA = q20.matmul_per_term(m.x.T, dh, "dA = x^T dh")  # dA[i,k] = sum_t x[t,i] dh[t,k] / S
    return dA, dB
