"""The Q20 kernels at their edges: C division on all of int64, the overflow guard exactly at 2^62, empty
and one-dimensional operands, sums along one axis, and refusals that name the computation."""

import numpy as np
import pytest

from nxgates.core import q20
from tests.oracles.seed_lora import cdiv

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
EDGES = [INT64_MIN, INT64_MIN + 1, -(1 << 62), -7, -6, -1, 0, 1, 6, 7, (1 << 62) - 1, INT64_MAX]


@pytest.mark.parametrize("d", [1, 2, 3, 5, 7, 10, 12, 1 << 20, (1 << 20) + 1, 3 << 40])
def test_tdiv_truncates_on_the_whole_int64_range(d):
    assert q20.tdiv(np.array(EDGES, dtype=np.int64), d).tolist() == [cdiv(v, d) for v in EDGES]


def test_tdiv_by_s_in_place_rounds_as_tdiv_on_the_whole_int64_range():
    S = q20.S
    values = [*EDGES, -2 * S - 1, -2 * S, -2 * S + 1, -S - 1, -S, -S + 1, -2, S - 1, S, S + 1]
    a = np.array(values, dtype=np.int64)
    assert q20.tdiv_s_inplace(a) is a  # no new array
    assert a.tolist() == [cdiv(v, S) for v in values]


def test_tdiv_of_int64_minimum_by_three_is_negative():
    """|INT64_MIN| wraps in np.abs: the quotient must still come out negative."""
    assert int(q20.tdiv(INT64_MIN, 3)) == -3074457345618258602


@pytest.mark.parametrize("d", [0, -1, -4])
def test_tdiv_refuses_a_divisor_that_is_not_positive(d):
    with pytest.raises(ValueError, match="^tdiv divides by a positive integer$"):
        q20.tdiv(np.array([5, -5]), d)


def test_the_guard_refuses_exactly_two_to_the_62():
    q20.check_bound((1 << 62) - 1, "x")
    with pytest.raises(q20.Q20Overflow):
        q20.check_bound(1 << 62, "x")
    with pytest.raises(q20.Q20Overflow):
        q20.check_bound(float("nan"), "x")


def test_overflow_error_names_the_computation_and_its_bound():
    with pytest.raises(q20.Q20Overflow) as caught:
        q20.mul(np.array([1 << 31]), np.array([1 << 31]), "x@W")
    assert caught.value.what == "x@W"
    assert caught.value.bound == float(1 << 62)
    assert str(caught.value) == "int64 overflow guard tripped in x@W (|value| could reach 4.61e+18 >= 2^62)"


@pytest.mark.parametrize("kernel,args,name", [
    (q20.mul, (np.array([1 << 31]), np.array([1 << 31])), "mul"),
    (q20.add, (np.array([1 << 61]), np.array([1 << 61])), "add"),
    (q20.total, (np.array([1 << 61, 1 << 61]),), "sum"),
    (q20.sum_squares, (np.array([1 << 31, 1 << 31]),), "sum of squares"),  # 2^63: past SQUARES_LIMIT
    (q20.matmul, (np.array([[1 << 31]]), np.array([[1 << 31]])), "matmul"),
    (q20.matmul_raw, (np.array([[1 << 31]]), np.array([[1 << 31]])), "matmul"),
    (q20.matmul_per_term, (np.array([[1 << 31]]), np.array([[1 << 31]])), "matmul per term"),
])
def test_each_kernel_refuses_past_its_limit_under_its_own_name(kernel, args, name):
    with pytest.raises(q20.Q20Overflow, match=rf"tripped in {name} \("):
        kernel(*args)


def test_exact_results_just_below_the_limit_are_returned_not_refused():
    """The exact integer bound decides first; float64 would round 2^62 - 1 up to 2^62 and refuse it."""
    big = (1 << 62) - 1
    assert q20.matmul_raw(np.array([[(1 << 31) - 1]]), np.array([[(1 << 31) + 1]])).tolist() == [[big]]
    assert q20.mul(np.array([(1 << 31) - 1]), np.array([(1 << 31) + 1])).tolist() == [big]
    assert int(q20.total(np.array([big]))) == big
    assert q20.total(np.array([[big], [5]]), axis=1).tolist() == [big, 5]
    assert int(q20.sum_squares(np.array([(1 << 31) - 1]))) == ((1 << 31) - 1) ** 2


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


