"""Q20 fixed-point integer kernels with C semantics and no silent int64 wrap-around.

The NX seeds compute in i64 with C's division, which truncates toward zero. numpy's ``//`` floors, and
numpy's int64 arithmetic wraps silently on overflow. Every kernel here therefore

* divides with :func:`tdiv` (truncation toward zero), and
* proves, before it multiplies or sums, that no product and no partial sum can leave
  ``(-LIMIT, LIMIT)``, ``LIMIT = 2**62``. First a cheap exact bound in Python ints from the operands'
  largest magnitudes (``k * max|a| * max|b|`` for a k-term dot product); only if that coarse bound fails,
  the tight one, ``sum |a| * |b|`` in float64 (its relative error is far below the factor-2 margin to
  int64's ``2**63``). If that fails too it raises :class:`Q20Overflow` instead of returning a wrapped
  number.

Integer addition is associative, so once the bound holds the order of accumulation cannot change a
result: the vectorised kernels give exactly the numbers of the seed's scalar loops.
"""

from __future__ import annotations

import numpy as np

S = 1 << 20  #: one in Q20
LIMIT = 1 << 62  #: every |intermediate| stays strictly below this
#: A sum of squares (the seed's loss) may go further: its terms are >= 0, so every partial sum is at most the
#: total, and the total fits int64 when it is below 2**63. A float64 tight bound over n terms of magnitude sum
#: at most 2**64 errs by at most n * 2**11 (twice that for a difference of two such sums, as lora's L(+-delta)
#: bound); the 2**53 margin kept below 2**63 covers any n up to 2**41.
SQUARES_LIMIT = (1 << 63) - (1 << 53)
_CHUNK_ELEMENTS = 1 << 22  #: cap on temporary int64 elements in per-term kernels (32 MiB)
#: every integer of magnitude up to 2^53 is a float64, exactly
FLOAT_EXACT = 1 << 53


class Q20Overflow(ArithmeticError):
    """An int64 intermediate would leave the checked range; ``what`` names the computation."""

    def __init__(self, what: str, bound: float, limit: str = "2^62"):
        super().__init__(f"int64 overflow guard tripped in {what} (|value| could reach {bound:.3g} >= {limit})")
        self.what = what
        self.bound = bound


def as_q(a: np.ndarray | list | int) -> np.ndarray:
    """An int64 array; refuses floats so a float never sneaks into the integer path."""
    arr = np.asarray(a)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"Q20 kernels take integers, got dtype {arr.dtype}")
    return arr.astype(np.int64, copy=False)


def check_bound(bound: int | float | np.floating, what: str, limit: int | None = None) -> None:
    """Raise :class:`Q20Overflow` unless ``bound`` (an upper bound of |value|) is below ``limit`` (default
    :data:`LIMIT`, read at call time)."""
    limit = LIMIT if limit is None else limit
    if not bound < limit:  # also catches NaN / inf
        raise Q20Overflow(what, float(bound), "2^62" if limit == LIMIT else "2^63 (less a margin)")


def abs_f64(a: np.ndarray) -> np.ndarray:
    return np.abs(a.astype(np.float64))


def max_abs(a: np.ndarray | int) -> int:
    """The largest |element| as an exact Python int (np.abs would wrap on int64's minimum)."""
    a = np.asarray(a)
    if a.size == 0:
        return 0
    return max(int(a.max()), -int(a.min()))


def tdiv(a: np.ndarray | int, d: int) -> np.ndarray:
    """C division by a positive int: truncates toward zero (``tdiv(-3, 2) == -1``, numpy's ``//`` gives -2)."""
    if d <= 0:
        raise ValueError("tdiv divides by a positive integer")
    a = as_q(a)
    if d & (d - 1) == 0:  # a power of two, as S: shift, rounding negatives up first (no integer division)
        shift = d.bit_length() - 1
        return (a + ((a >> 63) & (d - 1))) >> shift
    q, r = np.divmod(a, d)  # floor division: exact on all of int64 (np.abs would wrap on its minimum)
    return q + ((r != 0) & (a < 0))  # a negative quotient with a remainder rounds up: toward zero


def tdiv_s_inplace(a: np.ndarray) -> np.ndarray:
    """``tdiv(a, S)`` written into the int64 array ``a`` itself: the same rounding without new arrays, for a
    kernel's own temporaries (adding ``S - 1`` to negatives cannot overflow)."""
    a += (a >> 63) & (S - 1)
    a >>= S.bit_length() - 1
    return a


