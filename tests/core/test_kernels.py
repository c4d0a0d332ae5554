"""Each tape kernel against the documented float32 arithmetic (docs/reduction-order.md), bit for bit: the
products it forms, the axis it hands the reduction, and where the result goes."""

import numpy as np
import pytest

from nxgates.core import kernels as k
from nxgates.core.tape import sequential_sum, tree_sum

F32 = np.float32


def _bits(a):
    return np.asarray(a, F32).view(np.uint32).tolist()


def _tree(terms):
    """The tree of the reduction-order document, one float32 addition at a time."""
    p = [F32(v) for v in terms]
    n = len(p)
    while n > 1:
        h = n // 2
        for i in range(h):
            p[i] = F32(p[i] + p[i + n - h])
        n -= h
    return p[0]


class Spy:
    """A reduction that logs the shape and axis it was handed, then sums by the tree."""

    def __init__(self, sum_=tree_sum):
        self.calls, self.sum = [], sum_

    def __call__(self, buf, axis):
        self.calls.append((buf.shape, axis))
        return self.sum(buf, axis)


def _rand(shape, seed):
    return np.random.default_rng(seed).uniform(-2, 2, shape).astype(F32)


def test_store_or_add_stores_a_first_contribution_and_adds_the_next():
    dst = np.full(3, 5, F32)
    k.run(k.store_or_add(np.array([1, 2, 3], F32), dst, True))
    assert dst.tolist() == [1.0, 2.0, 3.0]
    k.run(k.store_or_add(np.array([0.5, 0.25, -3], F32), dst, False))
    assert dst.tolist() == [1.5, 2.25, 0.0]
    assert dst.dtype == F32


def test_fills():
    dst = np.full((2, 2), 7, F32)
    k.run(k.fill_zero(dst))
    assert _bits(dst) == [[0, 0], [0, 0]]
    k.run(k.fill_one(dst))
    assert dst.tolist() == [[1.0, 1.0], [1.0, 1.0]] and dst.dtype == F32


def test_matvec_forward_sums_each_rows_products_by_the_tree():
    W, x = _rand((3, 5), 1), _rand(5, 2)
    prod_t, y = np.full((5, 3), np.nan, F32), np.full(3, np.nan, F32)
    spy = Spy()
    k.run(k.matvec_forward(spy, W, None, x, prod_t, y))
    assert spy.calls == [((5, 3), 0)]
    assert _bits(y) == _bits([_tree([W[i, j] * x[j] for j in range(5)]) for i in range(3)])


def test_matvec_forward_reads_the_transposed_copy_when_given_one():
    W, x = _rand((3, 5), 1), _rand(5, 2)
    WT = _rand((5, 3), 3)  # what the forward reads instead of W.T
    y = np.empty(3, F32)
    k.run(k.matvec_forward(tree_sum, W, WT, x, np.empty((5, 3), F32), y))
    assert _bits(y) == _bits([_tree([WT[j, i] * x[j] for j in range(5)]) for i in range(3)])


def test_matvec_forward_in_the_sequential_order():
    W, x = _rand((2, 7), 4), _rand(7, 5)
    y = np.empty(2, F32)
    k.run(k.matvec_forward(sequential_sum, W, np.ascontiguousarray(W.T), x, np.empty((7, 2), F32), y))
    expected = []
    for i in range(2):
        acc = F32(0)
        for j in range(7):
            acc = F32(acc + F32(W[i, j] * x[j]))
        expected.append(acc)
    assert _bits(y) == _bits(expected)


def test_outer_products_are_stored_or_added():
    g, x = np.array([1, -2], F32), np.array([0.5, 3, 4], F32)
    dst = np.full((2, 3), np.nan, F32)
    k.run(k.outer_into(g, x, dst))
    assert dst.tolist() == [[0.5, 3, 4], [-1, -6, -8]]
    prod = np.full((2, 3), np.nan, F32)
    k.run(k.outer_add(g, x, prod, dst))
    assert dst.tolist() == [[1, 6, 8], [-2, -12, -16]]
    assert prod.tolist() == [[0.5, 3, 4], [-1, -6, -8]]


