"""The Q20 kernels against plain Python ints with C semantics, negatives included, and the overflow guard."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from nxgates.core import q20
from nxgates.core.q20 import S
from tests.oracles.seed_lora import cdiv

rng = np.random.default_rng(20)


def py_matmul(a, b, per_term):
    m, k = len(a), len(a[0])
    n = len(b[0])
    out = [[0] * n for _ in range(m)]
    for i in range(m):
        for j in range(n):
            if per_term:
                out[i][j] = sum(cdiv(a[i][t] * b[t][j], S) for t in range(k))
            else:
                out[i][j] = cdiv(sum(a[i][t] * b[t][j] for t in range(k)), S)
    return out


def test_tdiv_truncates_toward_zero_like_c():
    assert int(q20.tdiv(-3 * S, 10)) == -314572  # floor division would give -314573
    assert int(q20.tdiv(3 * S, 10)) == 314572
    assert q20.tdiv(np.array([-7, -1, 0, 1, 7]), 2).tolist() == [-3, 0, 0, 0, 3]


@given(st.lists(st.integers(-(1 << 61), (1 << 61)), min_size=1, max_size=50), st.integers(1, 1 << 40))
def test_tdiv_matches_python_reference(values, d):
    assert q20.tdiv(np.array(values, dtype=np.int64), d).tolist() == [cdiv(v, d) for v in values]


@pytest.mark.parametrize("shape", [(1, 1, 1), (3, 6, 2), (5, 7, 3), (4, 33, 9), (2, 1, 5)])
@pytest.mark.parametrize("per_term", [False, True])
def test_matmul_matches_python_reference(shape, per_term):
    m, k, n = shape
    for _ in range(5):
        a = rng.integers(-8 * S, 8 * S, size=(m, k))
        b = rng.integers(-8 * S, 8 * S, size=(k, n))
        want = py_matmul(a.tolist(), b.tolist(), per_term)
        got = q20.matmul_per_term(a, b) if per_term else q20.matmul(a, b)
        assert got.dtype == np.int64
        assert got.tolist() == want


def test_matmul_per_term_chunks_agree(monkeypatch):
    a = rng.integers(-S, S, size=(3, 50))
    b = rng.integers(-S, S, size=(50, 4))
    whole = q20.matmul_per_term(a, b)
    monkeypatch.setattr(q20, "_CHUNK_ELEMENTS", 7)  # forces many k-chunks
    assert q20.matmul_per_term(a, b).tolist() == whole.tolist()


def test_sum_squares_and_total_match_python():
    y = rng.integers(-(1 << 28), 1 << 28, size=(4, 9))
    assert int(q20.sum_squares(y)) == sum(v * v for v in y.ravel().tolist())
    assert q20.total(y, 1).tolist() == [sum(r) for r in y.tolist()]


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


@given(st.lists(st.integers(-(1 << 61), (1 << 61)), min_size=1, max_size=50), st.integers(0, 40))
def test_tdiv_by_a_power_of_two_uses_shifts_and_still_truncates(values, k):
    d = 1 << k
    assert q20.tdiv(np.array(values, dtype=np.int64), d).tolist() == [cdiv(v, d) for v in values]


def test_max_abs_is_exact_at_the_int64_edge():
    assert q20.max_abs(np.array([-(1 << 63)], dtype=np.int64)) == 1 << 63  # np.abs would wrap to negative
    assert q20.max_abs(np.array([], dtype=np.int64)) == 0
