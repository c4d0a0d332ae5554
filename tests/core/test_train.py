"""The training kernels: a reduction whose bits depend only on B, and the float32 and Q20 updates."""

import numpy as np
import pytest

from nxgates.core import q20
from nxgates.core.tape import F32, tree_sum
from nxgates.core.train import batch_mean, q20_sgd_step, sgd_step, streamed_batch_mean, tree_leaf_order


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
