"""The fast gradcheck: the seed's loss differences in O(T*DM) per perturbation, the same integers.

``x@W`` is frozen; moving ``A[i,k]`` moves only column k of the unrounded ``x@A`` sums, hence ``h[:,k]``,
hence each ``y[t,j]`` through the single term ``h[t,k]*B[k,j]``; moving ``B[k,j]`` moves only column j.
Keeping the unrounded sums and re-applying the same truncating division reproduces every rounding of the
naive path. Row t of the moved loss depends on the cell (i, k) only through how far ``h[t,k]`` moves, and
cells share few distinct moves (``+-x[t,i]*delta/S``, rounded): each is evaluated once, in blocks of
whole-array operations (:func:`_moved_a_unchecked`). Where an a-priori proof cannot show that nothing
overflows, every operation is guarded and refuses rather than wraps.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from nxgates.core import q20
from nxgates.core.lora.model import Forward, Model
from nxgates.core.pacing import Pacer
from nxgates.core.q20 import S, tdiv

#: the distinct moves of h of a block of A's columns, (columns, T, V), and on the guarded path the per-cell
#: moves of a chunk of A's rows, (rows, R, T), hold about this many int64 each
MOVES_ELEMENTS = 1 << 20
#: the guarded path's (rows, R, T, DM) temporaries hold about this many int64 each
CHECKED_ELEMENTS = 1 << 21
#: the proven path's blocks of moved rows of y hold about this many int64 (512 KiB: they stay in cache)
MOVED_ELEMENTS = 1 << 16


def _loss_delta(loss: int, y: np.ndarray, yp: np.ndarray, ym: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """``L(+d) - L(-d)`` from the moved entries only, as ``sum (yp - ym) * (yp + ym)``: exact and checked.

    The unmoved entries cancel exactly in integers. The seed also forms ``L(+d)`` and ``L(-d)`` whole,
    so the guard bounds those too (``L - sum y^2 + sum yp^2`` over the moved entries, ``y`` their unmoved
    values), refusing wherever the seed would wrap.
    """
    terms = int(np.prod([yp.shape[a] for a in axes]))
    for moved in (yp, ym):
        if loss + q20.max_abs(moved) ** 2 * terms >= q20.LIMIT:  # the exact coarse bound failed: be tight
            unmoved = np.sum(np.square(np.broadcast_to(y, moved.shape).astype(np.float64)), axis=axes)
            moved_sq = np.sum(np.square(moved.astype(np.float64)), axis=axes)
            q20.check_bound(loss + np.max(moved_sq - unmoved), "L(+-delta)", q20.SQUARES_LIMIT)
    return q20.total(q20.mul(yp - ym, q20.add(yp, ym, "yp + ym"), "(yp - ym)(yp + ym)"), axes, "Lp - Lm")


def proven_a(m: Model, f: Forward, dhs: list[np.ndarray], sum_abs_y: int) -> bool:
    """An exact a-priori proof, from small arrays only, that no int64 intermediate of the moved-A
    computation leaves the safe range, and that ``L(+-delta)`` fits int64 as the seed forms it. When it
    holds, :func:`_moved_a_unchecked` skips the per-op guards; when it does not, the checked operations
    decide (and refuse rather than wrap). A cell of A moves h@B's sums by ``dh * B`` in all T x DM entries.
    Public, with :func:`proven_b`, as the one place that chooses the path: replacing it sends every cell
    down the guarded path (the tests compare the two paths this way)."""
    T, DM = f.y.shape
    return _moves_fit(f, max(q20.max_abs(dh) for dh in dhs) * q20.max_abs(m.B), T * DM, sum_abs_y)


def _moves_fit(f: Forward, moved: int, terms: int, sum_abs_y: int) -> bool:
    """The proof of :func:`proven_a` and :func:`proven_b`: each cell moves ``terms`` unrounded sums of h@B
    by at most ``moved``, and the rest of the computation follows from the forward's largest magnitudes."""
    acc_y = q20.max_abs(f.acc_y) + moved  # |h@B moved|
    y = q20.max_abs(f.xw) + acc_y // S + 1  # |y moved|
    e = moved // S + 2  # |y moved - y|: two truncations of sums that differ by at most ``moved``
    worst = max(acc_y, 2 * y, 4 * e * y * terms)  # |h@B moved|; |yp + ym|; sum (yp - ym)(yp + ym)
    # L(+-d) = L + sum (y + dy)^2 - y^2 <= L + e * (2 sum|y| + e terms), a sum of squares (monotone)
    loss_moved = f.loss + e * (2 * sum_abs_y + e * terms)
    return worst < q20.LIMIT and loss_moved < q20.SQUARES_LIMIT


