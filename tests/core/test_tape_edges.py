"""The tape at its edges: the arena's bookkeeping (offsets, the exact capacity, reset), leaves of every kind,
each op's gradients to every operand exactly (first contribution and accumulated, data operands left
alone), the backward sweep's restarts, recording beside a tape's own records, and the two reductions'
choice of path."""

import copy
import pickle

import numpy as np
import pytest

from nxgates.core.tape import F32, ArenaFull, Node, Tape, constf, constf_array, sequential_sum, tree_sum


def f32(*values):
    return np.array(values, F32)


def scalar(tape, value):
    return tape.leaf(np.array(value, F32))


# ---- constants ------------------------------------------------------------------------------------------


def test_constf_divides_in_float32():
    assert constf(1, 8) == F32(0.125) and constf(-6, 4) == F32(-1.5)
    assert type(constf(1, 3)) is np.float32 and constf(1, 3) == F32(1) / F32(3)
    got = constf_array(np.array([-6, 0, 3]), 4)
    assert got.dtype == F32 and got.tolist() == [-1.5, 0.0, 0.75]


# ---- the two reductions -----------------------------------------------------------------------------------


def loop_sum(values) -> np.float32:
    acc = F32(0)
    for v in values:
        acc = F32(acc + F32(v))
    return acc


def spread(shape, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * 10.0 ** rng.integers(-5, 6, shape)).astype(F32)


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


def tree_of(values) -> np.float32:
    level = [F32(v) for v in values]
    while len(level) > 1:
        m, h = len(level), len(level) // 2
        level = [F32(level[k] + level[k + m - h]) for k in range(h)] + ([level[h]] if m - h > h else [])
    return level[0]


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


# ---- the arena ------------------------------------------------------------------------------------------------


def test_a_new_tape_owns_zeroed_float32_arenas_and_sums_by_the_tree():
    tape = Tape(6)
    assert tape.capacity == 6 and tape.top == 0 and tape.nodes == [] and tape.programs == {}
    assert tape.reduce is tree_sum
    for arena in (tape.vals, tape.grads):
        assert arena.dtype == F32 and arena.shape == (6,) and not arena.any()
    assert tape.vals is not tape.grads
    assert Tape(2, reduce=sequential_sum).reduce is sequential_sum


def test_a_tape_uses_the_arenas_it_is_given_when_they_are_large_enough():
    vals, grads = np.zeros(5, F32), np.zeros(6, F32)
    tape = Tape(5, vals=vals, grads=grads)
    assert tape.vals is vals and tape.grads is grads
    with pytest.raises(ValueError, match="^a tape's arenas are float32 buffers of at least its capacity$"):
        Tape(6, vals=vals, grads=grads)
    with pytest.raises(ValueError, match="^a tape's arenas are float32 buffers of at least its capacity$"):
        Tape(5, vals=vals, grads=np.zeros(6, np.float64))


def test_nodes_are_laid_out_one_after_the_other():
    tape = Tape(16)
    a = tape.leaf(np.ones((2, 3), F32))
    b = tape.leaf(np.ones(4, F32))
    s = tape.sum(b)
    assert (a.offset, a.size, b.offset, b.size, s.offset, s.size) == (0, 6, 6, 4, 10, 1)
    assert tape.top == 11 and tape.nodes == [a, b, s]
    assert Node(0, (), False).size == 1 and Node(0, (2, 0), False).size == 0


def test_the_last_float_of_the_arena_can_be_used_and_no_more():
    tape = Tape(5)
    tape.leaf(np.ones(4, F32))
    s = tape.sum(tape.nodes[0])  # exactly fills the arena
    assert s.offset == 4 and tape.top == 5
    with pytest.raises(ArenaFull, match=r"^tape arena full: 7 floats needed, capacity 5$"):
        tape.leaf(np.ones(2, F32))
    assert tape.top == 5 and len(tape.nodes) == 2  # the refused node is not kept


def test_reset_starts_over_at_offset_0_and_drops_the_closures():
    tape = Tape(8)
    x = tape.leaf(f32(1, 2))
    y = tape.relu(x)
    assert y.backward is not None
    tape.reset()
    assert tape.nodes == [] and tape.top == 0 and y.backward is None
    assert tape.leaf(f32(5)).offset == 0


