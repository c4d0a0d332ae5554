"""The training kernels at their edges: the tree's rounds and leaf order against a direct walk, the batch mean
with and without a caller's scratch, the streamed mean's reads, and the exact updates."""

import numpy as np
import pytest

from nxgates.core import q20
from nxgates.core.tape import F32
from nxgates.core.train import batch_mean, q20_sgd_step, sgd_step, streamed_batch_mean, tree_leaf_order, tree_levels


def bits(a):
    return np.asarray(a, F32).view(np.uint32).tolist()


def walk(B: int) -> list[int]:
    """The depth-first walk (left child first) of the tree in which node k of a round of m nodes has the
    children k and k + m - m//2 of the round below when k < m//2, else k alone."""
    sizes = [B]
    while sizes[-1] > 1:
        sizes.append((sizes[-1] + 1) // 2)

    def leaves(r, k):
        if r == 0:
            return [k]
        m = sizes[r - 1]
        h = m // 2
        return leaves(r - 1, k) + (leaves(r - 1, k + m - h) if k < h else [])

    return leaves(len(sizes) - 1, 0)


def tree_mean(rows: np.ndarray) -> np.ndarray:
    """The pairwise tree over rows, written as nested additions of 1-d float32 rows."""
    level = [r.copy() for r in rows]
    while len(level) > 1:
        m, h = len(level), len(level) // 2
        level = [level[k] + level[k + m - h] for k in range(h)] + ([level[h]] if m - h > h else [])
    return level[0] / F32(len(rows))


def test_tree_levels_halve_rounding_up_until_one():
    assert tree_levels(1) == [1]
    assert tree_levels(2) == [2, 1]
    assert tree_levels(3) == [3, 2, 1]
    assert tree_levels(5) == [5, 3, 2, 1]
    assert tree_levels(8) == [8, 4, 2, 1]
    assert tree_levels(9) == [9, 5, 3, 2, 1]


@pytest.mark.parametrize("B", [*range(1, 34), 100, 257])
def test_tree_leaf_order_is_the_depth_first_walk(B):
    order = tree_leaf_order(B)
    assert order.dtype == np.int64
    assert order.tolist() == walk(B)


def test_small_leaf_orders():
    assert tree_leaf_order(1).tolist() == [0]
    assert tree_leaf_order(2).tolist() == [0, 1]
    assert tree_leaf_order(3).tolist() == [0, 2, 1]
    assert tree_leaf_order(5).tolist() == [0, 3, 2, 1, 4]  # (0+3)+2 waits a round, then (1+4)


def spread_rows(B, width=5, seed=0):
    """Rows of very different magnitudes and signs, so that every other order of additions rounds otherwise."""
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((B, width)) * 10.0 ** rng.integers(-6, 7, (B, width))).astype(F32)


@pytest.mark.parametrize("B", [1, 2, 3, 4, 5, 6, 9, 11, 16, 17])
def test_batch_mean_is_the_nested_tree(B):
    rows = spread_rows(B, seed=B)
    assert bits(batch_mean(rows)) == bits(tree_mean(rows))


def test_batch_mean_of_three_adds_the_outer_pair_first():
    rows = np.array([[1e8], [1.0], [-1e8]], F32)
    assert bits(batch_mean(rows)) == bits(np.array([1.0], F32) / F32(3))  # (1e8 + -1e8) + 1, not 1e8 + 1 first


def test_batch_mean_of_one_row_is_a_fresh_copy():
    rows = np.array([[1.5, -2.0]], F32)
    got = batch_mean(rows)
    assert got.tolist() == [1.5, -2.0] and got.dtype == F32
    got[0] = 7
    assert rows[0, 0] == F32(1.5)


def test_batch_mean_of_rows_of_matrices():
    rows = spread_rows(5, width=6).reshape(5, 2, 3)
    got = batch_mean(rows)
    assert got.shape == (2, 3)
    assert bits(got.ravel()) == bits(tree_mean(rows.reshape(5, 6)))


@pytest.mark.parametrize("B", [2, 3, 7, 8])
def test_batch_mean_in_a_callers_scratch(B):
    rows = spread_rows(B, seed=B + 1)
    scratch = np.full((B - B // 2, 5), np.nan, F32)
    kept = rows.copy()
    got = batch_mean(rows, scratch)
    assert bits(got) == bits(tree_mean(rows))
    assert np.array_equal(rows, kept)
    assert not np.isnan(scratch[0]).any()  # the scratch was written


def test_batch_mean_refuses_other_dtypes():
    with pytest.raises(TypeError, match=r"^per-example gradients are float32, got float64$"):
        batch_mean(np.ones((2, 3)))


def handed(rows, order):
    """A ``take`` giving ``rows`` in ``order``, each as a fresh buffer; ``taken`` counts the calls."""
    it = iter(order)
    taken = []

    def take():
        taken.append(1)
        return rows[next(it)].copy()

    return take, taken


@pytest.mark.parametrize("B", [1, 2, 3, 4, 5, 6, 7, 9, 12, 17, 33])
def test_the_streamed_mean_takes_each_row_once_and_gives_the_tree(B):
    rows = spread_rows(B, seed=3 * B)
    take, taken = handed(rows, tree_leaf_order(B))
    got = streamed_batch_mean(B, 5, take)
    assert len(taken) == B
    assert got.dtype == F32 and got.shape == (5,)
    assert bits(got) == bits(tree_mean(rows))


def test_the_streamed_mean_of_one_row():
    take, taken = handed(np.array([[3.0, -6.0]], F32), [0])
    assert streamed_batch_mean(1, 2, take).tolist() == [3.0, -6.0] and len(taken) == 1


def test_sgd_step_descends_by_default_and_ascends_when_asked():
    g = np.array([0.5, -0.25], F32)
    w = np.array([1.0, 1.0], F32)
    sgd_step(w, g, F32(2))
    assert w.tolist() == [0.0, 1.5]
    sgd_step(w, g, F32(2), ascent=True)
    assert w.tolist() == [1.0, 1.0]


def test_sgd_step_rounds_the_rate_to_float32_first():
    w = np.zeros(1, F32)
    g = np.ones(1, F32)
    sgd_step(w, g, 0.1)
    assert bits(w) == [bits(-np.float32(0.1))]
    assert w.dtype == F32


def test_q20_step_descends_by_default():
    p = np.array([100, 100], np.int64)
    g = np.array([q20.S, -2 * q20.S], np.int64)
    assert q20_sgd_step(p, g, 3, "W").tolist() == [97, 106]
    assert q20_sgd_step(p, g, 3, "W", ascent=True).tolist() == [103, 94]
    assert p.tolist() == [100, 100]


def test_q20_step_overflow_names_what_and_where():
    with pytest.raises(q20.Q20Overflow) as info:
        q20_sgd_step(np.zeros(1, np.int64), np.array([1 << 40], np.int64), 1 << 30, "B2")
    assert "in B2: lr_q * grad (" in str(info.value)
    with pytest.raises(q20.Q20Overflow) as info:
        q20_sgd_step(np.array([(1 << 62) - 1], np.int64), np.array([q20.S], np.int64), q20.S, "B2", ascent=True)
    assert "in B2: update (" in str(info.value)


def test_sgd_step_computes_in_float32_whatever_the_gradients_type():
    rng = np.random.default_rng(11)
    g64 = rng.standard_normal(1000)
    w = rng.standard_normal(1000).astype(F32)
    lr = F32(0.1)
    expected = w - lr * g64.astype(F32)
    sgd_step(w, g64, lr)
    assert w.dtype == F32 and bits(w) == bits(expected)
