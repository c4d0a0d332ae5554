"""LoRA gradcheck in Q20 integers: the seed ``nx_intfp_lora_gradcheck_gate.nx``, number for number.

Model: ``y = x@W + (x@A)@B`` with the base ``W`` frozen and the adapter ``A`` (DM x R), ``B`` (R x DM)
trainable; loss ``L = sum y^2`` (left in Q40, as the seed). The analytic adapter gradients are checked
against central differences ``num = (L(+delta) - L(-delta)) / (2 delta)``, cell by cell.

Two gradcheck algorithms give the same integers:

* ``naive`` is the seed's: a whole forward per perturbation, O(T*DM^2) each, 2*ncell of them.
* ``fast`` re-divides only what a perturbation moves: ``x@W`` is frozen; moving ``A[i,k]`` moves only
  column k of the unrounded ``x@A`` sums, hence ``h[:,k]``, hence each ``y[t,j]`` through the single term
  ``h[t,k]*B[k,j]``; moving ``B[k,j]`` moves only column j. Keeping the unrounded sums and re-applying the
  same truncating division reproduces every rounding of the naive path, in O(T*DM) per perturbation.
  Row t of the moved loss depends on the cell (i, k) only through how far ``h[t,k]`` moves, and cells
  share few distinct moves (``+-x[t,i]*delta/S``, rounded): each is evaluated once, in blocks of whole-array
  operations (:func:`_moved_a_unchecked`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from nxgates.core import q20
from nxgates.core.cpus import EXECUTORS
from nxgates.core.memory import require
from nxgates.core.q20 import S, tdiv
from nxgates.errors import ConfigError, ResourceError
from nxgates.gatekit import ChoiceParam, Fault, GateDef, GateOutput, IntParam, RunContext

PARAMS = {
    "T": IntParam("tokens: rows of x", min=1, max=1 << 20),
    "DM": IntParam("model width: x is T x DM, the frozen base W is DM x DM", min=1, max=1 << 20),
    "R": IntParam("LoRA rank: A is DM x R, B is R x DM (R <= DM)", min=1, max=1 << 20),
    "delta": IntParam("central-difference step, in Q20 units", min=1, max=1 << 40),
    "tol_permil": IntParam("a cell passes when |num - ana| * 1000 / max|grad| <= this", min=0, max=1000),
    "algorithm": ChoiceParam("gradcheck path: fast (exact, O(T*DM) per cell) or naive (the seed's)",
                             ("fast", "naive")),
    "workers": IntParam("processes for the fast gradcheck's cells; 0 = auto (one process at small sizes, "
                        "the usable CPUs from T*DM^2*R = 2^30 up), 1 = in-process", min=0, max=1024,
                        default=0),
    "executor": ChoiceParam("where a pooled gradcheck's cells run: process (forked, shared memory), thread, "
                            "dask (a LocalCluster of `workers`, or --scheduler ADDRESS), or auto (dask given a "
                            "scheduler address, else process)", ("auto", *EXECUTORS), default="auto"),
}

CHECK_A = "gradcheck A (lora)"
CHECK_B = "gradcheck B (lora)"
CHECK_FROZEN = "base W frozen"

FAULTS = {
    "grad-bug": Fault("the analytic gradient of one cell of A is off by 10% of max|grad| (above the tolerance)",
                      (CHECK_A,)),
    "missing-rescale": Fault("one product h*dy in the backward of B is not divided by S", (CHECK_B,)),
    "transposed-b": Fault("dB is written with swapped indices (dB[j,k] for dB[k,j], row-major)", (CHECK_B,)),
    "train-base": Fault("the run writes to the frozen base W (one cell moved by delta, never restored)",
                        (CHECK_FROZEN,)),
}


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


def backward(m: Model, f: Forward, fault: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The seed's ``lora_bwd``: every product is divided by S before it is accumulated."""
    dy = q20.mul(f.y, 2, "dy = 2y")
    dB = q20.matmul_per_term(f.h.T, dy, "dB = h^T dy")  # dB[k,j] = sum_t h[t,k] dy[t,j] / S
    dh = q20.matmul_per_term(dy, m.B.T, "dh = dy B^T")  # dh[t,k] = sum_j dy[t,j] B[k,j] / S
    dA = q20.matmul_per_term(m.x.T, dh, "dA = x^T dh")  # dA[i,k] = sum_t x[t,i] dh[t,k] / S
    if fault == "missing-rescale":
        term = int(f.h[0, 0]) * int(dy[0, 0])
        dB[0, 0] += term - int(tdiv(term, S))
    elif fault == "transposed-b":
        dB = np.ascontiguousarray(dB.T).reshape(dB.shape)
    elif fault == "grad-bug":
        dA[0, 0] += max(1, int(np.max(np.abs(dA))) // 10)
    return dA, dB


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


# ---- the seed's gradcheck: one whole forward per perturbation ------------------------------------------


def diffs_naive(m: Model, tensor: np.ndarray, delta: int, ctx: RunContext) -> np.ndarray:
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
        ctx.progress.advance(1)
        if i % 64 == 63:
            ctx.check_time()
    return out


# ---- the same integers in O(T*DM) per perturbation -------------------------------------------------------


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


def _proven_a(m: Model, f: Forward, dhs: list[np.ndarray], sum_abs_y: int) -> bool:
    """An exact a-priori proof, from small arrays only, that no int64 intermediate of the moved-A
    computation leaves the safe range, and that ``L(+-delta)`` fits int64 as the seed forms it. When it
    holds, :func:`_moved_a_unchecked` skips the per-op guards; when it does not, the checked operations
    decide (and refuse rather than wrap). A cell of A moves h@B's sums by ``dh * B`` in all T x DM entries."""
    T, DM = f.y.shape
    return _moves_fit(f, max(q20.max_abs(dh) for dh in dhs) * q20.max_abs(m.B), T * DM, sum_abs_y)


def _moves_fit(f: Forward, moved: int, terms: int, sum_abs_y: int) -> bool:
    """The proof of :func:`_proven_a` and :func:`_proven_b`: each cell moves ``terms`` unrounded sums of h@B
    by at most ``moved``, and the rest of the computation follows from the forward's largest magnitudes."""
    acc_y = q20.max_abs(f.acc_y) + moved  # |h@B moved|
    y = q20.max_abs(f.xw) + acc_y // S + 1  # |y moved|
    e = moved // S + 2  # |y moved - y|: two truncations of sums that differ by at most ``moved``
    worst = max(acc_y, 2 * y, 4 * e * y * terms)  # |h@B moved|; |yp + ym|; sum (yp - ym)(yp + ym)
    # L(+-d) = L + sum (y + dy)^2 - y^2 <= L + e * (2 sum|y| + e terms), a sum of squares (monotone)
    loss_moved = f.loss + e * (2 * sum_abs_y + e * terms)
    return worst < q20.LIMIT and loss_moved < q20.SQUARES_LIMIT


def diffs_fast_a(m: Model, f: Forward, delta: int, ctx: RunContext) -> np.ndarray:
    """Loss differences for every cell (i, k) of A (see :func:`cells_a`), counted on the run's progress."""
    out = np.zeros(m.A.shape, dtype=np.int64)
    cells_a(m, f, delta, range(m.A.shape[1]), out, lambda n: (ctx.progress.advance(n), ctx.check_time()))
    return out


#: the distinct moves of h of a block of A's columns, (columns, T, V), and on the guarded path the per-cell
#: moves of a chunk of A's rows, (rows, R, T), hold about this many int64 each
MOVES_ELEMENTS = 1 << 20
#: the guarded path's (rows, R, T, DM) temporaries hold about this many int64 each
CHECKED_ELEMENTS = 1 << 21
#: the proven path's blocks of moved rows of y hold about this many int64 (512 KiB: they stay in cache)
MOVED_ELEMENTS = 1 << 16


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
        if _proven_a(m, f, [moves], sum_abs_y):
            _moved_a_unchecked(f, m.B[ks], moves, where_plus, where_minus, out[:, ks], tick)
        else:
            _cells_a_guarded(m, f, shift, ks, out[:, ks], tick)


def _cells_a_guarded(m: Model, f: Forward, shift: np.ndarray, ks: slice, out: np.ndarray,
                     tick: Callable[[int], Any]) -> None:
    """The columns ``ks`` of A cell by cell, every operation guarded: where :func:`_proven_a` cannot show that
    nothing overflows, the checked operations decide (and refuse rather than wrap). Rows go in chunks whose
    per-cell moves of h, ``(rows, R, T)``, hold :data:`MOVES_ELEMENTS`, and in pieces whose ``(rows, R, T,
    DM)`` temporaries hold :data:`CHECKED_ELEMENTS`."""
    DM, T = shift.shape
    R = ks.stop - ks.start
    B = m.B[ks]
    step = max(1, MOVES_ELEMENTS // max(1, R * T))
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
    :func:`_proven_a` has shown that nothing here leaves int64: every G is a partial sum of a moved loss
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


def diffs_fast_b(m: Model, f: Forward, delta: int, ctx: RunContext) -> np.ndarray:
    """Loss differences for every cell (k, j) of B: only column j of y moves, by h[:, k] * delta."""
    out = np.zeros(m.B.shape, dtype=np.int64)
    cells_b(m, f, delta, range(m.B.shape[0]), out)
    ctx.progress.advance(out.size)
    return out


def cells_b(m: Model, f: Forward, delta: int, rows: range, out: np.ndarray) -> None:
    """Loss differences of the cells of B in ``rows`` (values of k) into ``out`` (R x DM): by
    :func:`_moved_b_unchecked` where :func:`_proven_b` shows nothing can overflow, else every operation
    guarded (refusing rather than wrapping)."""
    if _proven_b(f, delta):
        _moved_b_unchecked(f, delta, rows, out)
        return
    shift = q20.mul(f.h.T[rows.start : rows.stop, None, :], delta, "h * delta")  # (rows, 1, T)
    acc = f.acc_y.T[None, :, :]  # (1, DM, T)
    xw = f.xw.T[None, :, :]
    yp = q20.add(xw, tdiv(q20.add(acc, shift, "h@B + h*delta"), S), "y moved")
    ym = q20.add(xw, tdiv(q20.add(acc, -shift, "h@B - h*delta"), S), "y moved")
    out[rows.start : rows.stop] = _loss_delta(f.loss, f.y.T[None], yp, ym, (2,))


def _proven_b(f: Forward, delta: int) -> bool:
    """As :func:`_proven_a`, for B: a cell of B moves h@B's sums by ``h * delta`` in one column of y, T entries."""
    return _moves_fit(f, q20.max_abs(f.h) * delta, f.y.shape[0], _sum_abs(f.y))


def _moved_b_unchecked(f: Forward, delta: int, rows: range, out: np.ndarray) -> None:
    """``L(+delta) - L(-delta)`` per cell (k, j) of B's ``rows``, as ``sum_t (yp - ym)(yp + ym)`` over column j
    of the moved y, in cache-sized blocks of (k, t) without per-operation guards (:func:`_proven_b` holds)."""
    T, DM = f.y.shape
    shift = f.h.T[rows.start : rows.stop] * delta  # (R, T): how far h@B's column moves, per k and t
    for ks, t_blocks in _blocks(len(rows), T, DM):
        diffs = np.zeros((ks.stop - ks.start, DM), np.int64)
        for ts in t_blocks:
            moved = [q20.tdiv_s_inplace(f.acc_y[None, ts] + sign * shift[ks, ts, None]) + f.xw[None, ts]
                     for sign in (1, -1)]  # (k, t, DM): y with B[k, j] moved by +delta, -delta
            diffs += np.einsum("ktj,ktj->kj", moved[0] - moved[1], moved[0] + moved[1])
        out[rows.start + ks.start : rows.start + ks.stop] = diffs


# ---- the fast gradcheck's cells split over a worker pool -------------------------------------------------

#: ``workers=0`` (auto) forks a pool only from this much work (2 x cells x T x DM, what the gradcheck cost
#: before the memo of moves) up. A pool's start and close cost 0.02-0.04 s on 2 cores; with the memo, in
#: whole-array blocks, the gradcheck at xl, the largest preset (T*DM^2*R = 2^29, its loss near int64's
#: limit), takes about 0.03 s in one process: every preset stays in one process. At 2^31 (T=2048 at
#: DM=256 R=8) two workers are about as fast as one (0.9x-1.2x in the bench's runs)
AUTO_POOL_WORK = 1 << 31


def gradcheck_workers(requested: int, T: int, DM: int, R: int) -> int:
    """How many processes the fast gradcheck uses: ``requested``, or for 0 the usable CPUs where it pays."""
    if requested:
        return requested
    if 2 * DM * R * T * DM < AUTO_POOL_WORK:
        return 1
    from nxgates.core.cpus import auto_workers  # not the pool: validation runs at every start-up

    return auto_workers()


def gradcheck_executor(executor: str, scheduler: str | None) -> str:
    """``auto``: dask given a scheduler address (as parallel-grad), else forked processes."""
    if scheduler and executor in ("thread", "process"):
        raise ConfigError(f"a scheduler address applies to executor=dask, not executor={executor}")
    if executor == "auto":
        return "dask" if scheduler else "process"
    return executor


@dataclass(eq=False, repr=False)
class CellsJob:
    """What the pool's workers share: the model, its forward, and the two result arrays they fill."""

    m: Model
    f: Forward
    delta: int
    out_a: np.ndarray  #: shared (DM, R)
    out_b: np.ndarray  #: shared (R, DM)
    shifts: tuple[np.ndarray, ...] | None = None  #: :func:`x_shifts`, made once rather than in every worker
    remote: bool = False  #: a copy on a Dask worker: its tasks return the cells they filled

    def __getstate__(self) -> dict:
        """What travels to a Dask worker: all of it (small next to the work), marked as a copy."""
        return dict(self.__dict__, remote=True)


def _cells_a_task(ctx: tuple[int, int, int], worker: int) -> np.ndarray | None:
    from nxgates.core.pool import resolve

    handle, k0, k1 = ctx
    job = resolve(handle)
    cells_a(job.m, job.f, job.delta, range(k0, k1), job.out_a, lambda n: None, job.shifts)
    return job.out_a[:, k0:k1] if job.remote else None


def _cells_b_task(ctx: tuple[int, int, int], worker: int) -> np.ndarray | None:
    from nxgates.core.pool import resolve

    handle, k0, k1 = ctx
    job = resolve(handle)
    cells_b(job.m, job.f, job.delta, range(k0, k1), job.out_b)
    return job.out_b[k0:k1] if job.remote else None


def _store_cells(out: np.ndarray, cells: np.ndarray | None) -> None:
    """``on_result`` of a task on a Dask worker: the cells it filled land in the gate's array (a view)."""
    out[...] = cells


def _split(n: int, parts: int) -> list[range]:
    """``range(n)`` in ``parts`` contiguous, near-equal, non-empty pieces (fewer when n < parts)."""
    bounds = [n * p // parts for p in range(parts + 1)]
    return [range(a, b) for a, b in zip(bounds, bounds[1:], strict=False) if b > a]


def diffs_fast_pooled(m: Model, f: Forward, delta: int, ctx: RunContext, workers: int, executor: str = "process",
                      scheduler: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The fast gradcheck with A's columns and B's rows (both values of k) dealt over ``workers`` forked
    processes, writing into shared memory, or over a Dask cluster's workers, whose tasks return their cells:
    the same integers as :func:`diffs_fast_a` / :func:`diffs_fast_b` (cells are independent). With R below
    the worker count, some workers get no A or B cells.

    A task that fails (an overflow refusal, say) makes this fall back to the in-process path, which then
    raises exactly what a single process would.
    """
    from nxgates.core.pool import make_pool

    DM, R = m.A.shape
    pool = make_pool(executor, workers, None, scheduler)
    try:
        job = CellsJob(m, f, delta, pool.array((DM, R), np.int64), pool.array((R, DM), np.int64), x_shifts(m, delta))
        for out in (job.out_a, job.out_b):  # a cell no task delivered cannot pass by accident
            out[...] = np.iinfo(np.int64).min
        handle = pool.share(job)
        for columns in _split(R, pool.n_workers):
            pool.submit(_cells_a_task, (handle, columns.start, columns.stop),
                        label=f"A columns {columns.start}..{columns.stop - 1}",
                        on_result=partial(_store_cells, job.out_a[:, columns.start : columns.stop]) if pool.remote
                        else None)
        for rows in _split(R, pool.n_workers):
            pool.submit(_cells_b_task, (handle, rows.start, rows.stop), label=f"B rows {rows.start}..{rows.stop - 1}",
                        on_result=partial(_store_cells, job.out_b[rows.start : rows.stop]) if pool.remote else None)
        n_tasks = pool.n_submitted
        while True:
            left = ctx.remaining()
            waited = pool.wait(n_tasks, 0.2 if left is None else max(0.0, min(0.2, left)))
            ctx.check_time()
            if not waited.timed_out:
                break
        if waited.reached:
            ctx.progress.advance(2 * DM * R)  # only here: the fallback below counts the cells itself
            return job.out_a.copy(), job.out_b.copy()
    finally:
        pool.close()
    return diffs_fast_a(m, f, delta, ctx), diffs_fast_b(m, f, delta, ctx)


# ---- the gate ------------------------------------------------------------------------------------------


def validate(p: dict) -> None:
    if p["R"] > p["DM"]:
        raise ConfigError(f"R={p['R']} must not exceed DM={p['DM']} (a LoRA rank is at most the width)")
    T, DM, R = p["T"], p["DM"], p["R"]
    tensors = T * DM + DM * DM + 2 * DM * R  # x, W, A, B
    workers = gradcheck_workers(p.get("workers", 0), T, DM, R)
    work = 12 * T * DM + 4 * T * R + workers * chunk_elements(T, DM, R)  # forward/backward, each worker's chunks
    require(8 * (3 * tensors + work), f"lora at T={T} DM={DM} R={R}")


def chunk_elements(T: int, DM: int, R: int) -> int:
    """int64 elements a gradcheck worker's temporaries hold at once: ``x * delta`` and the sort that finds its
    distinct values (a few ``(T, 2 DM)`` arrays); a block of columns' distinct moves of h, or the guarded
    path's per-cell moves, and the arrays that make them (about four of at most :data:`MOVES_ELEMENTS`); and
    the guarded path's ``(rows, R, T, DM)`` blocks (about four alive; the proven path's blocks are smaller,
    :data:`MOVED_ELEMENTS`). The chunk sizes cap them at large sizes (64 MiB); small models need only what
    their sizes give, so a tight memory limit does not refuse the seed's size."""
    block = R * T * DM  # one row of A's guarded block
    rows = min(DM, max(1, CHECKED_ELEMENTS // max(1, block)))
    return 11 * DM * T + 4 * min(MOVES_ELEMENTS, 2 * R * T * DM) + 4 * rows * block


def run(ctx: RunContext) -> GateOutput:
    p = ctx.params
    T, DM, R, delta, tol = p["T"], p["DM"], p["R"], p["delta"], p["tol_permil"]
    naming = f"T={T} DM={DM} R={R} delta={delta}"
    try:
        return _run(ctx, T, DM, R, delta, tol)
    except q20.Q20Overflow as exc:
        raise ResourceError(f"lora at {naming}: {exc}; use smaller sizes or delta") from None


def _run(ctx: RunContext, T: int, DM: int, R: int, delta: int, tol: int) -> GateOutput:
    out = GateOutput()
    m = init_model(T, DM, R)
    w_before = m.W.copy()
    f = forward(m)
    dA, dB = backward(m, f, ctx.fault)

    trained = DM * R + R * DM
    total = DM * DM + trained
    out.info(f"=== nx_intfp_lora_gradcheck: LoRA parameter-efficient fine-tuning (rank {R}) in Q20 INTEGER,"
             " no float ===")
    out.info("")
    out.info(f" params: base W frozen ({DM * DM}) + LoRA A,B trainable ({trained}) = "
             f"{trained * 1000 // total}permil of full trained (PEFT) L_q32={f.loss}")
    out.info(" gradcheck:")

    ctx.progress.start("gradcheck cells", trained)
    workers = gradcheck_workers(ctx.params.get("workers", 0), T, DM, R)
    scheduler = ctx.options.get("scheduler")
    executor = gradcheck_executor(ctx.params.get("executor", "auto"), scheduler)
    if ctx.params["algorithm"] == "naive":
        diffs_a = diffs_naive(m, m.A, delta, ctx)
        diffs_b = diffs_naive(m, m.B, delta, ctx)
    elif executor == "dask":  # asked for: on the cluster's workers (`workers`, 0 = the pool's default)
        diffs_a, diffs_b = diffs_fast_pooled(m, f, delta, ctx, ctx.params.get("workers", 0), executor, scheduler)
    elif workers > 1:
        diffs_a, diffs_b = diffs_fast_pooled(m, f, delta, ctx, workers, executor)
    else:
        diffs_a = diffs_fast_a(m, f, delta, ctx)
        diffs_b = diffs_fast_b(m, f, delta, ctx)
    ctx.progress.stop()
    if ctx.fault == "train-base":
        m.W.reshape(-1)[0] += delta

    results = [judge("A (lora)", dA, diffs_a, delta, tol), judge("B (lora)", dB, diffs_b, delta, tol)]
    for g in results:
        for i in np.flatnonzero(g.rel > tol):
            out.detail(f" {g.name} cell {i} ana={g.analytic[i]} num={g.numeric[i]} rel={g.rel[i]}")
        out.verbose_lines(partial(_cell_lines, g))
        out.info(f" {g.name}: {g.n_pass}/{g.cells} (worst={g.worst}permil of max|grad|={g.maxabs})")
    n_ok = sum(g.n_pass for g in results)
    out.info("")
    out.info(f" LoRA gradcheck: {n_ok}/{trained} cells correct")
    for g, check in zip(results, (CHECK_A, CHECK_B), strict=True):
        out.check(check, g.passed, f"{g.n_pass}/{g.cells} cells within {tol}permil (worst={g.worst}permil)")
    changed = int(np.count_nonzero(w_before != m.W))
    out.check(CHECK_FROZEN, changed == 0,
              f"W bit-identical after the run ({DM * DM} cells)" if changed == 0
              else f"{changed} of {DM * DM} cells of W changed during the run")

    out.green = (f"NX-INTFP-LORA verdict=GREEN {n_ok}/{trained} -- integer LoRA/PEFT PROVEN (frozen base + "
                 "low-rank adapter grads), no float.")
    out.red = f"NX-INTFP-LORA verdict=RED {n_ok}/{trained} -- adapter Q-scaling bug or base W not frozen"
    out.metrics = {
        "loss_q": f.loss,
        "trained_params": trained,
        "total_params": total,
        "peft_permil": trained * 1000 // total,
    }
    for key, g in zip(("A", "B"), results, strict=True):
        out.metrics[key] = {
            "passed": g.passed,
            "cells_passed": g.n_pass,
            "cells": g.cells,
            "worst_permil": g.worst,
            "max_abs_grad": g.maxabs,
            "analytic": g.analytic.tolist(),  # Python ints
            "numeric": g.numeric.tolist(),
        }
    out.digest = partial(_digest, f.loss, results)  # hashed only if read (--repeat)
    return out


def _cell_lines(g: Gradcheck) -> Iterator[str]:
    """Every cell's integers, one line each (``-v``)."""
    for i, (ana, num, rel) in enumerate(zip(g.analytic.tolist(), g.numeric.tolist(), g.rel.tolist(), strict=True)):
        yield f"   {g.name} cell {i} ana={ana} num={num} rel={rel}"


def _digest(loss: int, results: list[Gradcheck]) -> str:
    import hashlib

    h = hashlib.sha256(str(loss).encode())
    for g in results:
        h.update(g.analytic.astype("<i8").tobytes())
        h.update(g.numeric.astype("<i8").tobytes())
    return h.hexdigest()


GATE = GateDef(
    params=PARAMS,
    checks=(CHECK_A, CHECK_B, CHECK_FROZEN),
    run=run,
    faults=FAULTS,
    validate=validate,
    options=("scheduler",),
)