def diffs_fast_a(m: Model, f: Forward, delta: int, pace: Pacer) -> np.ndarray:
    """Loss differences for every cell (i, k) of A (see :func:`cells_a`), counted on the run's progress."""
    out = np.zeros(m.A.shape, dtype=np.int64)
    cells_a(m, f, delta, range(m.A.shape[1]), out, lambda n: (pace.advance(n), pace.check_time()))
    return out


def x_shifts(m: Model, delta: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``x * delta`` (DM, T), and its distinct values per t with where each cell's +- sits in them (see
    :func:`_distinct_shifts`): what every column of A needs, made once for all of them."""
    shift = q20.mul(m.x.T, delta, "x * delta")
    return (shift, *_distinct_shifts(shift))


def cells_a(m: Model, f: Forward, delta: int, columns: range, out: np.ndarray, tick: Callable[[int], Any],
            shifts: tuple[np.ndarray, ...] | None = None) -> None:
    """Loss differences of the cells of A in ``columns`` (values of k, every row) into ``out`` (DM x R).
    Every cell is independent of the others, so any split gives the same integers; a column's cells share
    their moves of h (see :func:`_moved_a_unchecked`), so a pool splits A by columns, and so does this, in
    blocks whose distinct moves fit :data:`MOVES_ELEMENTS`. ``tick(n)`` after each piece of n cells.
    ``shifts``: :func:`x_shifts` if the caller made it already (a pool, once for its workers)."""
    T = m.x.shape[0]
    sum_abs_y = _sum_abs(f.y)  # exact, for the a-priori proof
    # the moves of h[t, k] that the cells (i, k) make: one per distinct value of +-x[t, i] * delta
    shift, values, where_plus, where_minus = x_shifts(m, delta) if shifts is None else shifts
    block = max(1, MOVES_ELEMENTS // (T * values.shape[1]))
    for k0 in range(columns.start, columns.stop, block):
        ks = slice(k0, min(columns.stop, k0 + block))
        moves = tdiv(q20.add(f.acc_h.T[ks, :, None], values[None], "x@A +- x*delta"), S) - f.h.T[ks, :, None]
        if proven_a(m, f, [moves], sum_abs_y):
            _moved_a_unchecked(f, m.B[ks], moves, where_plus, where_minus, out[:, ks], tick)
        else:
            _cells_a_guarded(m, f, shift, ks, out[:, ks], tick)


def _cells_a_guarded(m: Model, f: Forward, shift: np.ndarray, ks: slice, out: np.ndarray,
                     tick: Callable[[int], Any]) -> None:
    """The columns ``ks`` of A cell by cell, every operation guarded: where :func:`proven_a` cannot show that
    nothing overflows, the checked operations decide (and refuse rather than wrap). Rows go in chunks whose
    per-cell moves of h, ``(rows, R, T)``, hold :data:`MOVES_ELEMENTS`, and in pieces whose ``(rows, R, T,
    DM)`` temporaries hold :data:`CHECKED_ELEMENTS`."""
    DM, T = shift.shape
    R = ks.stop - ks.start
    B = m.B[ks]
    step = max(1, MOVES_ELEMENTS // (R * T))
    for i0 in range(0, DM, step):
        i1 = min(DM, i0 + step)
        # how far h[:, k] moves when A[i, k] moves by +delta and by -delta, cell by cell: (ci, R, T); the sums
        # are the ones "x@A +- x*delta" bounded over the distinct moves
        dhs = [tdiv(f.acc_h.T[None, ks] + sign * shift[i0:i1, None, :], S) - f.h.T[None, ks] for sign in (1, -1)]
        sub = max(1, CHECKED_ELEMENTS // max(1, R * T * DM))
        for j0 in range(i0, i1, sub):
            j1 = min(i1, j0 + sub)
            ys = []
            for dh in dhs:
                moved = q20.mul(dh[j0 - i0 : j1 - i0, :, :, None], B[None, :, None, :], "dh * B")  # (cj, R, T, DM)
                acc_y = q20.add(f.acc_y[None, None], moved, "h@B moved")
                ys.append(q20.add(f.xw[None, None], tdiv(acc_y, S), "y moved"))
            out[j0:j1] = _loss_delta(f.loss, f.y[None, None], ys[0], ys[1], (2, 3))
            tick((j1 - j0) * R)


def _sum_abs(y: np.ndarray) -> int:
    """``sum |y|`` as an exact Python int: in int64 where it provably fits, else in Python ints."""
    if q20.max_abs(y) * y.size < q20.LIMIT:
        return int(np.abs(y).sum())
    return sum(abs(v) for v in y.ravel().tolist())


def _distinct_shifts(shift: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per t, the distinct values of ``+-shift[i, t]`` (``shift = x * delta``, (DM, T)): ``values`` (T, V),
    ascending, each row padded with its largest, and where ``+shift[i, t]`` and ``-shift[i, t]`` sit in them,
    (T, DM) each. Whole-array operations: one sort of every row t at once. The seed's x takes 11 values,
    symmetric about 0, so V is 11 whatever the size."""
    n, T = shift.shape
    both = np.concatenate([shift.T, -shift.T], axis=1)  # (T, 2n): +-shift of every row i, for each t
    order = np.argsort(both, axis=1)
    ascending = np.take_along_axis(both, order, axis=1)
    new = np.empty(ascending.shape, bool)
    new[:, 0] = True
    np.not_equal(ascending[:, 1:], ascending[:, :-1], out=new[:, 1:])
    rank = np.cumsum(new, axis=1) - 1  # which distinct value each sorted entry is
    values = np.repeat(ascending[:, -1:], int(rank[:, -1].max()) + 1, axis=1)  # (T, V), padded with the largest
    values[np.arange(T)[:, None], rank] = ascending
    where = np.empty_like(rank)
    np.put_along_axis(where, order, rank, axis=1)
    return values, where[:, :n], where[:, n:]


