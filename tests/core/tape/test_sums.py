"""The tape's float32 constants and its two reductions: ``constf`` rounds once to float32, ``tree_sum``
is the documented pairwise halving and ``sequential_sum`` the left-to-right loop, along any axis of any
layout, with the same bits whatever the memory order or alignment."""

import numpy as np
import pytest

from nxgates.core.tape import F32, constf, constf_array, sequential_sum, tree_sum
from tests.core.tape.reference import loop_sum, spread, tree_of
from tests.helpers import reference_tree_sum

rng = np.random.default_rng(7)


@pytest.mark.parametrize("n", [1, 2, 3, 7, 64, 100, 784])
def test_tree_sum_is_the_documented_order(n):
    x = rng.standard_normal(n).astype(F32) * F32(1e3)
    got = tree_sum(x.copy(), 0)
    assert got.dtype == F32
    assert got.view(np.uint32) == reference_tree_sum(list(x)).view(np.uint32)


def test_tree_sum_bits_do_not_depend_on_layout_or_alignment():
    m = rng.standard_normal((37, 91)).astype(F32)
    want = tree_sum(m.copy(), 1).copy()
    backing = np.empty(m.size + 1, F32)[1:].reshape(m.shape)  # misaligned by 4 bytes
    backing[...] = m
    assert np.array_equal(tree_sum(backing, 1).view(np.uint32), want.view(np.uint32))
    transposed = np.ascontiguousarray(m.T)  # the other memory order
    assert np.array_equal(tree_sum(transposed, 0).view(np.uint32), want.view(np.uint32))


def test_constf_is_correctly_rounded_float32():
    assert constf(1, 3) == F32(1) / F32(3)
    assert constf(1, 3).dtype == F32
    assert float(constf(1, 3)) != 1 / 3  # float32, not float64


def bits(a) -> list[int]:
    return np.asarray(a, F32).view(np.uint32).reshape(-1).tolist()


def test_constf_array_is_constf_element_wise():
    n = np.array([1, 2, 7, -5, 1 << 24])
    assert bits(constf_array(n, 3)) == bits([constf(int(v), 3) for v in n])


def f32(*values):
    return np.array(values, F32)


def test_constf_divides_in_float32():
    assert constf(1, 8) == F32(0.125) and constf(-6, 4) == F32(-1.5)
    assert type(constf(1, 3)) is np.float32 and constf(1, 3) == F32(1) / F32(3)
    got = constf_array(np.array([-6, 0, 3]), 4)
    assert got.dtype == F32 and got.tolist() == [-1.5, 0.0, 0.75]


@pytest.mark.parametrize("shape, axis", [((20,), 0), ((3, 20), 1), ((20, 3), 0), ((4, 20, 3), 1), ((3, 4, 20), 2),
                                         ((20, 1), 0), ((1, 20), 1), ((2, 1, 20), 2), ((20, 5, 1), 0)])
def test_sequential_sum_is_the_loop_along_any_axis_of_any_layout(shape, axis):
    buf = spread(shape, seed=len(shape) + axis)
    want = np.apply_along_axis(loop_sum, axis, buf)
    got = sequential_sum(buf.copy(), axis)
    assert got.shape == want.shape
    assert got.view(np.uint32).tolist() == want.astype(F32).view(np.uint32).tolist()
    transposed = np.asfortranarray(buf)  # the other memory order: the other path for the same sums
    assert sequential_sum(transposed, axis).view(np.uint32).tolist() == got.view(np.uint32).tolist()


def test_sequential_sum_of_a_column_cut_from_a_wider_array_is_the_loop():
    """A size-1 axis may have any stride: it must not make numpy's reduce (pairwise along its inner loop) look
    like a sum across slices."""
    cuts = (lambda w: (w[:, :1], 0), lambda w: (w.reshape(40, 3, 1)[:, :1, :], 0), lambda w: (w.T[:1, :], 1))
    for cut in cuts:
        buf, axis = cut(spread((40, 3), seed=9))
        want = loop_sum(np.moveaxis(buf, axis, 0).reshape(-1))
        got = sequential_sum(buf, axis)
        assert got.reshape(-1).view(np.uint32).tolist() == [want.view(np.uint32)]


def test_sequential_sum_starts_from_positive_zero():
    assert np.signbit(sequential_sum(f32(-0.0, -0.0), 0)) == np.False_
    got = sequential_sum(np.full((3, 4), -0.0, F32), 0)
    assert not np.signbit(got).any() and got.shape == (4,)
    got = sequential_sum(np.full((3, 4), -0.0, F32), 1)
    assert not np.signbit(got).any() and got.shape == (3,)


@pytest.mark.parametrize("shape, axis", [((1,), 0), ((2,), 0), ((3,), 0), ((9,), 0), ((4, 9), 1), ((9, 4), 0),
                                         ((3, 9, 2), 1), ((2, 3, 9), 2)])
def test_tree_sum_is_the_pairwise_halving_along_any_axis(shape, axis):
    buf = spread(shape, seed=3 * len(shape) + axis)
    want = np.apply_along_axis(tree_of, axis, buf)
    got = tree_sum(buf.copy(), axis)
    assert np.shape(got) == want.shape
    assert np.asarray(got).view(np.uint32).tolist() == want.astype(F32).view(np.uint32).tolist()


def test_tree_sum_of_three_adds_the_outer_pair_first():
    assert tree_sum(f32(1e8, 1.0, -1e8), 0) == F32(1)
    assert sequential_sum(f32(1e8, 1.0, -1e8), 0) == F32(0)
