"""The tape's arenas and each op's forward values and gradients, exactly: the float32 bits of the
documented order, every gradient accumulated where a node is used twice, and the refusals."""

import numpy as np
import pytest

from nxgates.core.tape import F32, ArenaFull, Tape, constf, constf_array
from nxgates.gates._tape_faults import ReluGradEverywhereTape
from tests.helpers import reference_tree_sum

rng = np.random.default_rng(13)


def test_a_referenced_leaf_keeps_its_own_gradient():
    """Regression: a ``copy=False`` leaf without ``grad_out`` once shared its gradient with the next node."""
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


def ref_dot(row, col) -> np.float32:
    """Each product rounded to float32, then the documented tree order."""
    return reference_tree_sum([F32(F32(a) * F32(b)) for a, b in zip(row, col, strict=True)])


def test_matmul_and_matvec_forward_are_the_float32_bits_of_the_documented_order():
    tape = Tape(4096)
    A = rng.standard_normal((3, 7)).astype(F32)
    B = rng.standard_normal((7, 5)).astype(F32)
    v = rng.standard_normal(7).astype(F32)
    C = tape.val(tape.matmul(tape.leaf(A), tape.leaf(B)))
    assert bits(C) == bits([[ref_dot(A[i], B[:, j]) for j in range(5)] for i in range(3)])
    y = tape.val(tape.matvec(tape.leaf(A), tape.leaf(v)))
    assert bits(y) == bits([ref_dot(A[i], v) for i in range(3)])


def test_add_mul_sum_and_mse_forward_values():
    tape = Tape(256)
    a = rng.standard_normal((2, 3)).astype(F32)
    b = rng.standard_normal((2, 3)).astype(F32)
    na, nb = tape.leaf(a), tape.leaf(b)
    assert bits(tape.val(tape.add(na, nb))) == bits(a + b)
    assert bits(tape.val(tape.mul(na, nb))) == bits(a * b)
    assert bits(tape.val(tape.sum(na))) == bits(reference_tree_sum(list(a.reshape(-1))))
    sq = [F32(F32(x - y) * F32(x - y)) for x, y in zip(a.reshape(-1), b.reshape(-1), strict=True)]
    assert bits(tape.val(tape.mse(na, nb))) == bits(reference_tree_sum(sq) / F32(6))


def test_a_node_used_twice_accumulates_both_gradients():
    tape = Tape(64)
    x = tape.leaf(np.array([1.5, -2.0, 3.0], F32))
    tape.backward(tape.sum(tape.mul(x, x)))  # d/dx sum x^2 = 2x: the two contributions add
    assert tape.grad(x).tolist() == [3.0, -4.0, 6.0]
    tape.reset()
    y = tape.leaf(np.array([1.0, 2.0], F32))
    tape.backward(tape.sum(tape.add(y, y)))
    assert tape.grad(y).tolist() == [2.0, 2.0]


def test_a_matrix_used_in_two_matvecs_gets_both_gradients():
    tape = Tape(256)
    W = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], F32)
    u, v = np.array([1.0, -1.0], F32), np.array([2.0, 0.5], F32)
    nW = tape.leaf(W)
    loss = tape.add(tape.sum(tape.matvec(nW, tape.leaf(u))), tape.sum(tape.matvec(nW, tape.leaf(v))))
    tape.backward(loss)
    assert tape.grad(nW).tolist() == [[3.0, -0.5]] * 3  # d/dW sum(W u) + sum(W v) = u + v in every row


def test_a_gradient_nothing_reached_is_zero():
    tape = Tape(16)
    x = tape.leaf(np.array([1.0, 2.0], F32))
    unused = tape.leaf(np.array([5.0, 6.0], F32))
    tape.backward(tape.sum(x))
    assert tape.grad(unused).tolist() == [0.0, 0.0]


def test_an_op_on_data_alone_needs_no_gradient():
    tape = Tape(16)
    a = tape.leaf(np.ones(2, F32), requires_grad=False)
    b = tape.leaf(np.ones(2, F32), requires_grad=False)
    assert not tape.add(a, b).requires_grad
    assert tape.add(a, tape.leaf(np.ones(2, F32))).requires_grad


def test_relu_of_negative_zero_is_positive_zero():
    tape = Tape(8)
    out = tape.relu(tape.leaf(np.array([-0.0, 0.0, -1.0, 2.5], F32)))
    assert bits(tape.val(out)) == bits([0.0, 0.0, 0.0, 2.5])


def test_the_planted_relu_fault_passes_the_gradient_through_everywhere():
    tape = ReluGradEverywhereTape(16)
    x = tape.leaf(np.array([-1.0, 0.0, 2.0], F32))
    tape.backward(tape.sum(tape.relu(x)))
    assert tape.grad(x).tolist() == [1.0, 1.0, 1.0]


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


def test_constf_array_is_constf_element_wise():
    n = np.array([1, 2, 7, -5, 1 << 24])
    assert bits(constf_array(n, 3)) == bits([constf(int(v), 3) for v in n])