def test_values_and_gradients_are_views_of_the_arenas_unless_referenced():
    tape = Tape(8)
    x = tape.leaf(f32(1, 2, 3, 4).reshape(2, 2))
    tape.val(x)[0, 0] = 9
    assert tape.vals[:4].tolist() == [9, 2, 3, 4]
    tape.val_grad(x)[1, 1] = 7
    assert tape.grads[:4].tolist() == [0, 0, 0, 7] and tape.val_grad(x).shape == (2, 2)
    data, sink = f32(5, 6), np.zeros(2, F32)
    r = tape.leaf(data, copy=False, grad_out=sink)
    assert tape.val(r) is data and tape.val_grad(r) is sink


def test_scratch_is_float32_of_the_shape_and_reused():
    tape = Tape(1)
    big = tape.scratch((3, 4))
    assert big.shape == (3, 4) and big.dtype == F32
    small = tape.scratch((2, 5))
    assert small.shape == (2, 5) and np.shares_memory(small, big)
    bigger = tape.scratch((5, 5))
    assert bigger.shape == (5, 5) and not np.shares_memory(bigger, big)
    assert tape.scratch((0,)).shape == (0,)


def test_a_copy_of_a_tape_for_another_process_keeps_everything_but_its_programs():
    tape = Tape(4)
    tape.programs["k"] = object()
    tape.leaf(f32(1, 2))
    for other in (pickle.loads(pickle.dumps(tape)), copy.copy(tape)):
        assert other.programs == {} and other.capacity == 4 and other.top == 2
        assert other.vals.tolist() == [1, 2, 0, 0] and other.reduce is tree_sum
    assert "k" in tape.programs


# ---- leaves -------------------------------------------------------------------------------------------------


def test_a_leaf_is_copied_into_the_arena_by_default():
    tape = Tape(8)
    data = f32(1, 2)
    x = tape.leaf(data)
    data[0] = 5
    assert tape.val(x).tolist() == [1, 2] and x.requires_grad and x.value_ref is None and x.grad_ref is None
    assert tape.top == 2


def test_a_referenced_leaf_without_grad_out_keeps_arena_room_for_its_gradient():
    tape = Tape(8)
    data = f32(1, 2, 3)
    x = tape.leaf(data, copy=False, requires_grad=False)
    assert tape.val(x) is data and not x.requires_grad and tape.top == 3 and x.offset == 0
    assert tape.vals[:3].tolist() == [0, 0, 0]  # referenced, not copied


def test_a_referenced_leaf_with_grad_out_takes_no_arena_room():
    tape = Tape(8)
    tape.leaf(f32(1))
    sink = np.zeros(2, F32)
    w = tape.leaf(f32(3, 4), copy=False, grad_out=sink)
    assert tape.top == 1 and w.offset == 1 and tape.nodes[-1] is w and w.requires_grad
    x = tape.leaf(f32(5, 6))
    assert x.offset == 1
    tape.backward(tape.sum(tape.mul(w, x)))
    assert sink.tolist() == [5, 6]


def test_leaf_refusals():
    tape = Tape(8)
    with pytest.raises(TypeError, match="^tape values are float32, got int64$"):
        tape.leaf(np.array([1, 2], np.int64))
    with pytest.raises(ValueError, match=r"^grad_out must be float32 of shape \(2, 1\)$"):
        tape.leaf(np.ones((2, 1), F32), grad_out=np.zeros((2, 1), np.float64))
    with pytest.raises(ValueError, match=r"^grad_out must be float32 of shape \(2,\)$"):
        tape.leaf(np.ones(2, F32), grad_out=np.zeros((1, 2), F32))
    assert tape.top == 0


def test_a_leaf_takes_a_list_and_records_its_transposed_copy():
    tape = Tape(8)
    x = tape.leaf([F32(1), F32(2)])
    assert tape.val(x).tolist() == [1, 2]
    W = f32(1, 2, 3, 4, 5, 6).reshape(2, 3)
    WT = np.ascontiguousarray(W.T)
    n = tape.leaf(W, copy=False, grad_out=np.zeros_like(W), transposed=WT)
    assert n.transposed_ref is WT
    assert tape.leaf(f32(1)).transposed_ref is None


