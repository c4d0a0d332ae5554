"""The Q20 kernels one by one: C's truncating division, exact bounds at their edges, and the labels and
limits their refusals name."""

import numpy as np
import pytest

from nxgates.core import q20
from nxgates.core.q20 import LIMIT, Q20Overflow, S

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


@pytest.mark.parametrize("d", [1, 2, 3, 10, 16, S, 12])
def test_tdiv_truncates_toward_zero(d):
    a = np.array([-3 * d - 1, -2 * d, -1, 0, 1, d - 1, d, 5 * d + 3, -(d + 1)], np.int64)
    want = [int(v / d) if abs(v) < 1 << 52 else None for v in a.tolist()]
    assert q20.tdiv(a, d).tolist() == want


def test_tdiv_examples():
    assert q20.tdiv(-3, 2).tolist() == -1
    assert q20.tdiv(np.array([-7, 7, -6]), 4).tolist() == [-1, 1, -1]
    assert q20.tdiv(np.array([-7, 7, -6, -5]), 3).tolist() == [-2, 2, -2, -1]
    assert q20.tdiv(np.array([I64_MIN, np.iinfo(np.int64).max]), S).tolist() == [-(1 << 43), (1 << 43) - 1]
    assert q20.tdiv(np.array([I64_MIN]), 3).tolist() == [-(1 << 63) // 3 + 1]


def test_tdiv_divides_by_positive_integers_only():
    for d in (0, -2):
        with pytest.raises(ValueError, match=r"^tdiv divides by a positive integer$"):
            q20.tdiv(np.array([4]), d)


def test_tdiv_s_inplace_is_tdiv_by_s_in_the_array_itself():
    a = np.array([-S - 1, -S, -1, 0, 1, S - 1, S, 3 * S + 5, I64_MIN], np.int64)
    want = q20.tdiv(a, S).tolist()
    out = q20.tdiv_s_inplace(a)
    assert out is a and a.tolist() == want == [-1, -1, 0, 0, 0, 0, 1, 3, -(1 << 43)]


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


def test_matmul_rescales_each_sum_once():
    a = np.array([[S, -S // 2], [3, 1]], np.int64)
    b = np.array([[S + 1, 2], [3, -S]], np.int64)
    raw = q20.matmul_raw(a, b)
    assert raw.tolist() == [[S * (S + 1) - 3 * S // 2, 2 * S + S * S // 2], [3 * S + 6, 6 - S]]
    assert q20.matmul(a, b).tolist() == q20.tdiv(raw, S).tolist()
    assert q20.matmul(a, b).tolist() == [[S - 1, 2 + S // 2], [3, 0]]


def test_matmul_is_exact_beyond_float64():
    a = np.array([[(1 << 40) + 1, 1]], np.int64)
    b = np.array([[(1 << 20) + 1], [-1]], np.int64)
    assert not q20.float_exact(a, b)
    assert q20.matmul_raw(a, b).tolist() == [[((1 << 40) + 1) * ((1 << 20) + 1) - 1]]


def test_float_exact_up_to_2_53():
    assert q20.float_exact(np.array([[1 << 26, 0]]), np.array([[1 << 26], [1]]))  # 2^26 * 2^26 * 2 = 2^53
    assert not q20.float_exact(np.array([[1 << 26, 0]]), np.array([[(1 << 26) + 1], [1]]))


def test_matmul_refuses_by_the_tight_bound_and_names_it():
    a = np.array([[1 << 31, 1]], np.int64)
    b = np.array([[1 << 30], [1 << 31]], np.int64)  # coarse: 2^31 * 2^31 * 2 fails; tight: 2^61 + 2^31 holds
    assert q20.matmul_raw(a, b).tolist() == [[(1 << 61) + (1 << 31)]]
    b2 = np.array([[1 << 31], [1 << 31]], np.int64)
    assert "in x@W (" in str(refusal(lambda: q20.matmul(a, b2 * 2, "x@W")))
    assert "in matmul (" in str(refusal(lambda: q20.matmul_raw(a, b2 * 2)))
    assert "in matmul (" in str(refusal(lambda: q20.matmul(a, b2 * 2)))
    assert q20.matmul_raw(np.zeros((2, 0), np.int64), np.zeros((0, 3), np.int64)).tolist() == [[0] * 3] * 2


def test_matmul_per_term_rescales_each_product():
    a = np.array([[3, -5], [S + 7, 1]], np.int64)
    b = np.array([[S // 2, 1], [S // 2, -S]], np.int64)
    want = [[sum(int(q20.tdiv(int(a[i, k]) * int(b[k, j]), S)) for k in range(2)) for j in range(2)] for i in range(2)]
    assert q20.matmul_per_term(a, b).tolist() == want == [[-1, 5], [(S + 7) // 2, 0]]


def test_matmul_per_term_in_chunks_of_k(monkeypatch):
    rng = np.random.default_rng(5)
    a = rng.integers(-(1 << 30), 1 << 30, (3, 7))
    b = rng.integers(-(1 << 30), 1 << 30, (7, 2))
    want = q20.matmul_per_term(a, b)
    for chunk in (1, 6, 7, 12):
        monkeypatch.setattr(q20, "_CHUNK_ELEMENTS", chunk)
        assert q20.matmul_per_term(a, b).tolist() == want.tolist()
    exact = [[sum(int(a[i, k]) * int(b[k, j]) // S + (1 if int(a[i, k]) * int(b[k, j]) % S and
                                                        int(a[i, k]) * int(b[k, j]) < 0 else 0)
                  for k in range(7)) for j in range(2)] for i in range(3)]
    assert want.tolist() == exact


def test_matmul_per_term_refuses_mismatched_shapes_and_overflow():
    with pytest.raises(ValueError, match=r"^matmul_per_term shapes \(2, 3\) @ \(2, 3\)$"):
        q20.matmul_per_term(np.zeros((2, 3), np.int64), np.zeros((2, 3), np.int64))
    a = np.array([[1 << 31, 1 << 31]], np.int64)
    assert "in dB (" in str(refusal(lambda: q20.matmul_per_term(a, a.T, "dB")))
    assert "in matmul per term (" in str(refusal(lambda: q20.matmul_per_term(a, a.T)))
