"""The tape's arenas and leaves: float32 arenas of exactly the capacity (its own or the caller's), nodes laid
out one after the other, reset, views, scratch, copies for another process, leaves copied or referenced
(with or without ``grad_out`` and a transposed copy), and the refusals."""

import copy
import pickle

import numpy as np
import pytest

from nxgates.core.tape import F32, ArenaFull, Node, Tape, sequential_sum, tree_sum


def test_float64_input_is_refused():
    with pytest.raises(TypeError, match="float32"):
        Tape(8).leaf(np.ones(2))


def test_arena_overflow_is_an_error_not_a_silent_overwrite():
    tape = Tape(5)
    tape.leaf(np.ones(4, F32))
    with pytest.raises(ArenaFull):
        tape.leaf(np.ones(2, F32))


rng = np.random.default_rng(13)


def test_a_referenced_leaf_keeps_its_own_gradient():
    """A ``copy=False`` leaf without ``grad_out`` has a gradient of its own, not one shared with the next node."""
    tape = Tape(16)
    w = tape.leaf(np.array([1.0, 2.0], F32), copy=False)
    x = tape.leaf(np.array([3.0, 4.0], F32))
    tape.backward(tape.sum(tape.mul(w, x)))
    assert tape.grad(w).tolist() == [3.0, 4.0]
    assert tape.grad(x).tolist() == [1.0, 2.0]


def test_the_gradient_of_a_referenced_data_leaf_is_zero_and_its_own():
    tape = Tape(16)
    d = tape.leaf(np.array([1.0, 2.0], F32), requires_grad=False, copy=False)
    x = tape.leaf(np.array([3.0, 4.0], F32))
    tape.backward(tape.sum(tape.mul(d, x)))
    assert tape.grad(d).tolist() == [0.0, 0.0]
    assert tape.grad(x).tolist() == [1.0, 2.0]


def bits(a) -> list[int]:
    return np.asarray(a, F32).view(np.uint32).reshape(-1).tolist()


def test_a_tape_writes_into_the_arenas_it_is_given():
    vals, grads = np.zeros(8, F32), np.zeros(8, F32)
    tape = Tape(8, vals=vals, grads=grads)
    x = tape.leaf(np.array([2.0, 3.0], F32))
    tape.backward(tape.sum(tape.mul(x, x)))
    assert vals[:2].tolist() == [2.0, 3.0]
    assert grads[:2].tolist() == [4.0, 6.0]


def test_a_tape_holds_exactly_its_capacity():
    tape = Tape(4)
    tape.leaf(np.ones(4, F32))
    with pytest.raises(ArenaFull, match="^tape arena full: 5 floats needed, capacity 4$"):
        tape.leaf(np.ones(1, F32))


@pytest.mark.parametrize("vals,grads", [
    (np.zeros(4), np.zeros(4, F32)),
    (np.zeros(4, F32), np.zeros(4)),
    (np.zeros(4, F32), np.zeros(3, F32)),
    (np.zeros(3, F32), np.zeros(4, F32)),
])
def test_arenas_must_be_float32_of_the_capacity(vals, grads):
    with pytest.raises(ValueError, match="^a tape's arenas are float32 buffers of at least its capacity$"):
        Tape(4, vals=vals, grads=grads)


def test_refusals_say_what_is_wrong():
    with pytest.raises(TypeError):  # the core plants nothing: a tape takes no fault
        Tape(4, fault="nope")
    tape = Tape(16)
    with pytest.raises(ValueError, match=r"^grad_out must be float32 of shape \(2,\)$"):
        tape.leaf(np.ones(2, F32), grad_out=np.zeros(3, F32))
    with pytest.raises(ValueError, match="grad_out must be float32"):
        tape.leaf(np.ones(2, F32), grad_out=np.zeros(2))
    with pytest.raises(ValueError, match="^backward starts from a scalar node$"):
        tape.backward(tape.leaf(np.ones(2, F32)))


def test_a_transposed_copy_is_checked_and_gives_the_same_bits():
    W = rng.standard_normal((2, 3)).astype(F32)
    v = rng.standard_normal(3).astype(F32)
    plain = Tape(64)
    want = plain.val(plain.matvec(plain.leaf(W), plain.leaf(v))).copy()
    tape = Tape(64)
    nW = tape.leaf(W, copy=False, grad_out=np.zeros_like(W), transposed=np.ascontiguousarray(W.T))
    assert bits(tape.val(tape.matvec(nW, tape.leaf(v)))) == bits(want)
    wrong_shape = np.zeros((2, 2), F32)
    wrong_shape[0] = W[:, 0]  # its first row is W's first column, but the shape is not W.T's
    wrong_values = np.ascontiguousarray(W.T) + F32(1)
    for bad in (wrong_shape, wrong_values, np.ascontiguousarray(W)):
        with pytest.raises(ValueError, match=r"^transposed must be data\.T$"):
            Tape(64).leaf(W, copy=False, transposed=bad)


def f32(*values):
    return np.array(values, F32)


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
