"""The training kernels (nxgates/core/train.py): the pairwise tree over examples (its rounds and leaf order
against a direct walk), the batch mean with and without a caller's scratch and its bits depending only on B,
the streamed mean's reads, and the float32 and Q20 updates, exactly."""

import numpy as np
import pytest

from nxgates.core import q20
from nxgates.core.tape import F32, tree_sum
from nxgates.core.train import batch_mean, q20_sgd_step, sgd_step, streamed_batch_mean, tree_leaf_order, tree_levels


def grads(B, n=37, seed=1):
    return np.random.default_rng(seed).standard_normal((B, n)).astype(F32)


@pytest.mark.parametrize("B", [1, 2, 3, 7, 8, 13])
def test_batch_mean_is_the_pairwise_tree_over_examples(B):
    g = grads(B)
    expected = np.empty(g.shape[1], F32)
    for j in range(g.shape[1]):  # the tree, cell by cell, on a 1-d copy
        expected[j] = tree_sum(g[:, j].copy(), 0) / F32(B)
    kept = g.copy()
    assert batch_mean(g).view(np.uint32).tolist() == expected.view(np.uint32).tolist()
    assert np.array_equal(g, kept)  # the input is left intact


def test_batch_mean_differs_from_a_left_fold_somewhere():
    """The order matters in float32: a sequential sum over the same rows gives other bits (the fault's premise)."""
    g = grads(13, n=400)
    fold = g[0].copy()
    for row in g[1:]:
        fold = fold + row
    assert np.any((fold / F32(13)).view(np.uint32) != batch_mean(g).view(np.uint32))


def handed_over(g, order):
    """A ``take`` for streamed_batch_mean: g's rows in ``order``, each a fresh buffer that is overwritten
    once two more rows have been taken (what the contract allows), so a row held too long shows."""
    rows, held = iter(order), []

    def take():
        row = g[next(rows)].copy()
        held.append(row)
        if len(held) > 2:
            held.pop(0)[...] = np.float32(12345)
        return row

    return take


@pytest.mark.parametrize("B", [*range(1, 40), 63, 64, 65, 100, 255, 1000])
def test_the_streamed_tree_gives_batch_means_bits(B):
    g = grads(B, n=9, seed=B) * F32(10) ** np.random.default_rng(B).integers(-3, 4, (B, 9)).astype(F32)
    if B > 3:
        g[1, 2], g[2, 3], g[3, 4] = np.nan, -0.0, np.inf
    order = tree_leaf_order(B)
    assert sorted(order.tolist()) == list(range(B))  # every example once
    streamed = streamed_batch_mean(B, 9, handed_over(g, order))
    assert streamed.view(np.uint32).tolist() == batch_mean(g).view(np.uint32).tolist()


def test_the_tree_order_is_the_depth_first_walk():
    # round 1 pairs k with k + 4 (of 8), round 2 k with k + 2, round 3 0 with 1
    assert tree_leaf_order(8).tolist() == [0, 4, 2, 6, 1, 5, 3, 7]
    # 7: pairs (0,4) (1,5) (2,6), 3 waits; then (0,2) and (1,3); then the two
    assert tree_leaf_order(7).tolist() == [0, 4, 2, 6, 1, 5, 3]


def test_the_streamed_tree_needs_its_order():
    """Rows handed over in example order are added in another tree: other bits (the test above can fail)."""
    g = grads(13, n=400)
    streamed = streamed_batch_mean(13, 400, handed_over(g, range(13)))
    assert np.any(streamed.view(np.uint32) != batch_mean(g).view(np.uint32))


def test_sgd_step_is_two_float32_roundings():
    w = np.array([1.0, -2.0, 0.1], F32)
    g = np.array([0.3, 0.7, -1e-3], F32)
    lr = F32(1) / F32(3)
    expected = w - (lr * g)
    sgd_step(w, g, lr)
    assert w.dtype == F32 and w.view(np.uint32).tolist() == expected.view(np.uint32).tolist()
    sgd_step(w, g, lr, ascent=True)
    assert w.view(np.uint32).tolist() == (expected + lr * g).view(np.uint32).tolist()


def test_q20_step_truncates_toward_zero():
    p = np.array([0, 0, 10], np.int64)
    g = np.array([3, -3, 0], np.int64)
    # (lr*g)/S with lr = S/2: 1.5 -> 1 and -1.5 -> -1 in C (numpy's floor would give -2)
    assert q20_sgd_step(p, g, q20.S // 2, "t").tolist() == [-1, 1, 10]
    assert q20_sgd_step(p, g, q20.S // 2, "t", ascent=True).tolist() == [1, -1, 10]


def test_q20_step_refuses_to_wrap():
    with pytest.raises(q20.Q20Overflow, match="A: lr_q \\* grad"):
        q20_sgd_step(np.zeros(1, np.int64), np.array([1 << 40], np.int64), 1 << 30, "A")
    with pytest.raises(q20.Q20Overflow, match="A: update"):
        q20_sgd_step(np.array([(1 << 62) - 1], np.int64), np.array([-(1 << 30)], np.int64), q20.S, "A")


def test_the_streamed_tree_leaves_no_garbage_cycle():
    """A reference cycle (a recursive closure was one) would keep the tree's buffers, and the caller's chunks
    behind ``take``, alive until the garbage collector happens to run: dp-train's memory grew run by run.
    With the collector off, ``take`` must be freed by reference counting alone once the caller drops it."""
    import gc
    import weakref

    take = handed_over(grads(37, n=64), tree_leaf_order(37))
    gone = weakref.ref(take)
    gc.disable()
    try:
        streamed_batch_mean(37, 64, take)
        del take
        assert gone() is None
    finally:
        gc.enable()


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
