"""The numpy work of each tape op, as the list of numpy calls it makes.

A kernel is handed every array it touches and returns its calls, with every view it needs already made;
the tape runs them, and while recording keeps them (:class:`~nxgates.core.program.Program`), so a replay
is exactly these calls again, in the same order, with only the bound arrays exchanged. Sums are the
``reduce`` a kernel is handed (:func:`~nxgates.core.reductions.sum_calls`): nothing here knows the order
of a sum. Where a contribution is added to a gradient that already has one, it is formed in a buffer made
when the calls are planned, never per run.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from nxgates.core.reductions import F32, Call, Reduce, sum_calls

ZERO, ONE = F32(0), F32(1)


def run(calls: list[Call]) -> None:
    """Make the calls, in order. float32 overflow gives inf and NaN as IEEE 754 says, silently: the gates'
    checks judge those numbers (huge finite inputs are the user's to give), a warning would only be noise."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for fn, args in calls:
            fn(*args)


def _into(dst: np.ndarray, first: bool, make: Callable[[np.ndarray], list[Call]]) -> list[Call]:
    """``make(buf)`` writes a gradient contribution into ``buf``: straight into ``dst`` if it is the first,
    else into a buffer of its own that is then added to ``dst``."""
    if first:
        return make(dst)
    buf = np.empty(dst.shape, F32)
    return [*make(buf), (np.add, (dst, buf, dst))]


def store_or_add(contribution: np.ndarray, dst: np.ndarray, first: bool) -> list[Call]:
    """A gradient contribution: stored if it is the node's first, else added."""
    return [(np.copyto, (dst, contribution))] if first else [(np.add, (dst, contribution, dst))]


def copy_into(dst: np.ndarray, src: np.ndarray) -> list[Call]:
    return [(np.copyto, (dst, src))]


def fill_zero(dst: np.ndarray) -> list[Call]:
    return copy_into(dst, ZERO)


def fill_one(dst: np.ndarray) -> list[Call]:
    return copy_into(dst, ONE)


def _where_else_zero(mask: np.ndarray, src: np.ndarray, out: np.ndarray) -> list[Call]:
    """``out = src where mask, else +0.0``: zeros, then ``src`` copied where the mask holds (bit for bit, NaN
    and -0.0 included, which ``np.maximum`` or a product by the mask would change)."""
    return [*fill_zero(out), (np.putmask, (out, mask, src))]


def matvec_forward(reduce: Reduce, W: np.ndarray, WT: np.ndarray | None, x: np.ndarray, prod_t: np.ndarray,
                   y: np.ndarray) -> list[Call]:
    """``y[i] = sum_j W[i,j] * x[j]``, the products laid out j-major (``prod_t``, (n, m)) so each step of
    the sum over j works on whole rows of it. ``WT`` is ``W.T`` made contiguous; without it the products read
    ``W.T`` as a view, made on every run (``W`` may be an array a replay exchanges)."""
    product = (np.multiply, (WT, x[:, None], prod_t)) if WT is not None else (_times_transposed, (W, x[:, None],
                                                                                                  prod_t))
    return [product, *sum_calls(reduce, prod_t, 0, y)]


def _times_transposed(W: np.ndarray, column: np.ndarray, out: np.ndarray) -> None:
    np.multiply(W.T, column, out=out)


def outer_into(g: np.ndarray, x: np.ndarray, dst: np.ndarray) -> list[Call]:
    """``dst[i,j] = g[i] * x[j]``: one product per cell, nothing to reduce."""
    return [(np.multiply, (g[:, None], x[None, :], dst))]


def outer_add(g: np.ndarray, x: np.ndarray, prod: np.ndarray, dst: np.ndarray) -> list[Call]:
    return [(np.multiply, (g[:, None], x[None, :], prod)), (np.add, (dst, prod, dst))]


def matvec_input_grad(reduce: Reduce, W: np.ndarray, g: np.ndarray, prod: np.ndarray, dst: np.ndarray,
                      first: bool) -> list[Call]:
    """``dx[j] = sum_i W[i,j] * g[i]``."""
    return [(np.multiply, (W, g[:, None], prod)), *_into(dst, first, lambda out: sum_calls(reduce, prod, 0, out))]


def matmul_forward(reduce: Reduce, A: np.ndarray, B: np.ndarray, prod: np.ndarray, C: np.ndarray) -> list[Call]:
    return [(np.multiply, (A[:, :, None], B[None, :, :], prod)), *sum_calls(reduce, prod, 1, C)]


def matmul_left_grad(reduce: Reduce, g: np.ndarray, B: np.ndarray, prod: np.ndarray, dst: np.ndarray,
                     first: bool) -> list[Call]:
    return [(np.multiply, (g[:, None, :], B[None, :, :], prod)),
            *_into(dst, first, lambda out: sum_calls(reduce, prod, 2, out))]


def matmul_right_grad(reduce: Reduce, A: np.ndarray, g: np.ndarray, prod: np.ndarray, dst: np.ndarray,
                      first: bool) -> list[Call]:
    return [(np.multiply, (A[:, :, None], g[:, None, :], prod)),
            *_into(dst, first, lambda out: sum_calls(reduce, prod, 0, out))]


def product_grad(g: np.ndarray, other: np.ndarray, dst: np.ndarray, first: bool) -> list[Call]:
    return _into(dst, first, lambda out: [(np.multiply, (g, other, out))])


def relu_forward(a: np.ndarray, positive: np.ndarray, out: np.ndarray) -> list[Call]:
    """``out = a where a > 0, else +0.0`` (NaN and -0.0 give +0.0). ``positive`` (bool, like ``a``) keeps
    where, for the backward."""
    return [(np.greater, (a, ZERO, positive)), *_where_else_zero(positive, a, out)]


def relu_input_grad(positive: np.ndarray, g: np.ndarray, dst: np.ndarray, first: bool) -> list[Call]:
    """relu's derivative (1 where its input was positive, else 0) times ``g``, as a gradient contribution:
    ``g`` where positive, +0.0 elsewhere."""
    return _into(dst, first, lambda out: _where_else_zero(positive, g, out))


def sum_forward(reduce: Reduce, a: np.ndarray, buf: np.ndarray, out: np.ndarray) -> list[Call]:
    return [(np.copyto, (buf, a.reshape(-1))), *sum_calls(reduce, buf, 0, out)]


def broadcast_grad(g: np.ndarray, dst: np.ndarray, first: bool) -> list[Call]:
    return store_or_add(g, dst, first)


def mse_forward(reduce: Reduce, y: np.ndarray, t: np.ndarray, diff: np.ndarray, sq: np.ndarray,
                out: np.ndarray) -> list[Call]:
    """``out = f32(sum of (y - t)^2 / f32(n))``; the difference stays in ``diff`` for the backward."""
    return [(np.subtract, (y, t, diff)), (np.multiply, (diff, diff, sq)),
            *sum_calls(reduce, sq.reshape(-1), 0, out), (np.divide, (out, F32(sq.size), out))]


def mse_grad(diff: np.ndarray, g: np.ndarray, dy: np.ndarray) -> list[Call]:
    """d/dy = 2 (y - t) / n, times the incoming gradient."""
    return [(np.multiply, (diff, F32(2) / F32(diff.size), dy)), (np.multiply, (dy, g, dy))]


def negated_grad(dy: np.ndarray, dst: np.ndarray, first: bool) -> list[Call]:
    return _into(dst, first, lambda out: [(np.negative, (dy, out))])