def test_a_transposed_copy_is_checked_on_its_first_row_and_shape():
    W = f32(1, 2, 3, 4, 5, 6).reshape(2, 3)
    bad_first_row = np.ascontiguousarray(W.T)
    bad_first_row[0, 1] = 0
    for bad in (bad_first_row, np.ascontiguousarray(W.T)[:2], np.zeros((3, 3), F32)):
        with pytest.raises(ValueError, match=r"^transposed must be data\.T$"):
            Tape(8).leaf(W, copy=False, transposed=bad)


# ---- each op's gradients, exactly ----------------------------------------------------------------------------


def weighted(tape, node, weights):
    """sum(node * weights): a loss whose gradient reaching ``node`` is ``weights``."""
    return tape.sum(tape.mul(node, tape.leaf(np.asarray(weights, F32), requires_grad=False)))


def test_add_hands_its_gradient_to_both_operands():
    tape = Tape(32)
    a, b = tape.leaf(f32(1, 2)), tape.leaf(f32(3, 4))
    tape.backward(weighted(tape, tape.add(a, b), [5, 7]))
    assert tape.grad(a).tolist() == [5, 7] and tape.grad(b).tolist() == [5, 7]


def test_add_of_a_node_to_itself_doubles_and_skips_data():
    tape = Tape(32)
    a, d = tape.leaf(f32(1, 2)), tape.leaf(f32(3, 4), requires_grad=False)
    out = tape.add(tape.add(a, a), d)
    assert out.requires_grad and not tape.add(d, d).requires_grad
    tape.backward(weighted(tape, out, [5, 7]))
    assert tape.grad(a).tolist() == [10, 14] and tape.grad(d).tolist() == [0, 0]
    assert tape.val(out).tolist() == [5, 8]


def test_mul_hands_each_operand_the_other():
    tape = Tape(32)
    a, b = tape.leaf(f32(2, 3)), tape.leaf(f32(5, 7))
    tape.backward(weighted(tape, tape.mul(a, b), [1, 10]))
    assert tape.grad(a).tolist() == [5, 70] and tape.grad(b).tolist() == [2, 30]


def test_mul_by_data_and_by_itself():
    tape = Tape(32)
    a, d = tape.leaf(f32(2, 3)), tape.leaf(f32(5, 7), requires_grad=False)
    tape.backward(tape.sum(tape.add(tape.mul(d, a), tape.mul(a, a))))
    assert tape.grad(a).tolist() == [5 + 4, 7 + 6] and tape.grad(d).tolist() == [0, 0]


def test_relu_passes_the_gradient_where_its_input_is_positive():
    tape = Tape(32)
    a = tape.leaf(f32(-2, 0, 3, 0.5))
    r = tape.relu(a)
    assert tape.val(r).tolist() == [0, 0, 3, 0.5]
    tape.backward(weighted(tape, r, [2, 3, 4, 5]))
    assert tape.grad(a).tolist() == [0, 0, 4, 5]


def test_relu_of_a_node_used_twice_adds_both_gradients():
    tape = Tape(32)
    a = tape.leaf(f32(-1, 2))
    tape.backward(tape.add(weighted(tape, tape.relu(a), [3, 3]), weighted(tape, a, [1, 1])))
    assert tape.grad(a).tolist() == [1, 4]


def test_relu_of_data_needs_no_gradient():
    tape = Tape(32)
    d = tape.leaf(f32(-1, 2), requires_grad=False)
    a = tape.leaf(f32(1, 1))
    tape.backward(tape.sum(tape.mul(tape.relu(d), a)))
    assert tape.grad(a).tolist() == [0, 2] and tape.grad(d).tolist() == [0, 0]


def test_sum_broadcasts_its_gradient():
    tape = Tape(32)
    a = tape.leaf(f32(1, 2, 3, 4).reshape(2, 2))
    s = tape.sum(a)
    assert s.shape == () and tape.val(s) == F32(10)
    k = scalar(tape, 3)
    tape.backward(tape.mul(s, k))
    assert tape.grad(a).tolist() == [[3, 3], [3, 3]] and tape.grad(k) == F32(10)


