"""Q20's overflow guard: integers only, the bound checked exactly (2^62, or 2^63 less a margin for a sum of
squares, read at call time), what numpy would wrap silently refused, the largest safe values allowed, and
refusals that name the computation and the limit that tripped, since the user reads them to choose sizes."""

import numpy as np
import pytest

from nxgates.core import q20
from nxgates.core.q20 import LIMIT, Q20Overflow, S


def test_guard_refuses_a_product_numpy_would_wrap():
    a = np.array([[1 << 40]], dtype=np.int64)
    b = np.array([[1 << 30]], dtype=np.int64)
    assert (a @ b)[0, 0] == 0  # numpy wraps silently: 2^70 mod 2^64 == 0
    with pytest.raises(q20.Q20Overflow, match="x@W"):
        q20.matmul(a, b, "x@W")
    with pytest.raises(q20.Q20Overflow):
        q20.matmul_per_term(a, b)
    with pytest.raises(q20.Q20Overflow):
        q20.mul(a, b)


def test_guard_refuses_a_sum_that_would_wrap_even_if_each_term_fits():
    terms = np.full(8, 1 << 60, dtype=np.int64)
    with pytest.raises(q20.Q20Overflow):
        q20.total(terms)
    with pytest.raises(q20.Q20Overflow):
        q20.sum_squares(np.full(4, 1 << 31, dtype=np.int64))
    with pytest.raises(q20.Q20Overflow):
        q20.add(np.array([1 << 62]), np.array([1 << 62]))


def test_guard_allows_the_largest_safe_values():
    a = np.array([[1 << 30, -(1 << 30)]], dtype=np.int64)
    b = np.array([[1 << 30], [1 << 30]], dtype=np.int64)
    assert q20.matmul_raw(a, b).tolist() == [[0]]  # each product 2^60, sum of |products| 2^61 < 2^62


def test_floats_are_refused():
    with pytest.raises(TypeError):
        q20.matmul(np.ones((1, 1)), np.ones((1, 1)))


def test_max_abs_is_exact_at_the_int64_edge():
    assert q20.max_abs(np.array([-(1 << 63)], dtype=np.int64)) == 1 << 63  # np.abs would wrap to negative
    assert q20.max_abs(np.array([], dtype=np.int64)) == 0


I64_MIN = np.iinfo(np.int64).min


def refusal(fn):
    with pytest.raises(Q20Overflow) as exc:
        fn()
    return exc.value


def test_constants():
    assert (S, LIMIT, q20.SQUARES_LIMIT, q20.FLOAT_EXACT) == (1 << 20, 1 << 62, (1 << 63) - (1 << 53), 1 << 53)


def test_as_q_takes_integers_only():
    assert q20.as_q(np.array([1, 2], np.uint8)).dtype == np.int64
    assert q20.as_q([3, -4]).tolist() == [3, -4]
    with pytest.raises(TypeError, match=r"^Q20 kernels take integers, got dtype float64$"):
        q20.as_q(np.array([1.0]))
    with pytest.raises(TypeError, match=r"^Q20 kernels take integers, got dtype bool$"):
        q20.as_q(np.array([True]))


def test_check_bound_refuses_from_the_limit_up():
    q20.check_bound(LIMIT - 1, "x")
    exc = refusal(lambda: q20.check_bound(LIMIT, "the thing"))
    assert str(exc) == "int64 overflow guard tripped in the thing (|value| could reach 4.61e+18 >= 2^62)"
    assert (exc.what, exc.bound) == ("the thing", float(LIMIT))
    assert isinstance(exc, ArithmeticError)


def test_check_bound_with_another_limit_names_it():
    q20.check_bound(q20.SQUARES_LIMIT - 1, "x", q20.SQUARES_LIMIT)
    exc = refusal(lambda: q20.check_bound(q20.SQUARES_LIMIT, "sq", q20.SQUARES_LIMIT))
    assert str(exc) == "int64 overflow guard tripped in sq (|value| could reach 9.21e+18 >= 2^63 (less a margin))"
    assert str(refusal(lambda: q20.check_bound(LIMIT, "y", LIMIT))).endswith(">= 2^62)")
    assert "nan >= 2^62" in str(refusal(lambda: q20.check_bound(float("nan"), "z")))


def test_check_bound_reads_the_limit_at_call_time(monkeypatch):
    monkeypatch.setattr(q20, "LIMIT", 10)
    q20.check_bound(9, "x")
    assert str(refusal(lambda: q20.check_bound(10, "x"))).endswith("could reach 10 >= 2^62)")


def test_overflow_default_limit_text():
    assert str(Q20Overflow("w", 2.0)) == "int64 overflow guard tripped in w (|value| could reach 2 >= 2^62)"


def test_abs_f64_and_max_abs():
    a = np.array([[-3, 2], [1, -7]], np.int64)
    got = q20.abs_f64(a)
    assert got.dtype == np.float64 and got.tolist() == [[3.0, 2.0], [1.0, 7.0]]
    assert q20.max_abs(a) == 7 and q20.max_abs(np.array([5, -2])) == 5
    assert q20.max_abs(np.array([], np.int64)) == 0
    assert q20.max_abs(np.array([I64_MIN, 1])) == 1 << 63
    assert q20.max_abs(-9) == 9
    assert type(q20.max_abs(a)) is int


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


def test_floats_are_refused_with_their_dtype():
    with pytest.raises(TypeError, match="^Q20 kernels take integers, got dtype float64$"):
        q20.mul(np.ones(2), np.ones(2))


def test_a_plain_guard_names_2_to_the_62():
    with pytest.raises(q20.Q20Overflow, match=r"in x@W \(\|value\| could reach 4\.61e\+18 >= 2\^62\)$"):
        q20.check_bound(float(1 << 62), "x@W")
    assert str(q20.Q20Overflow("h@B", 5.0)).endswith("(|value| could reach 5 >= 2^62)")


def test_a_sum_of_squares_guard_names_2_to_the_63_less_a_margin():
    with pytest.raises(q20.Q20Overflow, match=r"in L = sum y\^2 .* >= 2\^63 \(less a margin\)\)$"):
        q20.sum_squares(np.array([3 << 30] * 2, np.int64), what="L = sum y^2")
    q20.check_bound(float(q20.SQUARES_LIMIT) - 2.0**11, "L", q20.SQUARES_LIMIT)  # just below: no refusal
