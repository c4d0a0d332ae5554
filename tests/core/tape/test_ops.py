"""Each op of the tape, exactly: forward values as the float32 bits of the documented order, gradients to
every operand (first contribution and accumulated, data operands left alone), relu's derivative (its own
and a subclass's), and the backward sweep's start, restarts and refusals."""

import numpy as np
import pytest

from nxgates.core.tape import F32, Tape, sequential_sum, tree_sum
from tests.core.tape.reference import loop_sum, spread, tree_of
from tests.helpers import reference_tree_sum

rng = np.random.default_rng(7)


def test_every_value_and_gradient_is_float32():
    tape = Tape(256)
    a = tape.leaf(rng.standard_normal((3, 4)).astype(F32))
    b = tape.leaf(rng.standard_normal((4, 2)).astype(F32))
    v = tape.leaf(rng.standard_normal(4).astype(F32))
    nodes = [tape.matmul(a, b), tape.matvec(a, v), tape.relu(v), tape.mul(v, v), tape.add(v, v)]
    loss = tape.add(tape.sum(nodes[0]), tape.mse(nodes[1], tape.leaf(np.zeros(3, F32), requires_grad=False)))
    tape.backward(loss)
    for n in [a, b, v, *nodes, loss]:
        assert tape.val(n).dtype == F32
        assert tape.grad(n).dtype == F32
    assert tape.vals.dtype == F32 and tape.grads.dtype == F32


def test_relu_derivative_at_zero_is_zero():
    tape = Tape(16)
    x = tape.leaf(np.array([-1.0, 0.0, 2.0], F32))
    tape.backward(tape.sum(tape.relu(x)))
    assert tape.grad(x).tolist() == [0.0, 0.0, 1.0]


def test_mse_is_the_mean_of_squares():
    tape = Tape(16)
    y = tape.leaf(np.array([1.0, 2.0, 4.0], F32))
    t = tape.leaf(np.array([0.0, 0.0, 1.0], F32))
    loss = tape.mse(y, t)
    tape.backward(loss)
    assert tape.val(loss) == F32(14) / F32(3)
    assert np.allclose(tape.grad(y), [2 / 3, 4 / 3, 2.0])
    assert np.allclose(tape.grad(t), [-2 / 3, -4 / 3, -2.0])


def test_a_tape_subclass_redefines_relus_derivative():
    class Halved(Tape):
        def relu_grad(self, a, positive, g, dst, first):
            def halve():  # asked when the calls run (a recorded pass replays them on new values)
                np.copyto(dst, np.where(a > 0, g / F32(2), F32(0)))

            return [(halve, ())]

    tape = Halved(16)
    x = tape.leaf(np.array([-1.0, 0.0, 2.0], F32))
    tape.backward(tape.sum(tape.relu(x)))
    assert tape.grad(x).tolist() == [0.0, 0.0, 0.5]


rng_ops = np.random.default_rng(13)


def bits(a) -> list[int]:
    return np.asarray(a, F32).view(np.uint32).reshape(-1).tolist()


def ref_dot(row, col) -> np.float32:
    """Each product rounded to float32, then the documented tree order."""
    return reference_tree_sum([F32(F32(a) * F32(b)) for a, b in zip(row, col, strict=True)])


def test_matmul_and_matvec_forward_are_the_float32_bits_of_the_documented_order():
    tape = Tape(4096)
    A = rng_ops.standard_normal((3, 7)).astype(F32)
    B = rng_ops.standard_normal((7, 5)).astype(F32)
    v = rng_ops.standard_normal(7).astype(F32)
    C = tape.val(tape.matmul(tape.leaf(A), tape.leaf(B)))
    assert bits(C) == bits([[ref_dot(A[i], B[:, j]) for j in range(5)] for i in range(3)])
    y = tape.val(tape.matvec(tape.leaf(A), tape.leaf(v)))
    assert bits(y) == bits([ref_dot(A[i], v) for i in range(3)])


def test_add_mul_sum_and_mse_forward_values():
    tape = Tape(256)
    a = rng_ops.standard_normal((2, 3)).astype(F32)
    b = rng_ops.standard_normal((2, 3)).astype(F32)
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


def f32(*values):
    return np.array(values, F32)


def scalar(tape, value):
    return tape.leaf(np.array(value, F32))


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
