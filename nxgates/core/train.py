"""The pieces a training loop adds to a gradient: the batch reduction and the parameter updates.

* :func:`batch_mean` reduces per-example gradients with the tape's pairwise tree over the *examples*,
  so the batch gradient's bits depend only on B: never on the worker count, the executor or the order in
  which tasks finished.
* :func:`sgd_step` is ``w -= lr * g`` in float32 (two correctly rounded operations, no fused multiply-add).
* :func:`q20_sgd_step` is the integer update ``p - (lr_q * g) / S`` with C's truncating division and the
  overflow guards of :mod:`nxgates.core.q20`: an update that would wrap int64 raises instead.
"""

from __future__ import annotations

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


def sgd_step(w: np.ndarray, g: np.ndarray, lr: np.float32, ascent: bool = False) -> None:
    """``w -= lr * g`` in place, in float32 (``ascent`` flips the sign: the wrong-sign fault)."""
    step = np.multiply(F32(lr), g, dtype=F32)
    (np.add if ascent else np.subtract)(w, step, out=w)


def q20_sgd_step(p: np.ndarray, g: np.ndarray, lr_q: int, what: str, ascent: bool = False) -> np.ndarray:
    """``p - (lr_q * g) / S`` per cell, C truncation, every intermediate checked (``ascent``: ``+``)."""
    step = tdiv(q20.mul(g, np.int64(lr_q), f"{what}: lr_q * grad"), S)
    return q20.add(p, step if ascent else -step, f"{what}: update")