def test_sum_twice_over_one_node_accumulates():
    tape = Tape(32)
    a = tape.leaf(f32(1, 2))
    tape.backward(tape.add(tape.sum(a), tape.mul(tape.sum(a), scalar(tape, 2))))
    assert tape.grad(a).tolist() == [3, 3]


def test_matvec_gradients_to_the_matrix_and_the_vector():
    tape = Tape(64)
    W = tape.leaf(f32(1, 2, 3, 4, 5, 6).reshape(2, 3))
    x = tape.leaf(f32(1, -1, 2))
    y = tape.matvec(W, x)
    assert tape.val(y).tolist() == [5, 11]
    tape.backward(weighted(tape, y, [2, 3]))
    assert tape.grad(W).tolist() == [[2, -2, 4], [3, -3, 6]]
    assert tape.grad(x).tolist() == [2 + 12, 4 + 15, 6 + 18]


def test_matvec_with_a_matrix_and_a_vector_used_twice():
    tape = Tape(64)
    W = tape.leaf(f32(1, 2, 3, 4).reshape(2, 2))
    x, z = tape.leaf(f32(1, 2)), tape.leaf(f32(3, -1), requires_grad=False)
    y = tape.add(tape.matvec(W, x), tape.matvec(W, z))
    loss = tape.add(weighted(tape, y, [1, 2]), weighted(tape, x, [10, 10]))
    tape.backward(loss)
    # dW = g x^T + g z^T with g = [1, 2]; dx = W^T g + 10
    assert tape.grad(W).tolist() == [[4, 1], [8, 2]]
    assert tape.grad(x).tolist() == [1 + 6 + 10, 2 + 8 + 10]
    assert tape.grad(z).tolist() == [0, 0]


def test_matvec_of_a_data_matrix_reaches_only_the_vector():
    tape = Tape(64)
    W = tape.leaf(f32(1, 2, 3, 4).reshape(2, 2), requires_grad=False)
    x = tape.leaf(f32(1, 2))
    tape.backward(weighted(tape, tape.matvec(W, x), [1, 1]))
    assert tape.grad(x).tolist() == [4, 6] and tape.grad(W).tolist() == [[0, 0], [0, 0]]


def test_matmul_gradients_to_both_factors():
    tape = Tape(128)
    A = tape.leaf(f32(1, 2, 3, 4, 5, 6).reshape(2, 3))
    B = tape.leaf(f32(1, 0, -1, 2, 0, 1).reshape(3, 2))
    C = tape.matmul(A, B)
    assert C.shape == (2, 2) and tape.val(C).tolist() == [[-1, 7], [-1, 16]]
    G = f32(1, 2, 3, 4).reshape(2, 2)
    tape.backward(weighted(tape, C, G))
    Af, Bf = f32(1, 2, 3, 4, 5, 6).reshape(2, 3), f32(1, 0, -1, 2, 0, 1).reshape(3, 2)
    assert tape.grad(A).tolist() == (G @ Bf.T).tolist()
    assert tape.grad(B).tolist() == (Af.T @ G).tolist()


def test_matmul_used_twice_and_with_data():
    tape = Tape(128)
    A = tape.leaf(f32(1, 2, 3, 4).reshape(2, 2))
    D = tape.leaf(f32(1, 1, 0, 1).reshape(2, 2), requires_grad=False)
    C = tape.add(tape.matmul(A, D), tape.matmul(D, A))
    tape.backward(tape.sum(C))
    ones = np.ones((2, 2), F32)
    Df = f32(1, 1, 0, 1).reshape(2, 2)
    assert tape.grad(A).tolist() == (ones @ Df.T + Df.T @ ones).tolist()
    assert tape.grad(D).tolist() == [[0, 0], [0, 0]]


def test_mse_gradients_to_the_prediction_and_the_target():
    tape = Tape(32)
    y, t = tape.leaf(f32(1, 2, 3, 6)), tape.leaf(f32(0, 2, 5, 2))
    loss = tape.mse(y, t)
    assert tape.val(loss) == F32((1 + 0 + 4 + 16) / 4)
    tape.backward(loss)
    assert tape.grad(y).tolist() == [0.5, 0, -1, 2]
    assert tape.grad(t).tolist() == [-0.5, 0, 1, -2]