def _moved_a_unchecked(f: Forward, B: np.ndarray, moves: np.ndarray, where_plus: np.ndarray,
                       where_minus: np.ndarray, out: np.ndarray, tick: Callable[[int], Any]) -> None:
    """``L(+delta) - L(-delta)`` per cell (i, k) of A's columns k in ``B``'s rows, each moved loss summed row by
    row of y; ``tick(n)`` after each block of columns (n cells).

    Moving ``A[i, k]`` by ``+-delta`` moves ``h[t, k]`` by ``a = tdiv(acc_h[t, k] +- x[t, i] * delta, S) -
    h[t, k]``, and row t of the moved loss is ``G(k, t, a) = sum_j (xw[t, j] + tdiv(acc_y[t, j] + a * B[k, j],
    S))^2``: the cell enters only through the value of ``+-x[t, i] * delta``. Cells share few of them (the
    seed's x takes 11 values, and ``-x`` moves as ``x`` does with the other sign), so G is evaluated once per
    (k, t, distinct value), in cache-sized blocks of whole numpy operations, and gathered: the same integers
    as the seed's whole forwards, at a fraction of the work. ``moves`` (R, T, V) holds each distinct move of h,
    ``where_plus``/``where_minus`` (T, DM) which one each cell makes (see :func:`_distinct_shifts`).
    :func:`proven_a` has shown that nothing here leaves int64: every G is a partial sum of a moved loss
    ``L(+-delta)``, which is below ``q20.SQUARES_LIMIT``.
    """
    R, T, V = moves.shape
    DM = B.shape[1]
    ci = where_plus.shape[1]
    for ks, t_blocks in _blocks(R, T, V * DM):
        losses = np.zeros((2, ks.stop - ks.start, ci), np.int64)  # L(+delta), L(-delta) of the cells (i, k)
        for ts in t_blocks:
            y = moves[ks, ts, :, None] * B[ks, None, None, :]  # (k, t, V, DM): h@B moved
            y += f.acc_y[None, ts, None, :]
            y = q20.tdiv_s_inplace(y)
            y += f.xw[None, ts, None, :]
            g = np.einsum("ktvj,ktvj->ktv", y, y)  # G(k, t, a), once per distinct move a
            rows = np.arange(ts.stop - ts.start)[:, None]
            losses[0] += g[:, rows, where_plus[ts]].sum(axis=1)
            losses[1] += g[:, rows, where_minus[ts]].sum(axis=1)
        out[:, ks] = (losses[0] - losses[1]).T
        tick(ci * (ks.stop - ks.start))