def test_a_vector_times_a_matrix_is_exact_and_guarded():
    v = np.array([1 << 30] * 8)
    m = np.ones((8, 2), dtype=np.int64)
    assert q20.matmul_raw(v, m).tolist() == [8 << 30, 8 << 30]
    with pytest.raises(q20.Q20Overflow):
        q20.matmul_raw(v, np.full((8, 1), 1 << 30))


def test_empty_operands_give_empty_results():
    assert q20.matmul_raw(np.ones((2, 3), dtype=np.int64), np.zeros((3, 0), dtype=np.int64)).shape == (2, 0)
    assert q20.matmul_raw(np.zeros((0, 3), dtype=np.int64), np.ones((3, 2), dtype=np.int64)).shape == (0, 2)
    assert q20.matmul_raw(np.zeros((2, 0), dtype=np.int64), np.zeros((0, 3), dtype=np.int64)).tolist() == [[0] * 3] * 2
    assert int(q20.total(np.zeros(0, dtype=np.int64))) == 0
    assert int(q20.sum_squares(np.zeros(0, dtype=np.int64))) == 0


def test_floats_are_refused_with_their_dtype():
    with pytest.raises(TypeError, match="^Q20 kernels take integers, got dtype float64$"):
        q20.mul(np.ones(2), np.ones(2))


def test_per_term_shapes_must_agree():
    with pytest.raises(ValueError, match=r"^matmul_per_term shapes \(2, 3\) @ \(4, 1\)$"):
        q20.matmul_per_term(np.ones((2, 3), dtype=np.int64), np.ones((4, 1), dtype=np.int64))


def test_float64_is_exact_up_to_2_to_the_53():
    """Every product and partial sum of ``a @ b`` is at most max|a| * max|b| * k: up to 2^53 float64 holds
    them all exactly, one more and it may not."""
    one = np.ones((1, 1), dtype=np.int64)
    assert q20.float_exact(np.array([[1 << 53]]), one) and not q20.float_exact(np.array([[(1 << 53) + 1]]), one)
    row, col = np.full((1, 4), 1 << 51), np.ones((4, 1), dtype=np.int64)
    assert q20.float_exact(row, col) and not q20.float_exact(row + 1, col)  # k counts: 4 * 2^51 = 2^53
    assert q20.float_exact(np.array([[1 << 62]]), np.zeros((1, 1), dtype=np.int64))  # times 0 is 0, exactly
    assert q20.float_exact(np.zeros((2, 0), dtype=np.int64), np.zeros((0, 3), dtype=np.int64))


def test_matmul_is_exact_on_both_sides_of_the_float64_bound():
    """Where float64 would round (2^53 + 1), the int64 product is used; below it BLAS gives the same integers
    as numpy's int64 loop, with every partial sum of one sign and near 2^53."""
    odd = (1 << 53) + 1
    assert q20.matmul_raw(np.array([[odd]]), np.ones((1, 1), dtype=np.int64)).tolist() == [[odd]]
    assert q20.matmul_raw(np.array([[1, odd]]), np.array([[1], [1]])).tolist() == [[odd + 1]]
    rng = np.random.default_rng(7)
    for k in (1, 3, 64, 1024):
        top = (1 << 32) // k  # max|a| * max|b| * k = 2^21 * 2^32 = 2^53
        a = rng.integers(-(1 << 21), (1 << 21) + 1, (5, k))
        b = rng.integers(-top, top + 1, (k, 6))
        a[0], b[:, 0] = 1 << 21, top  # a row and a column whose products all add up: 2^53 at k = 1, 64, 1024
        assert q20.float_exact(a, b)
        got = q20.matmul_raw(a, b)
        assert got.dtype == np.int64 and got.tolist() == (a @ b).tolist()
        assert got[0, 0] == k * (1 << 21) * top
