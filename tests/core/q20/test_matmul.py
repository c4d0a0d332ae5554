"""Q20's matrix products (``matmul``, ``matmul_raw``, ``matmul_per_term``) against plain Python ints with C
semantics: each sum rescaled once or each product, in chunks, exact on both sides of float64's 2^53,
empty and one-dimensional operands, and the refusals."""

import numpy as np
import pytest

from nxgates.core import q20
from nxgates.core.q20 import Q20Overflow, S
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


def refusal(fn):
    with pytest.raises(Q20Overflow) as exc:
        fn()
    return exc.value


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
