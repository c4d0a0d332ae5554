"""The pieces a training loop adds to a gradient: the batch reduction and the parameter updates.

* :func:`batch_mean` reduces per-example gradients with the tape's pairwise tree over the *examples*,
  so the batch gradient's bits depend only on B: never on the worker count, the executor or the order in
  which tasks finished. :func:`streamed_batch_mean` gives the same bits from rows handed over one at a
  time in the tree's depth-first order, holding one row per round instead of B.
* :func:`sgd_step` is ``w -= lr * g`` in float32 (two correctly rounded operations, no fused multiply-add).
* :func:`q20_sgd_step` is the integer update ``p - (lr_q * g) / S`` with C's truncating division and the
  overflow guards of :mod:`nxgates.core.q20`: an update that would wrap int64 raises instead.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from nxgates.core import q20
from nxgates.core.q20 import S, tdiv
from nxgates.core.tape import F32


def batch_mean(per_example: np.ndarray, scratch: np.ndarray | None = None) -> np.ndarray:
    """``tree_sum`` over axis 0 (the examples) divided by float32(B); ``per_example`` is left intact.

    The same pairing as ``tree_sum(buf, 0)`` (row k absorbs row ``k + n - n//2``), done on whole rows,
    which are contiguous, and with the first halving written straight into ``scratch`` (at least
    ``ceil(B/2)`` rows of the same width; overwritten) instead of copying the input first.
    """
    if per_example.dtype != F32:
        raise TypeError(f"per-example gradients are float32, got {per_example.dtype}")
    n = per_example.shape[0]
    if n == 1:
        return per_example[0] / F32(1)
    h = n // 2
    if scratch is None:
        scratch = np.empty((n - h, *per_example.shape[1:]), F32)
    np.add(per_example[:h], per_example[n - h : n], out=scratch[:h])
    if n - h > h:  # odd: the middle row waits for the next round
        scratch[h] = per_example[h]
    n -= h
    while n > 1:
        h = n // 2
        np.add(scratch[:h], scratch[n - h : n], out=scratch[:h])
        n -= h
    return scratch[0] / F32(per_example.shape[0])


def tree_levels(B: int) -> list[int]:
    """How many nodes each round of :func:`batch_mean`'s tree has: B, then ceil(n/2) until 1."""
    sizes = [B]
    while sizes[-1] > 1:
        sizes.append(sizes[-1] - sizes[-1] // 2)
    return sizes


def tree_leaf_order(B: int) -> np.ndarray:
    """The examples in the order a depth-first walk of :func:`batch_mean`'s tree (left child first) meets them.

    Node k of a round of m nodes pairs with node ``k + m - m//2`` of that round (the odd middle waits), so
    the walk is built top down, a round at a time: each node is replaced by its children.
    """
    sizes = tree_levels(B)
    order = np.zeros(1, np.int64)
    for m in reversed(sizes[:-1]):  # the round below, from the root's down to the examples
        h = m // 2
        pair = order < h
        starts = np.cumsum(1 + pair) - (1 + pair)
        below = np.empty(m, np.int64)
        below[starts] = order
        below[starts[pair] + 1] = order[pair] + m - h
        order = below
    return order


def streamed_batch_mean(B: int, width: int, take: Callable[[], np.ndarray]) -> np.ndarray:
    """:func:`batch_mean` of B rows handed over one at a time, in :func:`tree_leaf_order` (the same bits):
    memory for one row per round of the tree, not B rows, so a batch can be computed in chunks.

    ``take()`` returns the next row; the row it returned before must stay valid until the next call
    returns (a pair of examples is added straight from where they were computed).
    """
    sizes = tree_levels(B)
    if B == 1:
        return take() / F32(1)
    total = np.empty(width, F32)
    _fill(sizes, np.empty((len(sizes), width), F32), take, len(sizes) - 1, 0, total)
    return total / F32(B)


def _fill(sizes: list[int], right: np.ndarray, take: Callable[[], np.ndarray], r: int, k: int, dst: np.ndarray
          ) -> None:
    """Node k of round r of the tree into ``dst``: its left child into ``dst`` too, its right child into
    ``right[r - 1]`` (used by nothing else on the way down), then left + right, as the tree adds them.
    (A function of its own, not a closure: a recursive closure is a reference cycle, which would keep the
    buffers, and the caller's chunks, alive until the garbage collector runs.)"""
    if r == 0:
        np.copyto(dst, take())
        return
    m = sizes[r - 1]
    h = m // 2
    if k >= h:  # the odd middle of its round: unchanged into the next
        _fill(sizes, right, take, r - 1, k, dst)
    elif r == 1:
        first = take()
        np.add(first, take(), out=dst)
    else:
        _fill(sizes, right, take, r - 1, k, dst)
        _fill(sizes, right, take, r - 1, k + m - h, right[r - 1])
        np.add(dst, right[r - 1], out=dst)


def sgd_step(w: np.ndarray, g: np.ndarray, lr: np.float32, ascent: bool = False) -> None:
    """``w -= lr * g`` in place, in float32 (``ascent``: ``w += lr * g``, a step up the gradient)."""
    step = np.multiply(F32(lr), g, dtype=F32)
    (np.add if ascent else np.subtract)(w, step, out=w)


def q20_sgd_step(p: np.ndarray, g: np.ndarray, lr_q: int, what: str, ascent: bool = False) -> np.ndarray:
    """``p - (lr_q * g) / S`` per cell, C truncation, every intermediate checked (``ascent``: ``+``)."""
    step = tdiv(q20.mul(g, np.int64(lr_q), f"{what}: lr_q * grad"), S)
    return q20.add(p, step if ascent else -step, f"{what}: update")