def test_mse_of_a_node_used_elsewhere_accumulates_and_a_data_target_is_left_alone():
    tape = Tape(32)
    y, t = tape.leaf(f32(1, 3)), tape.leaf(f32(0, 0), requires_grad=False)
    tape.backward(tape.add(tape.mse(y, t), tape.mse(t, y)))
    assert tape.grad(y).tolist() == [2, 6] and tape.grad(t).tolist() == [0, 0]


def test_mse_rounds_every_step_to_float32():
    """The difference, each square, the tree's every partial sum, the mean and both gradient products are
    float32 operations."""
    rng = np.random.default_rng(0)
    n = 255
    yv = (rng.standard_normal(n) * 3).astype(F32)
    tv = rng.standard_normal(n).astype(F32)
    tape = Tape(4 * n)
    y, t = tape.leaf(yv), tape.leaf(tv)
    k = F32(1) / F32(3)
    loss = tape.mse(y, t)
    tape.backward(tape.mul(loss, scalar(tape, k)))
    diff = yv - tv
    want_loss = tree_of(diff * diff) / F32(n)
    assert np.asarray(tape.val(loss)).view(np.uint32) == want_loss.view(np.uint32)
    assert want_loss != F32(np.sum(diff.astype(np.float64) ** 2) / n)  # a float64 sum would round otherwise
    want_dy = (diff * (F32(2) / F32(n))) * k
    assert tape.grad(y).view(np.uint32).tolist() == want_dy.view(np.uint32).tolist()
    assert tape.grad(t).view(np.uint32).tolist() == (-want_dy).view(np.uint32).tolist()


def test_a_scaled_loss_scales_every_gradient():
    tape = Tape(32)
    y, t = tape.leaf(f32(1, 3)), tape.leaf(f32(0, 0), requires_grad=False)
    tape.backward(tape.mul(tape.mse(y, t), scalar(tape, 4)))
    assert tape.grad(y).tolist() == [4, 12]


# ---- the backward sweep -------------------------------------------------------------------------------------


def test_backward_starts_from_one_and_a_second_sweep_starts_afresh():
    tape = Tape(32)
    a = tape.leaf(f32(2, 3))
    loss = tape.sum(tape.mul(a, a))
    tape.backward(loss)
    assert tape.grad(loss) == F32(1) and tape.grad(a).tolist() == [4, 6]
    tape.backward(loss)
    assert tape.grad(loss) == F32(1) and tape.grad(a).tolist() == [4, 6]  # not accumulated over sweeps


def test_backward_from_an_intermediate_scalar_leaves_later_nodes_alone():
    tape = Tape(32)
    a = tape.leaf(f32(2, 3))
    s = tape.sum(a)
    later = tape.mul(s, scalar(tape, 5))
    tape.backward(s)
    assert tape.grad(a).tolist() == [1, 1]
    assert tape.grad(later) == F32(0)  # nothing reached it


def test_backward_refuses_anything_but_a_scalar():
    tape = Tape(8)
    with pytest.raises(ValueError, match="^backward starts from a scalar node$"):
        tape.backward(tape.leaf(f32(1)))


def test_grad_zero_fills_an_unreached_gradient_once_and_keeps_it():
    tape = Tape(8)
    a = tape.leaf(f32(1, 2))
    tape.grads[:2] = 9
    assert tape.grad(a).tolist() == [0, 0] and a.has_grad
    tape.val_grad(a)[...] = 4
    assert tape.grad(a).tolist() == [4, 4]  # reached now: left as it is


# ---- record and replay ----------------------------------------------------------------------------------------


def squares(tape, x, out):
    """A pass: out = x * x, through the tape."""
    n = tape.leaf(x)
    sq = tape.mul(n, n)
    tape._do([(np.copyto, (out, tape.val(sq)))])
    return tape.val(sq)


