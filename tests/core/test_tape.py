"""The f32 tape: float32 throughout, the documented reduction order, and gradients vs finite differences."""

import threading

import numpy as np
import pytest

from nxgates.core.mlp import Dims, ExampleHooks, example_grads, init_data
from nxgates.core.tape import F32, ArenaFull, Tape, constf, tree_sum
from nxgates.gates import ta_gradcheck
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


def test_float64_input_is_refused():
    with pytest.raises(TypeError, match="float32"):
        Tape(8).leaf(np.ones(2))


def test_arena_overflow_is_an_error_not_a_silent_overwrite():
    tape = Tape(5)
    tape.leaf(np.ones(4, F32))
    with pytest.raises(ArenaFull):
        tape.leaf(np.ones(2, F32))


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


@pytest.mark.parametrize("case", ta_gradcheck.OPS, ids=lambda c: c.name)
def test_each_op_matches_float64_central_differences(case):
    v = ta_gradcheck.check_op(case, 1e-6, 10, fault=None)
    assert v.passed and v.worst <= 1, v


def test_wrong_relu_derivative_is_seen_by_the_op_check():
    relu = next(c for c in ta_gradcheck.OPS if c.name == "relu")
    assert not ta_gradcheck.check_op(relu, 1e-6, 10, fault="relu-grad").passed


def test_mlp_grads_match_brute_force_float64_differences():
    """An independent brute-force check of the whole MLP (one whole float64 forward per cell)."""
    dims = Dims(3, 5, 2)
    w, x, t = init_data(dims, 2)
    out = np.empty(dims.n_params, F32)
    example_grads(Tape(dims.arena), dims, w, x[1], t[1], out)

    def loss(wv):
        W1, W2 = wv[:15].reshape(5, 3), wv[15:].reshape(2, 5)
        y = W2 @ np.maximum(W1 @ x[1].astype(float), 0)
        return np.mean((y - t[1]) ** 2)

    w64 = w.astype(float)
    num = [(loss(w64 + e * 1e-6) - loss(w64 - e * 1e-6)) / 2e-6 for e in np.eye(w.size)]
    assert np.allclose(out, num, atol=1e-4)
    assert np.allclose(ta_gradcheck.mlp_numeric(dims, w, x[1], t[1], 1e-6), num, atol=1e-6)


def test_same_bits_on_another_thread_and_another_arena():
    dims = Dims(8, 16, 4)
    w, x, t = init_data(dims, 3)
    here = np.empty(dims.n_params, F32)
    example_grads(Tape(dims.arena), dims, w, x[2], t[2], here)
    there = np.empty(dims.n_params, F32)
    big = Tape(dims.arena * 3)
    big.leaf(np.ones(7, F32))  # a different offset into a different arena
    th = threading.Thread(target=example_grads, args=(Tape(dims.arena), dims, w, x[2], t[2], there))
    th.start()
    th.join()
    assert np.array_equal(here.view(np.uint32), there.view(np.uint32))


class Recording(ExampleHooks):
    """Records the order of the hook calls; moves the hidden layer when asked to."""

    def __init__(self, shift: float = 0.0):
        self.calls: list[str] = []
        self.shift = F32(shift)

    def after_hidden(self, tape, hidden):
        assert hidden.shape == (16,) and not self.calls
        self.calls.append("after_hidden")
        tape.val(hidden)[...] += self.shift

    def before_backward(self):
        self.calls.append("before_backward")


def test_example_hooks_are_called_in_order_and_no_op_hooks_change_no_bit():
    dims = Dims(8, 16, 4)
    w, x, t = init_data(dims, 2)
    plain, hooked = np.empty(dims.n_params, F32), np.empty(dims.n_params, F32)
    loss = example_grads(Tape(dims.arena), dims, w, x[1], t[1], plain)
    hooks = Recording()
    assert example_grads(Tape(dims.arena), dims, w, x[1], t[1], hooked, hooks=hooks) == loss
    assert hooks.calls == ["after_hidden", "before_backward"]
    assert plain.tobytes() == hooked.tobytes()
    base = ExampleHooks()  # the defaults do nothing
    assert example_grads(Tape(dims.arena), dims, w, x[1], t[1], hooked, hooks=base) == loss
    assert plain.tobytes() == hooked.tobytes()


def test_a_hook_that_moves_the_hidden_layer_moves_what_relu_sees():
    dims = Dims(8, 16, 4)
    w, x, t = init_data(dims, 2)
    plain, moved = np.empty(dims.n_params, F32), np.empty(dims.n_params, F32)
    example_grads(Tape(dims.arena), dims, w, x[1], t[1], plain)
    example_grads(Tape(dims.arena), dims, w, x[1], t[1], moved, hooks=Recording(shift=0.25))
    assert plain.tobytes() != moved.tobytes()


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
