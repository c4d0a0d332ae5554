"""The numpy work of each tape op, as functions of arrays and flags.

The ops in :mod:`nxgates.core.tape` do their arithmetic only through these kernels, so a recorded pass
(:class:`~nxgates.core.program.Program`) can replay exactly the operations an example took, in the same
order, on the next example's arrays. A kernel takes every array it touches as an argument (views are made
inside it), so a replay can exchange the bound arrays; sums go through the ``reduce`` it is handed.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

F32 = np.float32
Reduce = Callable[[np.ndarray, int], np.ndarray]


def store_or_add(contribution: np.ndarray, dst: np.ndarray, first: bool) -> None:
    """A gradient contribution: stored if it is the node's first, else added."""
    if first:
        dst[...] = contribution
    else:
        np.add(dst, contribution, out=dst)


def fill_zero(dst: np.ndarray) -> None:
    dst[...] = 0


def fill_one(dst: np.ndarray) -> None:
    dst[...] = F32(1)


def matvec_forward(reduce: Reduce, W: np.ndarray, WT: np.ndarray | None, x: np.ndarray, prod_t: np.ndarray,
                    y: np.ndarray) -> None:
    np.multiply(W.T if WT is None else WT, x[:, None], out=prod_t)
    y[...] = reduce(prod_t, 0)


def outer_into(g: np.ndarray, x: np.ndarray, dst: np.ndarray) -> None:
    np.multiply(g[:, None], x[None, :], out=dst)


def outer_add(g: np.ndarray, x: np.ndarray, prod: np.ndarray, dst: np.ndarray) -> None:
    np.multiply(g[:, None], x[None, :], out=prod)
    np.add(dst, prod, out=dst)


def matvec_input_grad(reduce: Reduce, W: np.ndarray, g: np.ndarray, prod: np.ndarray, dst: np.ndarray,
                       first: bool) -> None:
    np.multiply(W, g[:, None], out=prod)
    store_or_add(reduce(prod, 0), dst, first)


def matmul_forward(reduce: Reduce, A: np.ndarray, B: np.ndarray, prod: np.ndarray, C: np.ndarray) -> None:
    np.multiply(A[:, :, None], B[None, :, :], out=prod)
    C[...] = reduce(prod, 1)


def matmul_left_grad(reduce: Reduce, g: np.ndarray, B: np.ndarray, prod: np.ndarray, dst: np.ndarray,
                      first: bool) -> None:
    np.multiply(g[:, None, :], B[None, :, :], out=prod)
    store_or_add(reduce(prod, 2), dst, first)


def matmul_right_grad(reduce: Reduce, A: np.ndarray, g: np.ndarray, prod: np.ndarray, dst: np.ndarray,
                       first: bool) -> None:
    np.multiply(A[:, :, None], g[:, None, :], out=prod)
    store_or_add(reduce(prod, 0), dst, first)


def product_grad(g: np.ndarray, other: np.ndarray, dst: np.ndarray, first: bool) -> None:
    store_or_add(g * other, dst, first)


def relu_forward(a: np.ndarray, out: np.ndarray) -> None:
    out[...] = np.where(a > 0, a, F32(0))


def relu_input_grad(relu_grad: Callable[[np.ndarray, np.ndarray], np.ndarray], a: np.ndarray, g: np.ndarray,
                     dst: np.ndarray, first: bool) -> None:
    store_or_add(relu_grad(a, g), dst, first)


def sum_forward(reduce: Reduce, a: np.ndarray, buf: np.ndarray, out: np.ndarray) -> None:
    buf[...] = a.reshape(-1)
    out[...] = reduce(buf, 0)


def broadcast_grad(g: np.ndarray, dst: np.ndarray, first: bool) -> None:
    store_or_add(np.broadcast_to(g, dst.shape), dst, first)


def mse_forward(reduce: Reduce, y: np.ndarray, t: np.ndarray, diff: np.ndarray, sq: np.ndarray,
                 out: np.ndarray) -> None:
    np.subtract(y, t, out=diff)
    np.multiply(diff, diff, out=sq)
    out[...] = reduce(sq.reshape(-1), 0) / F32(sq.size)


def mse_grad(diff: np.ndarray, g: np.ndarray, dy: np.ndarray) -> None:
    """d/dy = 2 (y - t) / n, times the incoming gradient."""
    np.multiply(diff, F32(2) / F32(diff.size), out=dy)
    np.multiply(dy, g, out=dy)


def negated_grad(dy: np.ndarray, dst: np.ndarray, first: bool) -> None:
    store_or_add(-dy, dst, first)
