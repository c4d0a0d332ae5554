"""Q20's element-wise ``mul`` and ``add`` and its sums (``total``, ``sum_squares``): exact against Python ints,
bounded per row along an axis, refused past their limits under their own names."""

import numpy as np
import pytest

from nxgates.core import q20
from nxgates.core.q20 import Q20Overflow

rng = np.random.default_rng(20)


def test_sum_squares_and_total_match_python():
    y = rng.integers(-(1 << 28), 1 << 28, size=(4, 9))
    assert int(q20.sum_squares(y)) == sum(v * v for v in y.ravel().tolist())
    assert q20.total(y, 1).tolist() == [sum(r) for r in y.tolist()]


def refusal(fn):
    with pytest.raises(Q20Overflow) as exc:
        fn()
    return exc.value


def test_mul_and_add_at_their_bounds():
    assert q20.mul(np.array([1 << 31, -3]), np.array([(1 << 31) - 1]), "m").tolist() == [(1 << 62) - (1 << 31),
                                                                                          -3 * ((1 << 31) - 1)]
    assert "in m (" in str(refusal(lambda: q20.mul(np.array([1 << 31]), np.array([-(1 << 31)]), "m")))
    assert "in mul (" in str(refusal(lambda: q20.mul(np.array([1 << 31]), np.array([1 << 31]))))
    assert q20.add(np.array([(1 << 61)]), np.array([(1 << 61) - 1]), "a").tolist() == [(1 << 62) - 1]
    assert "in a (" in str(refusal(lambda: q20.add(np.array([1 << 61]), np.array([-(1 << 61)]), "a")))
    assert "in add (" in str(refusal(lambda: q20.add(np.array([1 << 61]), np.array([1 << 61]))))
    assert q20.add([1, 2], [3, -5]).tolist() == [4, -3]


def test_terms_counts_the_summed_elements():
    a = np.zeros((2, 3, 5), np.int64)
    assert q20._terms(a, None) == 30
    assert q20._terms(a, 1) == 3
    assert q20._terms(a, (0, 2)) == 10
    assert type(q20._terms(a, (0, 2))) is int


def test_total_sums_exactly_and_refuses_by_the_tight_bound():
    a = np.array([[1, -2, 3], [4, 5, -6]], np.int64)
    assert q20.total(a).tolist() == 5
    assert q20.total(a, 0).tolist() == [5, 3, -3]
    assert q20.total(a, 1).tolist() == [2, 3]
    big = np.array([1 << 60, -(1 << 60), 5, 7], np.int64)  # the coarse bound fails at 2^62, the tight one holds
    assert q20.total(big).tolist() == 12
    edge = np.array([1 << 61, 1 << 60, (1 << 60) - 4096], np.int64)  # the tight bound just below 2^62
    assert q20.total(edge, what="t").tolist() == (1 << 62) - 4096
    assert "in t (" in str(refusal(lambda: q20.total(np.array([1 << 61, 1 << 61]), what="t")))
    assert "in sum (" in str(refusal(lambda: q20.total(np.array([1 << 61, 1 << 61]))))
    assert q20.total(np.array([[1 << 61, 1 << 61], [1, 2]]), 0).tolist() == [(1 << 61) + 1, (1 << 61) + 2]
    assert "in t (" in str(refusal(lambda: q20.total(np.array([[1 << 61, 1 << 61], [1, 2]]), 1, "t")))
    assert q20.total(np.zeros((0,), np.int64)).tolist() == 0


def test_sum_squares_may_reach_the_squares_limit():
    assert q20.sum_squares(np.array([[3, -4], [1, 2]])).tolist() == 30
    assert q20.sum_squares(np.array([[3, -4], [1, 2]]), axis=1).tolist() == [25, 5]
    two = np.array([1 << 31, 1 << 31], np.int64)  # 2^63: past SQUARES_LIMIT
    exc = refusal(lambda: q20.sum_squares(two, what="L"))
    assert str(exc).startswith("int64 overflow guard tripped in L (") and str(exc).endswith("(less a margin))")
    assert "in sum of squares (" in str(refusal(lambda: q20.sum_squares(two)))
    three = np.array([1 << 31, 1 << 30, 1 << 30], np.int64)  # 2^62 + 2^61: the coarse bound fails, the tight holds
    assert q20.sum_squares(three).tolist() == (1 << 62) + (1 << 61)
    assert q20.sum_squares(np.array([[1 << 31], [1 << 31]]), axis=1).tolist() == [1 << 62, 1 << 62]
    edge = np.array([1 << 30, 1 << 30, 1 << 30, 1 << 30], np.int64)  # coarse bound exactly 2^62
    assert q20.sum_squares(edge).tolist() == 1 << 62


def test_sums_that_reach_the_limit_are_refused():
    with pytest.raises(q20.Q20Overflow):
        q20.total(np.array([1 << 61, 1 << 61]))
    with pytest.raises(q20.Q20Overflow):
        q20.matmul_raw(np.full((1, 8), 1 << 30), np.full((8, 1), 1 << 30))  # each product fits, the sum does not
    with pytest.raises(q20.Q20Overflow):
        q20.matmul_per_term(np.full((1, 8), 1 << 30), np.full((8, 1), 1 << 30))


def test_sums_along_an_axis_are_bounded_per_row():
    """Each row is checked on its own: rows that fit are summed even when the whole array would not."""
    rows = np.array([[1 << 61, 1], [1 << 61, 1]])
    assert q20.total(rows, axis=1).tolist() == [(1 << 61) + 1] * 2
    y = np.array([[(1 << 31) - 1, 1], [(1 << 31) - 1, 1]])
    assert q20.sum_squares(y, axis=1).tolist() == [((1 << 31) - 1) ** 2 + 1] * 2
    assert q20.sum_squares(np.array([[1, 2], [3, 4]]), axis=0).tolist() == [10, 20]