def mul(a: np.ndarray, b: np.ndarray, what: str = "mul") -> np.ndarray:
    """Element-wise (broadcasting) product, checked exactly."""
    a, b = as_q(a), as_q(b)
    check_bound(max_abs(a) * max_abs(b), what)
    return a * b


def add(a: np.ndarray, b: np.ndarray, what: str = "add") -> np.ndarray:
    """Element-wise sum, checked exactly."""
    a, b = as_q(a), as_q(b)
    check_bound(max_abs(a) + max_abs(b), what)
    return a + b


def _terms(a: np.ndarray, axis: int | tuple[int, ...] | None) -> int:
    if axis is None:
        return a.size
    axes = (axis,) if isinstance(axis, int) else axis
    return int(np.prod([a.shape[ax] for ax in axes], dtype=np.int64))


def total(a: np.ndarray, axis: int | tuple[int, ...] | None = None, what: str = "sum") -> np.ndarray:
    """Sum along ``axis``, checked: the sum of |terms| bounds every partial sum in any order."""
    a = as_q(a)
    if a.size and max_abs(a) * _terms(a, axis) >= LIMIT:
        check_bound(np.max(np.sum(abs_f64(a), axis=axis)), what)
    return np.sum(a, axis=axis, dtype=np.int64)


def sum_squares(y: np.ndarray, axis: int | tuple[int, ...] | None = None, what: str = "sum of squares"):
    """``sum y*y`` (the seed's loss, left in Q40), checked."""
    y = as_q(y)
    if y.size and max_abs(y) ** 2 * _terms(y, axis) >= LIMIT:
        check_bound(np.max(np.sum(np.square(abs_f64(y)), axis=axis)), what, SQUARES_LIMIT)
    return np.sum(y * y, axis=axis, dtype=np.int64)


def _check_dot(a: np.ndarray, b: np.ndarray, what: str) -> None:
    """Bound every product and partial sum of ``a @ b``: coarse and exact first, tight in float64 if needed."""
    if a.size and b.size and max_abs(a) * max_abs(b) * a.shape[-1] >= LIMIT:
        check_bound(np.max(abs_f64(a) @ abs_f64(b)), what)


def matmul(a: np.ndarray, b: np.ndarray, what: str = "matmul") -> np.ndarray:
    """``a @ b`` rescaled once per sum: ``tdiv(sum_k a[i,k]*b[k,j], S)`` (the seed's forward)."""
    return tdiv(matmul_raw(a, b, what), S)


def float_exact(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether float64 computes ``a @ b`` exactly: every product, and every partial sum in any order (a BLAS
    may also fuse a multiply and an add), is an integer no larger than ``max|a| * max|b| * k``."""
    return max_abs(a) * max_abs(b) * a.shape[-1] <= FLOAT_EXACT


def matmul_raw(a: np.ndarray, b: np.ndarray, what: str = "matmul") -> np.ndarray:
    """``a @ b`` exactly, not rescaled; callers that re-divide perturbed sums keep this.

    numpy multiplies int64 matrices without BLAS (lora's x@W at xl: 0.1 s); where the product is exact in
    float64 (:func:`float_exact`) BLAS computes it, the same integers in 3 ms.
    """
    a, b = as_q(a), as_q(b)
    _check_dot(a, b, what)
    if float_exact(a, b):
        return (a.astype(np.float64) @ b.astype(np.float64)).astype(np.int64)
    return a @ b


def matmul_per_term(a: np.ndarray, b: np.ndarray, what: str = "matmul per term") -> np.ndarray:
    """``sum_k tdiv(a[i,k]*b[k,j], S)``: each product rescaled before accumulating (the seed's backward).

    Works in chunks of k so the (m, k, n) temporary stays bounded whatever the size.
    """
    a, b = as_q(a), as_q(b)
    m, k = a.shape
    k2, n = b.shape
    if k != k2:
        raise ValueError(f"matmul_per_term shapes {a.shape} @ {b.shape}")
    _check_dot(a, b, what)  # bounds every product and every partial sum
    out = np.zeros((m, n), dtype=np.int64)
    step = max(1, _CHUNK_ELEMENTS // max(1, m * n))
    for k0 in range(0, k, step):
        terms = a[:, k0 : k0 + step, None] * b[None, k0 : k0 + step, :]
        out += np.sum(tdiv(terms, S), axis=1)
    return out