def _blocks(R: int, T: int, per: int) -> Iterator[tuple[slice, list[slice]]]:
    """Blocks of (k, t) whose ``per`` int64 each come to about :data:`MOVED_ELEMENTS`: every t for several k
    where one k's rows fit, else one k at a time in blocks of t. Yields each block of k with its blocks of t."""
    t_step = max(1, min(T, MOVED_ELEMENTS // per))
    k_step = max(1, MOVED_ELEMENTS // (t_step * per))  # 1 unless every t fits
    t_blocks = [slice(t0, min(T, t0 + t_step)) for t0 in range(0, T, t_step)]
    for k0 in range(0, R, k_step):
        yield slice(k0, min(R, k0 + k_step)), t_blocks


def diffs_fast_b(m: Model, f: Forward, delta: int, pace: Pacer) -> np.ndarray:
    """Loss differences for every cell (k, j) of B: only column j of y moves, by h[:, k] * delta."""
    out = np.zeros(m.B.shape, dtype=np.int64)
    cells_b(m, f, delta, range(m.B.shape[0]), out)
    pace.advance(out.size)
    return out


def cells_b(m: Model, f: Forward, delta: int, rows: range, out: np.ndarray) -> None:
    """Loss differences of the cells of B in ``rows`` (values of k) into ``out`` (R x DM): by
    :func:`_moved_b_unchecked` where :func:`proven_b` shows nothing can overflow, else every operation
    guarded (refusing rather than wrapping)."""
    if proven_b(f, delta):
        _moved_b_unchecked(f, delta, rows, out)
        return
    shift = q20.mul(f.h.T[rows.start : rows.stop, None, :], delta, "h * delta")  # (rows, 1, T)
    acc = f.acc_y.T[None, :, :]  # (1, DM, T)
    xw = f.xw.T[None, :, :]
    yp = q20.add(xw, tdiv(q20.add(acc, shift, "h@B + h*delta"), S), "y moved")
    ym = q20.add(xw, tdiv(q20.add(acc, -shift, "h@B - h*delta"), S), "y moved")
    out[rows.start : rows.stop] = _loss_delta(f.loss, f.y.T[None], yp, ym, (2,))


def proven_b(f: Forward, delta: int) -> bool:
    """As :func:`proven_a`, for B: a cell of B moves h@B's sums by ``h * delta`` in one column of y, T entries."""
    return _moves_fit(f, q20.max_abs(f.h) * delta, f.y.shape[0], _sum_abs(f.y))


def _moved_b_unchecked(f: Forward, delta: int, rows: range, out: np.ndarray) -> None:
    """``L(+delta) - L(-delta)`` per cell (k, j) of B's ``rows``, as ``sum_t (yp - ym)(yp + ym)`` over column j
    of the moved y, in cache-sized blocks of (k, t) without per-operation guards (:func:`proven_b` holds)."""
    T, DM = f.y.shape
    shift = f.h.T[rows.start : rows.stop] * delta  # (R, T): how far h@B's column moves, per k and t
    for ks, t_blocks in _blocks(len(rows), T, DM):
        diffs = np.zeros((ks.stop - ks.start, DM), np.int64)
        for ts in t_blocks:
            moved = [q20.tdiv_s_inplace(f.acc_y[None, ts] + sign * shift[ks, ts, None]) + f.xw[None, ts]
                     for sign in (1, -1)]  # (k, t, DM): y with B[k, j] moved by +delta, -delta
            diffs += np.einsum("ktj,ktj->kj", moved[0] - moved[1], moved[0] + moved[1])
        out[rows.start + ks.start : rows.start + ks.stop] = diffs