@pytest.mark.parametrize("first", [True, False])
def test_matvec_input_grad_sums_over_the_rows(first):
    W, g = _rand((4, 3), 6), _rand(4, 7)
    prod = np.full((4, 3), np.nan, F32)
    dst = np.full(3, 0.5, F32)
    spy = Spy()
    k.run(k.matvec_input_grad(spy, W, g, prod, dst, first))
    assert spy.calls == [((4, 3), 0)]
    sums = [_tree([W[i, j] * g[i] for i in range(4)]) for j in range(3)]
    assert _bits(dst) == _bits([s if first else F32(F32(0.5) + s) for s in sums])


def test_matmul_forward_sums_over_k():
    A, B = _rand((2, 5), 8), _rand((5, 3), 9)
    prod, C = np.full((2, 5, 3), np.nan, F32), np.full((2, 3), np.nan, F32)
    spy = Spy()
    k.run(k.matmul_forward(spy, A, B, prod, C))
    assert spy.calls == [((2, 5, 3), 1)]
    assert _bits(C) == _bits([[_tree([A[i, kk] * B[kk, j] for kk in range(5)]) for j in range(3)] for i in range(2)])


@pytest.mark.parametrize("first", [True, False])
def test_matmul_left_grad_sums_over_j(first):
    g, B = _rand((2, 3), 10), _rand((5, 3), 11)
    prod, dst = np.full((2, 5, 3), np.nan, F32), np.full((2, 5), 0.25, F32)
    spy = Spy()
    k.run(k.matmul_left_grad(spy, g, B, prod, dst, first))
    assert spy.calls == [((2, 5, 3), 2)]
    sums = [[_tree([g[i, j] * B[kk, j] for j in range(3)]) for kk in range(5)] for i in range(2)]
    assert _bits(dst) == _bits([[s if first else F32(F32(0.25) + s) for s in row] for row in sums])


@pytest.mark.parametrize("first", [True, False])
def test_matmul_right_grad_sums_over_i(first):
    A, g = _rand((3, 2), 12), _rand((3, 4), 13)
    prod, dst = np.full((3, 2, 4), np.nan, F32), np.full((2, 4), -1, F32)
    spy = Spy()
    k.run(k.matmul_right_grad(spy, A, g, prod, dst, first))
    assert spy.calls == [((3, 2, 4), 0)]
    sums = [[_tree([A[i, kk] * g[i, j] for i in range(3)]) for j in range(4)] for kk in range(2)]
    assert _bits(dst) == _bits([[s if first else F32(F32(-1) + s) for s in row] for row in sums])


@pytest.mark.parametrize("first", [True, False])
def test_product_grad(first):
    dst = np.full(2, 1, F32)
    k.run(k.product_grad(np.array([2, 3], F32), np.array([0.5, -1], F32), dst, first))
    assert dst.tolist() == ([1.0, -3.0] if first else [2.0, -2.0])


def test_relu_forward_keeps_positives_and_makes_the_rest_plus_zero():
    a = np.array([1.5, 0.0, -0.0, -2.0, 1e-45, 0.75, np.nan, -np.inf, np.inf], F32)
    out, positive = np.full(9, 9, F32), np.zeros(9, bool)
    k.run(k.relu_forward(a, positive, out))
    assert _bits(out) == _bits([1.5, 0.0, 0.0, 0.0, 1e-45, 0.75, 0.0, 0.0, np.inf])
    assert positive.tolist() == [True, False, False, False, True, True, False, False, True]


@pytest.mark.parametrize("first", [True, False])
def test_relu_input_grad_passes_g_where_the_input_was_positive_and_plus_zero_elsewhere(first):
    positive = np.array([True, False, False, True])
    g = np.array([4, -5, np.nan, -0.0], F32)
    dst = np.full(4, -0.0 if first else 1, F32)
    k.run(k.relu_input_grad(positive, g, dst, first))
    assert _bits(dst) == (_bits([4, 0.0, 0.0, -0.0]) if first else _bits([5, 1, 1, 1]))