def test_recording_leaves_the_tapes_own_records_and_programs_alone():
    tape = Tape(5)
    kept = tape.leaf(f32(7))
    tape.programs["other"] = "kept"
    x, out = f32(1, 2), np.empty(2, F32)
    program = tape.record(squares, x, out)
    assert tape.nodes == [kept] and tape.top == 1 and tape.programs == {"other": "kept"}
    assert tape._steps is None
    assert out.tolist() == [1, 4]
    x2, out2 = f32(3, 4), np.empty(2, F32)
    assert program.run(x2, out2).tolist() == [9, 16] and out2.tolist() == [9, 16]


def test_a_recorded_pass_starts_at_offset_0_of_the_same_arenas():
    tape = Tape(4)  # x and x*x: exactly the arena
    tape.leaf(f32(7, 7, 7))
    x, out = f32(1, 2), np.empty(2, F32)
    tape.record(squares, x, out)
    assert tape.vals.tolist() == [1, 2, 1, 4] and tape.top == 3


def test_a_recording_copy_is_of_the_tapes_own_class():
    class Marked(Tape):
        pass

    seen = []
    Marked(4).record(lambda tape, x: seen.append(type(tape)) or tape._do([(np.negative, (x, x))]), f32(1))
    assert seen == [Marked]


def test_replay_records_once_per_key_and_then_replays():
    tape = Tape(4)
    built = []

    def build(tape, x, out):
        built.append(1)
        return squares(tape, x, out)

    out = np.empty(2, F32)
    first = tape.replay("sq", build, f32(1, 2), out)
    assert first.tolist() == [1, 4] and out.tolist() == [1, 4]
    again = tape.replay("sq", build, f32(3, 5), out)
    assert again.tolist() == [9, 25] and out.tolist() == [9, 25] and len(built) == 1
    tape.replay("other", build, f32(1, 1), out)
    assert len(built) == 2 and set(tape.programs) == {"sq", "other"}
    assert tape.nodes == [] and tape.top == 0


def test_a_recording_keeps_every_zero_fill_of_an_unreached_gradient():
    tape = Tape(8)

    def build(tape, x, g):
        a = tape.leaf(x)
        unused = tape.leaf(x)
        tape.backward(tape.sum(a))
        tape._do([(np.copyto, (g, tape.grad(unused)))])
        return g

    g = np.full(2, 9, F32)
    program = tape.record(build, f32(1, 2), g)
    assert g.tolist() == [0, 0]
    tape.grads[...] = 9
    program.run(f32(3, 4), g)
    assert g.tolist() == [0, 0]


@pytest.mark.parametrize("reduce, order", [(tree_sum, tree_of), (sequential_sum, loop_sum)])
def test_a_second_gradient_contribution_is_summed_in_float32_like_the_first(reduce, order):
    # x feeds two matvecs, so its gradient's second contribution is made in a buffer of its own and then
    # added: each column sum in the tape's order in float32, then the two added in float32
    W1, W2, x = spread((33, 40), seed=11), spread((33, 40), seed=12), spread(40, seed=13)
    tape = Tape(1 << 12, reduce=reduce)
    nx = tape.leaf(x)
    n1, n2 = tape.leaf(W1, requires_grad=False), tape.leaf(W2, requires_grad=False)
    tape.backward(tape.sum(tape.add(tape.matvec(n1, nx), tape.matvec(n2, nx))))
    expected = [F32(order(W1[:, j]) + order(W2[:, j])) for j in range(40)]
    assert tape.grad(nx).tobytes() == np.array(expected, F32).tobytes()


def test_mse_adds_its_gradient_to_one_that_reached_y_first():
    # sum(y) is recorded after mse, so its gradient reaches y first and mse's must be added to it
    y, t = np.array([0.5, -1.25, 3.0], F32), np.array([0.25, 0.75, -2.0], F32)
    tape = Tape(64)
    ny, nt = tape.leaf(y), tape.leaf(t, requires_grad=False)
    tape.backward(tape.add(tape.mse(ny, nt), tape.sum(ny)))
    two_over_n = F32(F32(2) / F32(3))
    expected = [F32(F32(1) + F32(F32(F32(a - b) * two_over_n) * F32(1))) for a, b in zip(y, t, strict=True)]
    assert tape.grad(ny).tobytes() == np.array(expected, F32).tobytes()
