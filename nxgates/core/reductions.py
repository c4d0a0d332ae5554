"""The orders a tape sums in, and the numpy calls that carry each one out.

A reduction is a function ``(buf, axis) -> sums`` that may destroy ``buf``: :func:`tree_sum` (pairwise
halving, the default) and :func:`sequential_sum` (left to right, as a plain loop). Every sum of every tape
op is its tape's reduction. docs/reduction-order.md gives both orders element by element.

A tape records numpy calls, not functions of arrays (:mod:`nxgates.core.kernels`), so a sum is also
available as the list of calls that make it (:func:`sum_calls`): the same additions in the same order, with
every view of the buffer made once, when the calls are planned. A reduction without a plan here (a test's
spy, a user's own order) becomes one call to the function itself: it still decides the order, at its own
speed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

F32 = np.float32
Reduce = Callable[[np.ndarray, int], np.ndarray]
#: one numpy call as a tape records it: the function and its positional arguments
Call = tuple[Callable[..., Any], tuple[Any, ...]]


def tree_sum(buf: np.ndarray, axis: int) -> np.ndarray:
    """Sum ``buf`` along ``axis`` by pairwise halving, in place (``buf`` is destroyed); returns a view.

    At each step element ``k`` absorbs element ``k + n - n//2``: the order depends only on the length. The
    summed axis is made the leading one, so along the tape's own (axis 0) sums each halving step adds two
    contiguous blocks and no view of the buffer has to be rearranged first.
    """
    v = buf if axis == 0 else np.moveaxis(buf, axis, 0)
    n = v.shape[0]
    while n > 1:
        h = n // 2
        np.add(v[:h], v[n - h : n], out=v[:h])
        n -= h
    return v[0, ...]


def sequential_sum(buf: np.ndarray, axis: int) -> np.ndarray:
    """Sum ``buf`` along ``axis`` left to right as a plain loop does (``acc = +0.0f; acc = acc + p[i]``, each
    addition rounded to float32); ``buf`` may be destroyed. Returns the sums.

    Where the summed axis is not the innermost in memory, ``np.add.reduce`` from an initial +0.0 is that loop
    for every sum at once: numpy adds the slices along the axis one after the other, element-wise (its
    pairwise summation applies only along the innermost axis). Otherwise each sum is ``np.add.accumulate``
    (a strictly sequential float32 loop) plus +0.0 at the end, which gives what the loop's +0.0 start gives
    (the two differ only on an all -0.0 sum, which the loop makes +0.0). The tests hold both to a scalar loop.
    """
    if _reduce_applies(buf, axis):
        return np.add.reduce(buf, axis=axis, initial=F32(0))
    v = np.moveaxis(buf, axis, -1)
    np.add.accumulate(v, axis=-1, out=v)
    last = v[..., -1]
    last += F32(0)
    return last


def _reduce_applies(buf: np.ndarray, axis: int) -> bool:
    """Whether ``np.add.reduce`` adds ``buf``'s slices along ``axis`` one after the other (the axis is not the
    innermost in memory)."""
    others = [abs(s) for k, (n, s) in enumerate(zip(buf.shape, buf.strides, strict=True)) if k != axis and n > 1]
    return bool(others) and min(others) < abs(buf.strides[axis])


def sum_calls(reduce: Reduce, buf: np.ndarray, axis: int, out: np.ndarray) -> list[Call]:
    """The calls that write ``reduce``'s sums of ``buf`` along ``axis`` into ``out`` (``buf`` is destroyed)."""
    plan = _PLANS.get(reduce)
    return [(_sum_into, (reduce, buf, axis, out))] if plan is None else plan(buf, axis, out)


def _sum_into(reduce: Reduce, buf: np.ndarray, axis: int, out: np.ndarray) -> None:
    out[...] = reduce(buf, axis)


def _tree_calls(buf: np.ndarray, axis: int, out: np.ndarray) -> list[Call]:
    """:func:`tree_sum`'s halving steps, the last one written straight into ``out``."""
    v = buf if axis == 0 else np.moveaxis(buf, axis, 0)
    n = v.shape[0]
    calls: list[Call] = []
    while n > 2:
        h = n // 2
        calls.append((np.add, (v[:h], v[n - h : n], v[:h])))
        n -= h
    # (``v[k, ...]``, never ``v[k]``: of a 1-d buffer that would be a number read now, not a view)
    calls.append((np.add, (v[0, ...], v[1, ...], out)) if n == 2 else (np.copyto, (out, v[0, ...])))
    return calls


def _sequential_calls(buf: np.ndarray, axis: int, out: np.ndarray) -> list[Call]:
    """:func:`sequential_sum`'s calls, the choice between reduce and accumulate made once."""
    if _reduce_applies(buf, axis):
        return [(_add_reduce, (buf, axis, out))]
    v = np.moveaxis(buf, axis, -1)
    return [(np.add.accumulate, (v, -1, None, v)), (np.add, (v[..., -1], F32(0), out))]


def _add_reduce(buf: np.ndarray, axis: int, out: np.ndarray) -> None:
    np.add.reduce(buf, axis=axis, initial=F32(0), out=out)


_PLANS: dict[Reduce, Callable[[np.ndarray, int, np.ndarray], list[Call]]] = {
    tree_sum: _tree_calls,
    sequential_sum: _sequential_calls,
}