def test_a_kernels_calls_read_their_arrays_when_they_run_not_when_they_are_made():
    """The calls hold views: run again after the inputs changed, they give the new inputs' results (a
    reduction's last element taken as a number when planned would repeat the first run's)."""
    W, x = _rand((3, 4), 21), _rand(4, 22)
    prod, y = np.empty((4, 3), F32), np.empty(3, F32)
    for reduce in (tree_sum, sequential_sum):
        calls = k.matvec_forward(reduce, W, np.ascontiguousarray(W.T), x, prod, y)
        for seed in (23, 24):
            x[...] = _rand(4, seed)
            k.run(calls)
            expected = [_tree([W[i, j] * x[j] for j in range(4)]) for i in range(3)] if reduce is tree_sum else [
                _loop([W[i, j] * x[j] for j in range(4)]) for i in range(3)]
            assert _bits(y) == _bits(expected)
    a, sq, out = _rand(2, 25), np.empty(2, F32), np.empty((), F32)
    calls = k.mse_forward(tree_sum, a, np.zeros(2, F32), np.empty(2, F32), sq, out)
    for seed in (26, 27):
        a[...] = _rand(2, seed)
        k.run(calls)
        assert _bits(out) == _bits(F32(_tree([F32(v * v) for v in a]) / F32(2)))


def _loop(terms):
    acc = F32(0)
    for v in terms:
        acc = F32(acc + F32(v))
    return acc


def test_sum_forward_sums_every_element_in_row_major_order():
    a = _rand((3, 5), 14)
    buf, out = np.full(15, np.nan, F32), np.full((), np.nan, F32)
    spy = Spy()
    k.run(k.sum_forward(spy, a, buf, out))
    assert spy.calls == [((15,), 0)]
    assert _bits(out) == _bits(_tree(a.reshape(-1).tolist()))


@pytest.mark.parametrize("first", [True, False])
def test_broadcast_grad_hands_the_scalar_to_every_element(first):
    dst = np.full((2, 2), 1, F32)
    k.run(k.broadcast_grad(np.array(3, F32), dst, first))
    assert dst.tolist() == ([[3.0, 3.0], [3.0, 3.0]] if first else [[4.0, 4.0], [4.0, 4.0]])


def test_mse_forward_is_the_tree_sum_of_squares_over_n():
    y, t = _rand((2, 3), 15), _rand((2, 3), 16)
    diff, sq, out = np.full((2, 3), np.nan, F32), np.full((2, 3), np.nan, F32), np.full((), np.nan, F32)
    spy = Spy()
    k.run(k.mse_forward(spy, y, t, diff, sq, out))
    assert spy.calls == [((6,), 0)]
    d = [F32(a - b) for a, b in zip(y.reshape(-1), t.reshape(-1), strict=True)]
    assert _bits(diff) == _bits(np.array(d).reshape(2, 3))
    assert _bits(out) == _bits(F32(_tree([F32(v * v) for v in d]) / F32(6)))


def test_mse_grad_is_twice_the_difference_over_n_times_the_incoming_gradient():
    diff = np.array([1.0, -3.0, 0.1], F32)
    dy = np.full(3, np.nan, F32)
    k.run(k.mse_grad(diff, np.array(0.5, F32), dy))
    c = F32(2) / F32(3)
    assert _bits(dy) == _bits([F32(F32(v * c) * F32(0.5)) for v in diff])


@pytest.mark.parametrize("first", [True, False])
def test_negated_grad(first):
    dst = np.full(2, 1, F32)
    k.run(k.negated_grad(np.array([2, -0.5], F32), dst, first))
    assert dst.tolist() == ([-2.0, 0.5] if first else [-1.0, 1.5])
